"""A small Kubernetes REST client on the standard library: GET, JSON, a deadline per cluster.

TLS trusts the kubeconfig's CA (or nothing is verified when it says insecure-skip-tls-verify); a
client certificate given as data is written to a private temporary folder (files 0600) only for as
long as `ssl` takes to load it. Every failure is a `ReadError` saying whether the cluster was
`unreachable` (no connection, no answer in time) or `unreadable` (it answered, but with an error,
refused credentials or an untrusted certificate); no message carries a token or a kubeconfig.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

from .kubeconfig import ClusterAccess

EXEC_TIMEOUT = 20.0  # seconds for an exec credential plugin (a cloud CLI fetching a token)


class ReadError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message  # kind: "unreachable" | "unreadable"


class KubeClient:
    """GETs against one API server, each within `timeout` seconds, all within `budget` seconds."""

    def __init__(self, access: ClusterAccess, timeout: float, budget: float) -> None:
        self.access, self.timeout, self.budget = access, timeout, budget
        self.deadline = time.monotonic() + budget
        url = urllib.parse.urlsplit(access.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._token = access.token
        self._context: ssl.SSLContext | None = None
        self._connection: http.client.HTTPConnection | None = None

    def get(self, path: str, params: dict[str, str] | None = None) -> dict | None:
        """The JSON object at `path`; None when the API server says 404."""
        if self._connection is None:
            self._prepare()
        target = self._prefix + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": "modelplane-status"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        status, raw = self._send(target, headers)
        if status == 404:
            return None
        if status >= 400:
            raise ReadError("unreadable", _http_problem(status, raw, path))
        try:
            return json.loads(raw)
        except ValueError:
            raise ReadError("unreadable", f"{path} answered with something that is not JSON") from None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # --- plumbing ---------------------------------------------------------------------------------
    def _prepare(self) -> None:
        cert = key = None
        if self.access.exec_plugin is not None:
            credential = exec_credential(self.access.exec_plugin)
            self._token = credential.get("token") or self._token
            if credential.get("clientCertificateData") and credential.get("clientKeyData"):
                cert, key = credential["clientCertificateData"].encode(), credential["clientKeyData"].encode()
        if self._https:
            self._context = tls_context(self.access, cert, key)
        self._connection = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self._remaining()
        if self._https:
            return _TlsConnection(self._host, self._port, timeout, self._context, self.access.tls_server_name)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ReadError("unreachable", f"reading it took longer than the {self.budget:g} s allowed per cluster")
        return min(self.timeout, left)

    def _send(self, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
        for attempt in (1, 2):
            connection = self._connection
            reused = connection.sock is not None
            try:
                timeout = self._remaining()
                if connection.sock is not None:
                    connection.sock.settimeout(timeout)
                else:
                    connection.timeout = timeout
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as error:
                connection.close()
                if reused and attempt == 1:  # a kept-alive connection the server closed: try a new one once
                    continue
                raise ReadError("unreachable", f"the connection was closed ({type(error).__name__})") from None
            except ReadError:
                raise
            except Exception as error:  # noqa: BLE001 - every network failure becomes a ReadError
                connection.close()
                raise _read_error(error, self._host, self._port, self.timeout) from None
        raise AssertionError("unreachable")


class _TlsConnection(http.client.HTTPSConnection):
    """HTTPS with the kubeconfig's tls-server-name, when given, as the name to verify."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext, server_name: str | None):
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)


