"""A small Kubernetes REST client on the standard library: GET, JSON, a hard deadline per cluster.

Why not the `kubernetes` package or `lightkube`: measured in docs/status.md ("Why a client of its
own"). In short, neither bounds an answer's total time (their timeouts are per socket read, so a
server trickling a byte every 2 s is never given up on) or its size, so both would need this
module's watchdog and cap around them anyway, for 1.2 s (`kubernetes`) or 0.45 s (`lightkube`) of
import time and, for lightkube, without multi-file `KUBECONFIG` or `proxy-url`.

TLS trusts the kubeconfig's CA (or nothing is verified when it says insecure-skip-tls-verify); a
client certificate given as data is written to a private temporary folder (files 0600) only for as
long as `ssl` takes to load it. Every answer is read whole within the cluster's deadline (a
watchdog shuts the connection down when it passes) and at most `MAX_BODY_BYTES`. Every failure is
a `ReadError` saying whether the cluster was `unreachable` (no connection, no answer in time) or
`unreadable` (it answered, but with an error, an answer of the wrong shape, refused credentials or
an untrusted certificate); no message carries a token or a kubeconfig, and text the API server
sends is shown only without control characters.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import selectors
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import cast

from ..api.errors import ModelplaneError
from ..api.textfile import read_text
from .deadline import Watchdog
from .kubeconfig import ClusterAccess
from .observations import ReadErrorKind

EXEC_TIMEOUT = 20.0  # seconds for an exec credential plugin (a cloud CLI fetching a token), within the cluster's budget
MAX_BODY_BYTES = 64 << 20  # one answer: a namespace's serving pods (about 10 KB each) or its ResourceClaims
MAX_EXEC_OUTPUT = 1 << 20  # an ExecCredential is a few KB
MAX_PEM_FILE_BYTES = 1 << 20
MAX_MESSAGE = 200  # characters of an API server's error message shown


class ReadError(Exception):
    def __init__(self, kind: ReadErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ReadErrorKind = kind
        self.message = message


class KubeClient:
    """GETs against one API server, each within `timeout` seconds per read, all within `budget` seconds."""

    def __init__(self, access: ClusterAccess, timeout: float, budget: float) -> None:
        self.access, self.timeout, self.budget = access, timeout, budget
        self.deadline = time.monotonic() + budget
        self.watchdog = Watchdog(self.deadline)
        url = urllib.parse.urlsplit(access.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._token = access.token
        self._context: ssl.SSLContext | None = None
        self._connection: _Connection | None = None
        self._proxy = urllib.parse.urlsplit(access.proxy) if access.proxy else None

    def get(self, path: str, params: dict[str, str] | None = None, accept: str = "application/json") -> dict | None:
        """The JSON object at `path`; None when the API server says 404. `accept` may ask for a list's metadata only."""
        if self._connection is None:
            self._prepare()
        target = self._prefix + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        headers = {"Accept": accept, "User-Agent": "modelplane-status"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        if self._proxy is not None and not self._https:  # a plain-http server through a proxy: absolute URI
            target = f"http://{_authority(self._host, self._port)}{target}"
            headers.update(_proxy_auth(self._proxy))
        status, raw = self._send(target, headers, path)
        if status == 404:
            return None
        if status >= 400:
            raise ReadError("unreadable", _http_problem(status, raw, path))
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past what the parser takes
            raise ReadError("unreadable", f"GET {path} answered with something that is not JSON") from None
        if not isinstance(value, dict):
            raise ReadError("unreadable", f"GET {path} answered with JSON that is not an object")
        return value

    def close(self) -> None:
        self.watchdog.cancel()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # --- plumbing ---------------------------------------------------------------------------------
    def _prepare(self) -> None:
        cert = key = None
        if self.access.exec_plugin is not None:
            if self._left() <= 0:
                raise self._too_slow()
            credential = exec_credential(self.access.exec_plugin, min(EXEC_TIMEOUT, self._left()))
            self._token = credential.get("token") or self._token
            if credential.get("clientCertificateData") and credential.get("clientKeyData"):
                cert, key = credential["clientCertificateData"].encode(), credential["clientKeyData"].encode()
        if self._https:
            self._context = tls_context(self.access, cert, key)
        self._connection = self._connect()

    def _connect(self) -> _Connection:
        timeout = self._remaining()
        if self._proxy is None:
            return _Connection(
                self._host, self._port, timeout, self.watchdog, self._context, self.access.tls_server_name or self._host
            )
        connection = _Connection(
            self._proxy.hostname or "",
            self._proxy.port or 80,
            timeout,
            self.watchdog,
            self._context,
            self.access.tls_server_name or self._host,
        )
        if self._https:
            connection.set_tunnel(self._host, self._port, headers=_proxy_auth(self._proxy))
        return connection

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _remaining(self) -> float:
        left = self._left()
        if left <= 0 or self.watchdog.expired:
            raise self._too_slow()
        return min(self.timeout, left)

    def _too_slow(self) -> ReadError:
        return ReadError("unreachable", f"reading it took longer than the {self.budget:g} s allowed per cluster")

    def _send(self, target: str, headers: dict[str, str], path: str) -> tuple[int, bytes]:
        for attempt in (1, 2):
            connection = self._connection
            assert connection is not None  # _connect ran
            reused = connection.sock is not None
            try:
                timeout = self._remaining()
                if connection.sock is not None:
                    connection.sock.settimeout(timeout)
                else:
                    connection.timeout = timeout
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
                body = _read_capped(response, path)
                if self.watchdog.expired:  # cut off mid-answer: what was read is not the answer
                    raise self._too_slow()
                return response.status, body
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as error:
                connection.close()
                if self.watchdog.expired:
                    raise self._too_slow() from None
                if reused and attempt == 1:  # a kept-alive connection the server closed: try a new one once
                    continue
                raise ReadError("unreachable", f"the connection was closed ({type(error).__name__})") from None
            except ReadError:
                connection.close()
                raise
            except Exception as error:
                connection.close()
                budget_ran_out = isinstance(error, (TimeoutError, socket.timeout)) and timeout < self.timeout
                if self.watchdog.expired or budget_ran_out:  # (a read's timeout is cut to what is left)
                    raise self._too_slow() from None
                raise _read_error(error, self._host, self._port, self.timeout) from None
        raise AssertionError("unreachable")


class _Connection(http.client.HTTPConnection):
    """HTTP or HTTPS (when given a context: the kubeconfig's tls-server-name, when given, as the name to
    verify), its socket guarded by the cluster's watchdog from the moment it exists."""

    def __init__(
        self, host: str, port: int, timeout: float, watchdog: Watchdog, context: ssl.SSLContext | None, server_name: str
    ):
        super().__init__(host, port, timeout=timeout)
        self._watchdog, self._tls, self._server_name = watchdog, context, server_name

    def connect(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), self.timeout)
        self._watchdog.guard(self.sock)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tunnel_host:  # type: ignore[attr-defined]  # http.client's own proxy tunnel, as its connect() does
            self._tunnel()  # type: ignore[attr-defined]
        if self._tls is not None:  # the TLS socket takes the raw one's descriptor over: guard it before the handshake
            raw = self.sock
            self.sock = self._tls.wrap_socket(raw, server_hostname=self._server_name, do_handshake_on_connect=False)
            self._watchdog.release(raw)
            self._watchdog.guard(self.sock)
            self.sock.do_handshake()

    def close(self) -> None:
        self._watchdog.release(self.sock)
        super().close()


