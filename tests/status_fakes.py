"""Fakes for `modelplane status`: a Kubernetes API and a workload gateway on 127.0.0.1, the demo fleet's
kubeconfigs, and a little PKI (made with openssl) for the TLS cases. Fixtures here are imported by the
test modules that use them."""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent
EU, US = "gpu-eu-west", "gpu-us-east"
EU_REPLICA, US_REPLICA = "mock-demo-be445", "mock-demo-49b71"
NAMESPACE = "ml-team"
TOKEN = "tok-7f3a9c-never-print-me"
SECRET_TEXTS = [TOKEN]  # every test's output is checked for these


# --- the fakes ------------------------------------------------------------------------------------------------

def pod(replica: str, ready: bool = True, allocated: bool = True, index: int = 0) -> tuple[dict, dict]:
    """A serving pod of `replica` with one generated ResourceClaim, and that claim."""
    name = f"{replica}-mock-{index}"
    claim_name = f"{name}-devices-x1"
    pod_object = {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"modelplane.ai/serving": replica}},
        "spec": {"resourceClaims": [{"name": "devices", "resourceClaimTemplateName": f"{replica}-mock-devices"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "resourceClaimStatuses": [{"name": "devices", "resourceClaimName": claim_name}]}}
    claim = {"metadata": {"name": claim_name, "namespace": NAMESPACE},
             "status": {"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}} if allocated else {}}
    return pod_object, claim


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class FakeKube:
    """One cluster's API server: pods (label selector honoured), resourceclaims and the workload Gateway."""

    def __init__(self, pods: list[tuple[dict, dict]], gateway_address: str | None, token: str | None = TOKEN,
                 tls: ssl.SSLContext | None = None):
        self.pods = [p for p, _ in pods] + [{"metadata": {"name": "unrelated", "labels": {"app": "x"}}, "spec": {},
                                              "status": {"phase": "Running"}}]
        self.claims = [c for _, c in pods]
        self.gateway = {"metadata": {"name": "inference-gateway"},
                        "status": {"addresses": [{"type": "IPAddress", "value": gateway_address}]
                                   if gateway_address else []}}
        self.token, self.requests = token, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                fake.requests.append((url.path, query, self.headers.get("Authorization")))
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.reply(401, {"kind": "Status", "message": "Unauthorized"})
                if url.path == f"/api/v1/namespaces/{NAMESPACE}/pods":
                    key = query.get("labelSelector", "")
                    items = [p for p in fake.pods if not key or key in p["metadata"].get("labels", {})]
                    return self.reply(200, {"kind": "PodList", "items": items})
                if url.path == f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims":
                    return self.reply(200, {"kind": "ResourceClaimList", "items": fake.claims})
                if url.path == "/apis/gateway.networking.k8s.io/v1/namespaces/modelplane-system/gateways/inference-gateway":
                    return self.reply(200, fake.gateway)
                if url.path.startswith("/api/v1/namespaces/") and url.path.endswith("/pods"):
                    return self.reply(200, {"kind": "PodList", "items": []})
                return self.reply(404, {"kind": "Status", "reason": "NotFound", "message": "not found"})

            def reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        scheme = "https" if isinstance(self.server.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakeGateway:
    """A workload gateway's health answers: `codes[Host]` (default 404), recording (path, Host)."""

    def __init__(self, codes: dict[str, int]):
        self.codes, self.requests = codes, []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                host = self.headers.get("Host", "")
                gateway.requests.append((self.path, host))
                code = gateway.codes.get(host, 404) if self.path == "/health" else 404
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def host_of(replica: str) -> str:
    return f"{replica}.{NAMESPACE}.replica.modelplane.internal"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubeconfig_text(server: str, token: str = TOKEN, **cluster: object) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Config",
                       "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                       "users": [{"name": "admin", "user": {"token": token}}],
                       "contexts": [{"name": "admin@c", "context": {"cluster": "c", "user": "admin"}}],
                       "current-context": "admin@c"}, indent=2)


@dataclass
class Fleet:
    """gpu-eu-west served by a fake API with a healthy replica; gpu-us-east's kubeconfig points at a closed port
    until `serve_us`. Both report the fake gateway's address."""

    gateway: FakeGateway
    eu: FakeKube
    kubeconfigs: Path
    previous: Path
    us: FakeKube | None = None

    def serve_us(self, pods: list[tuple[dict, dict]]) -> FakeKube:
        self.us = FakeKube(pods, self.gateway.address)
        (self.kubeconfigs / US).write_text(kubeconfig_text(self.us.url))
        return self.us


@pytest.fixture(scope="module")
def demo_placement() -> str:
    """The demo's placement, as the last `pulumi up` would have exported it."""
    return modelplane("plan", "--stack", "demo", "--output", "json").stdout


@pytest.fixture
def fleet(tmp_path, demo_placement):
    gateway = FakeGateway({host_of(EU_REPLICA): 200, host_of(US_REPLICA): 200})
    eu = FakeKube([pod(EU_REPLICA)], gateway.address)
    kubeconfigs = tmp_path / "kubeconfigs"
    kubeconfigs.mkdir()
    (kubeconfigs / f"{EU}.yaml").write_text(kubeconfig_text(eu.url))
    (kubeconfigs / US).write_text(kubeconfig_text(f"http://127.0.0.1:{closed_port()}"))
    previous = tmp_path / "previous.json"
    previous.write_text(demo_placement)
    f = Fleet(gateway, eu, kubeconfigs, previous)
    yield f
    for server in (gateway, eu, f.us):
        if server is not None:
            server.close()


def modelplane(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    for secret in SECRET_TEXTS:
        assert secret not in result.stdout and secret not in result.stderr, "a secret was printed"
    assert "Traceback" not in result.stderr
    return result


def status(f, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return modelplane("status", "--stack", "demo", "--previous", str(f.previous), "--kubeconfig-dir",
                      str(f.kubeconfigs), *extra, env=env)


# --- the command ------------------------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=test-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/CN=admin/O=system:masters")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                subject, cwd=d)
        extra = ["-extfile", "san.ext"] if name == "server" else []
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", *extra, cwd=d)
    return d


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def tls_server(pki: Path, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    if require_client_cert:
        context.load_verify_locations(pki / "ca.crt")
        context.verify_mode = ssl.CERT_REQUIRED
    return context


# --- a hostile API server: slow, endless or odd answers -------------------------------------------------

class Hostile:
    """A raw TCP server on 127.0.0.1 that reads a request's head and then runs `behave(connection)`."""

    def __init__(self, behave):
        self.stopped = threading.Event()
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                data = b""
                self.request.settimeout(5)
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = self.request.recv(65536)
                        if not chunk:
                            return
                        data += chunk
                    behave(self.request, hostile.stopped)
                except OSError:  # the client gave up: what it should do
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def trickle(interval: float):
    """A status line, then one byte of a header every `interval` seconds, forever."""
    def behave(connection, stopped):
        connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while not stopped.wait(interval):
            connection.sendall(b"a")
    return behave


def endless_body(connection, stopped):
    """A chunked answer that never ends, as fast as the client reads."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    block = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
    while not stopped.is_set():
        connection.sendall(block)


def answer(status: int, body: bytes):
    def behave(connection, stopped):
        connection.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n%s" % (status, len(body), body))
    return behave