def tls_context(access: ClusterAccess, cert_pem: bytes | None = None, key_pem: bytes | None = None) -> ssl.SSLContext:
    """Trust the kubeconfig's CA (or verify nothing when it says insecure); present its client certificate."""
    if access.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        try:
            context = ssl.create_default_context(cafile=access.ca_file, cadata=access.ca_pem)
        except (OSError, ssl.SSLError, ValueError):
            raise ReadError("unreadable", f"the certificate authority in its kubeconfig ({access.origin}) cannot be "
                                          "loaded") from None
    cert_pem = cert_pem or access.client_cert_pem
    key_pem = key_pem or access.client_key_pem
    try:
        if cert_pem and key_pem:
            with tempfile.TemporaryDirectory(prefix="modelplane-status-") as folder:  # 0700
                cert_file, key_file = Path(folder) / "client.crt", Path(folder) / "client.key"
                for path, data in ((cert_file, cert_pem), (key_file, key_pem)):
                    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(descriptor, "wb") as file:
                        file.write(data)
                try:
                    context.load_cert_chain(str(cert_file), str(key_file))
                finally:
                    cert_file.unlink(missing_ok=True)
                    key_file.unlink(missing_ok=True)
        elif access.client_cert_file and access.client_key_file:
            context.load_cert_chain(access.client_cert_file, access.client_key_file)
    except (OSError, ssl.SSLError, ValueError):
        raise ReadError("unreadable", f"the client certificate or key in its kubeconfig ({access.origin}) cannot be "
                                      "loaded") from None
    return context


def exec_credential(plugin: dict) -> dict:
    """Run a kubeconfig's exec credential plugin (as kubectl does, non-interactively): its ExecCredential status."""
    command = plugin.get("command")
    if not isinstance(command, str) or not command:
        raise ReadError("unreadable", "its kubeconfig's exec credential plugin names no command")
    args = [str(a) for a in plugin.get("args") or []]
    env = dict(os.environ)
    env.update({str(e.get("name")): str(e.get("value", "")) for e in plugin.get("env") or [] if isinstance(e, dict)})
    env["KUBERNETES_EXEC_INFO"] = json.dumps({
        "apiVersion": plugin.get("apiVersion") or "client.authentication.k8s.io/v1", "kind": "ExecCredential",
        "spec": {"interactive": False}})
    try:
        done = subprocess.run([command, *args], env=env, capture_output=True, timeout=EXEC_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {command!r} is not installed here") from None
    except subprocess.TimeoutExpired:
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {command!r} did not answer within "
                                      f"{EXEC_TIMEOUT:g} s") from None
    except OSError as error:
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {command!r} cannot run "
                                      f"({error.strerror})") from None
    if done.returncode != 0:  # its output is not shown: it may hold a credential
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {command!r} failed (exit {done.returncode})")
    try:
        status = json.loads(done.stdout).get("status") or {}
    except (ValueError, AttributeError):
        status = None
    if not isinstance(status, dict) or not (status.get("token") or status.get("clientCertificateData")):
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {command!r} printed no ExecCredential "
                                      "with a token or client certificate")
    return status


def _read_error(error: Exception, host: str, port: int, timeout: float) -> ReadError:
    where = f"{host}:{port}"
    if isinstance(error, ssl.SSLCertVerificationError):
        return ReadError("unreadable", f"TLS: the certificate of {where} is not trusted by its kubeconfig "
                                       f"({error.verify_message})")
    if isinstance(error, ssl.SSLError):
        return ReadError("unreadable", f"TLS handshake with {where} failed ({error.reason or type(error).__name__})")
    if isinstance(error, (TimeoutError, socket.timeout)):
        return ReadError("unreachable", f"no answer from {where} within {timeout:g} s")
    if isinstance(error, ConnectionRefusedError):
        return ReadError("unreachable", f"connection refused by {where}")
    if isinstance(error, socket.gaierror):
        return ReadError("unreachable", f"cannot resolve {host}")
    if isinstance(error, OSError):
        return ReadError("unreachable", f"cannot connect to {where} ({error.strerror or type(error).__name__})")
    return ReadError("unreachable", f"broken answer from {where} ({type(error).__name__})")


def _http_problem(status: int, raw: bytes, path: str) -> str:
    try:
        message = str(json.loads(raw).get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    message = " ".join(message.split())[:200]
    if status == 401:
        return "HTTP 401: the API server does not accept the kubeconfig's credentials"
    what = f"HTTP {status} on GET {path}"
    return f"{what}: {message}" if message else what