def _read_capped(response: http.client.HTTPResponse, path: str) -> bytes:
    length = response.getheader("Content-Length")
    if length and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise ReadError(
            "unreadable",
            f"GET {path} answered with {int(length):,} bytes; status reads at most "
            f"{MAX_BODY_BYTES >> 20} MiB per answer",
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(min(1 << 20, MAX_BODY_BYTES + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ReadError(
                "unreadable",
                f"GET {path} answered with more than {MAX_BODY_BYTES >> 20} MiB; status "
                "reads at most that much per answer",
            )


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _proxy_auth(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    if proxy.username is None:
        return {}
    pair = f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password or '')}"
    return {"Proxy-Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


def _pem_file(path: str | None, what: str, access: ClusterAccess) -> bytes | None:
    """A certificate or key file the kubeconfig names: a regular file, at most 1 MiB (not /dev/zero, not a FIFO)."""
    if path is None:
        return None
    try:
        return read_text(
            Path(path), f"the {what} file in its kubeconfig ({access.origin})", MAX_PEM_FILE_BYTES
        ).encode()
    except ModelplaneError as error:
        raise ReadError("unreadable", str(error)) from None


def tls_context(access: ClusterAccess, cert_pem: bytes | None = None, key_pem: bytes | None = None) -> ssl.SSLContext:
    """Trust the kubeconfig's CA (or verify nothing when it says insecure); present its client certificate."""
    if access.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        ca_pem = access.ca_pem
        if ca_pem is None and access.ca_file is not None:
            ca_pem = cast(bytes, _pem_file(access.ca_file, "certificate-authority", access)).decode()
        try:
            context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
        except (OSError, ssl.SSLError, ValueError):
            raise ReadError(
                "unreadable", f"the certificate authority in its kubeconfig ({access.origin}) cannot be loaded"
            ) from None
    cert_pem = cert_pem or access.client_cert_pem
    key_pem = key_pem or access.client_key_pem
    if not (cert_pem and key_pem) and access.client_cert_file and access.client_key_file:
        cert_pem = _pem_file(access.client_cert_file, "client-certificate", access)
        key_pem = _pem_file(access.client_key_file, "client-key", access)
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
    except (OSError, ssl.SSLError, ValueError):
        raise ReadError(
            "unreadable", f"the client certificate or key in its kubeconfig ({access.origin}) cannot be loaded"
        ) from None
    return context


def exec_credential(plugin: dict, timeout: float = EXEC_TIMEOUT) -> dict:
    """Run a kubeconfig's exec credential plugin (as kubectl does, non-interactively): its ExecCredential status.

    Its output is read up to `MAX_EXEC_OUTPUT` bytes within `timeout`; what it prints is never shown."""
    command = plugin.get("command")
    if not isinstance(command, str) or not command or "\0" in command:
        raise ReadError("unreadable", "its kubeconfig's exec credential plugin names no command")
    shown = ascii(command)
    raw_args = plugin.get("args") or []
    raw_env = plugin.get("env") or []
    if not isinstance(raw_args, list) or not isinstance(raw_env, list):
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {shown}: args and env must be lists")
    args = [str(a) for a in raw_args]
    env = dict(os.environ)
    env.update({str(e.get("name")): str(e.get("value", "")) for e in raw_env if isinstance(e, dict)})
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {
            "apiVersion": plugin.get("apiVersion")
            if isinstance(plugin.get("apiVersion"), str)
            else "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
    )
    try:
        code, output = _run_capped([command, *args], env, timeout, MAX_EXEC_OUTPUT)
    except FileNotFoundError:
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {shown} is not installed here") from None
    except subprocess.TimeoutExpired:
        raise ReadError(
            "unreadable", f"its kubeconfig's credential plugin {shown} did not answer within {timeout:.3g} s"
        ) from None
    except (OSError, ValueError) as error:  # ValueError: a NUL in an argument or variable
        reason = getattr(error, "strerror", None) or "bad arguments or environment"
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {shown} cannot run ({reason})") from None
    if output is None:
        raise ReadError(
            "unreadable", f"its kubeconfig's credential plugin {shown} printed more than {MAX_EXEC_OUTPUT >> 20} MiB"
        )
    if code != 0:  # its output is not shown: it may hold a credential
        raise ReadError("unreadable", f"its kubeconfig's credential plugin {shown} failed (exit {code})")
    try:
        status = json.loads(output).get("status") or {}
    except (ValueError, AttributeError, RecursionError):
        status = None
    ok = isinstance(status, dict) and (
        _printable_token(status.get("token"))
        or (isinstance(status.get("clientCertificateData"), str) and isinstance(status.get("clientKeyData"), str))
    )
    if not ok:
        raise ReadError(
            "unreadable",
            f"its kubeconfig's credential plugin {shown} printed no ExecCredential with a token or client certificate",
        )
    assert isinstance(status, dict)  # `ok` says so
    return {k: status[k] for k in ("token", "clientCertificateData", "clientKeyData") if isinstance(status.get(k), str)}


def _printable_token(value: object) -> bool:
    return isinstance(value, str) and bool(value) and all("!" <= c <= "~" for c in value)


def _run_capped(argv: list[str], env: dict[str, str], timeout: float, cap: int) -> tuple[int, bytes | None]:
    """(exit code, stdout) of `argv`, stdout read up to `cap` bytes (None past it; the process is killed)
    within `timeout` seconds (subprocess.TimeoutExpired past it). stderr is discarded."""
    deadline = time.monotonic() + max(timeout, 0.0)
    process = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    stdout = process.stdout
    assert stdout is not None  # stdout=PIPE
    chunks: list[bytes] = []
    size = 0
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(argv, timeout)
                if not selector.select(left):
                    continue
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > cap:
                    return -1, None
        code = process.wait(max(deadline - time.monotonic(), 0.01))
        return code, b"".join(chunks)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        stdout.close()


def _read_error(error: Exception, host: str, port: int, timeout: float) -> ReadError:
    where = _authority(host, port) if ":" in host else f"{host}:{port}"
    if isinstance(error, ssl.SSLCertVerificationError):
        return ReadError(
            "unreadable",
            f"TLS: the certificate of {where} is not trusted by its kubeconfig ({clean(str(error.verify_message))})",
        )
    if isinstance(error, ssl.SSLError):
        return ReadError(
            "unreadable", f"TLS handshake with {where} failed ({clean(str(error.reason or type(error).__name__))})"
        )
    if isinstance(error, (TimeoutError, socket.timeout)):
        return ReadError("unreachable", f"no answer from {where} within {timeout:g} s")
    if isinstance(error, ConnectionRefusedError):
        return ReadError("unreachable", f"connection refused by {where}")
    if isinstance(error, socket.gaierror):
        return ReadError("unreachable", f"cannot resolve {host}")
    if isinstance(error, UnicodeError):  # a host name IDNA cannot encode
        return ReadError("unreadable", f"its server's host name {host!a} cannot be encoded (IDNA)")
    if isinstance(error, OSError):
        if "Tunnel connection failed" in str(error):
            return ReadError("unreachable", f"the proxy refused the connection to {where}")
        return ReadError("unreachable", f"cannot connect to {where} ({error.strerror or type(error).__name__})")
    return ReadError("unreachable", f"broken answer from {where} ({type(error).__name__})")


def clean(text: str) -> str:
    """Text from a server, safe on a terminal: control characters (escapes, newlines) become spaces, runs of
    white space one space, at most `MAX_MESSAGE` characters."""
    text = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(text.split())[:MAX_MESSAGE]


def _http_problem(status: int, raw: bytes, path: str) -> str:
    try:
        value = json.loads(raw)
        message = value.get("message") if isinstance(value, dict) else None
    except (ValueError, RecursionError):
        message = None
    message = clean(message) if isinstance(message, str) else ""
    if status == 401:
        return "HTTP 401: the API server does not accept the kubeconfig's credentials"
    what = f"HTTP {status} on GET {path}"
    return f"{what}: {message}" if message else what
