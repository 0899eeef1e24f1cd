"""A tiny Kubernetes REST client on the standard library, for the end-to-end harness.

The local API servers use self-signed certificates and bearer tokens, so TLS verification is off.
Connection failures (a cluster stopped on purpose) surface as OSError; HTTP errors as ApiError.
Each thread keeps one connection open (http.client): a TLS handshake per request costs the API server
5x the CPU of the request itself. `watch` hands a fake kubelet each change as it happens.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable

import yaml

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


class ApiError(Exception):
    """An HTTP error from the API server, with the Status object's reason and message."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = "") -> None:
        self.status, self.reason, self.message = status, reason, message
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {reason}: {message}".replace("\n", " "))


class KubeApi:
    def __init__(self, server: str, token: str, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        url = urllib.parse.urlsplit(self.server)
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname or "127.0.0.1", url.port or (443 if self._https else 80)
        self._context = ssl.create_default_context()
        self._context.check_hostname = False
        self._context.verify_mode = ssl.CERT_NONE
        self._local = threading.local()  # .connection: this thread's kept-alive connection
        self._watches: set[http.client.HTTPConnection] = set()
        self._watch_lock = threading.Lock()

    @classmethod
    def from_kubeconfig(cls, text: str) -> "KubeApi":
        """The current context's server and token (or the first ones when no context is current)."""
        config = yaml.safe_load(text)
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        context = contexts.get(config.get("current-context")) or next(iter(contexts.values()), {})
        clusters = {c["name"]: c["cluster"] for c in config["clusters"]}
        users = {u["name"]: u["user"] for u in config["users"]}
        cluster = clusters.get(context.get("cluster")) or config["clusters"][0]["cluster"]
        user = users.get(context.get("user")) or config["users"][0]["user"]
        return cls(cluster["server"], user["token"])

    def request(self, method: str, path: str, body: dict | None = None, *, content_type: str = "application/json",
                params: dict | None = None) -> dict | None:
        raw = self._send(method, path, body, content_type, params, self.timeout)
        return json.loads(raw) if raw else None

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(self, method: str, path: str, body: dict | None, content_type: str, params: dict | None,
              timeout: float, accept: str = "application/json", keep: bool = True) -> bytes:
        target = path + (f"?{urllib.parse.urlencode(params, doseq=True)}" if params else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": accept}
        if data is not None:
            headers["Content-Type"] = content_type
        retried = False
        while True:
            kept = getattr(self._local, "connection", None) if keep else None
            connection = kept or self._connect(timeout)
            try:
                connection.request(method, target, body=data, headers=headers)
                response = connection.getresponse()
                raw = response.read()
                break
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                self._local.connection = None
                # A kept connection the server closed while idle: the request never ran, send it on a new one.
                if kept is not None and not retried and not isinstance(error, TimeoutError):
                    retried = True
                    continue
                if isinstance(error, OSError):
                    raise
                raise ConnectionError(f"{method} {path}: {error!r}") from error
        if keep:
            self._local.connection = None if response.will_close else connection
        if not keep or response.will_close:
            connection.close()
        if response.status >= 400:
            raise _api_error(response.status, response.reason, raw, method, path)
        return raw

    def get(self, path: str) -> dict | None:
        try:
            return self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list(self, path: str, *, label_selector: str | None = None, field_selector: str | None = None,
             metadata_only: bool = False) -> list[dict]:
        """The collection's items; `metadata_only` asks for PartialObjectMetadata (a fraction of the bytes)."""
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        accept = METADATA_LIST if metadata_only else "application/json"
        raw = self._send("GET", path, None, "", params or None, self.timeout, accept)
        return (json.loads(raw) if raw else {}).get("items") or []

    def watch(self, path: str, on_event: Callable[[dict], None], stop: threading.Event, *, retry: float = 1.0,
              timeout_seconds: int = 300) -> None:
        """Call `on_event(event)` for each event (`{"type": ..., "object": ...}`, the object in full) of a watch on
        the collection `path`, until `stop` is set.

        A watch the server ends is started again; one that fails (a stopped API server, a kind not served yet) is
        retried every `retry` seconds. A new watch first lists what exists as ADDED events, so `on_event` sees the
        whole collection again after any gap. `close_watches()` from another thread ends a blocked read at once.
        """
        target = f"{path}?{urllib.parse.urlencode({'watch': 1, 'timeoutSeconds': timeout_seconds})}"
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        while not stop.is_set():
            connection = self._connect(timeout_seconds + 30)
            with self._watch_lock:
                self._watches.add(connection)
            try:
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
                if response.status >= 400:
                    raise _api_error(response.status, response.reason, response.read(), "GET", path)
                while not stop.is_set() and (line := response.readline()):
                    on_event(json.loads(line))
                continue
            except (OSError, http.client.HTTPException, ApiError, ValueError, AttributeError):
                pass  # ValueError, AttributeError: a read on a connection close_watches() shut
            finally:
                with self._watch_lock:
                    self._watches.discard(connection)
                connection.close()
            stop.wait(retry)

    def close_watches(self) -> None:
        """End every watch's blocked read (their loops then see their `stop`)."""
        with self._watch_lock:
            connections = list(self._watches)
        for connection in connections:
            with contextlib.suppress(OSError, AttributeError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    def create(self, path: str, obj: dict) -> dict:
        return self.request("POST", path, obj)

    def apply(self, path: str, obj: dict, field_manager: str = "modelplane-e2e") -> dict:
        """Server-side apply; JSON is YAML, so the body stays JSON."""
        return self.request("PATCH", path, obj, content_type="application/apply-patch+yaml",
                            params={"fieldManager": field_manager, "force": "true"})

    def merge_patch(self, path: str, patch: dict) -> dict:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(self, path: str, body: dict | None = None) -> None:
        try:
            self.request("DELETE", path, body)
        except ApiError as error:
            if error.status != 404:
                raise

    def ready(self) -> bool:
        try:
            self._send("GET", "/readyz", None, "", None, min(self.timeout, 5.0), keep=False)  # "ok", not JSON
            return True
        except (OSError, ApiError):
            return False


def _api_error(code: int, http_reason: str, raw: bytes, method: str, path: str) -> ApiError:
    text = raw.decode(errors="replace")
    try:
        status = json.loads(text)
        reason, message = status.get("reason") or http_reason, status.get("message") or text
    except (ValueError, AttributeError):
        reason, message = http_reason, text.strip()
    return ApiError(code, str(reason), str(message), method, path)


def object_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    """`v1, pods, ns, x` -> /api/v1/namespaces/ns/pods/x; `apps/v1, deployments` -> /apis/apps/v1/deployments."""
    path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    return path + (f"/{name}" if name else "")
