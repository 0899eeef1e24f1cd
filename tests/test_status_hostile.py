"""`modelplane status` against hostile API servers, gateways and kubeconfigs (issue 25, findings 1-3 and 7).

Every server listens on 127.0.0.1 and stops with its test; the command runs as a subprocess under a
time limit and an address-space limit (as tests/test_hostile_input.py does), so a regression fails
here instead of hanging or swapping the machine. One hostile cluster must never hide the healthy
one: gpu-eu-west is served by a well-behaved fake API (tests/test_status_cli.py's), gpu-us-east by
the hostile one.
"""
from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from status_fakes import (EU, EU_REPLICA, NAMESPACE, TOKEN, US, US_REPLICA, FakeKube, closed_port,  # noqa: F401
                             demo_placement, fleet, host_of, kubeconfig_text, pki, pod, tls_server)
from status_fakes import Hostile, answer, endless_body, trickle  # noqa: F401
from modelplane.status.kubeconfig import parse_kubeconfig
from modelplane.status.live import read_cluster, read_clusters

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 1536 << 20
TIME_LIMIT = 60  # the command's own overall limit is 20 s


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def bounded_status(f, *extra: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "modelplane", "status", "--stack", "demo", "--previous",
                             str(f.previous), "--kubeconfig-dir", str(f.kubeconfigs), *extra],
                            cwd=REPO, capture_output=True, text=True, timeout=TIME_LIMIT, preexec_fn=_limit_memory,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    elapsed = time.monotonic() - started
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr[-3000:]
    assert TOKEN not in result.stdout + result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    return result, elapsed


def serve_hostile_us(f, behave) -> Hostile:
    server = Hostile(behave)
    (f.kubeconfigs / US).write_text(kubeconfig_text(server.url))
    return server


def rows_of(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in stdout.splitlines() if line.startswith("  mock-demo-")}


def assert_eu_still_reported(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert rows_of(result.stdout)[EU_REPLICA][-2:] == ["healthy", "-"], result.stdout
    assert f"  {EU}  ok" in result.stdout


# --- finding 1: bounded in time and memory ------------------------------------------------------------------------

def test_an_api_server_that_trickles_a_byte_every_2_s_is_given_up_on_at_the_cluster_deadline(fleet):
    server = serve_hostile_us(fleet, trickle(2.0))
    try:
        result, elapsed = bounded_status(fleet)
    finally:
        server.close()
    assert_eu_still_reported(result)
    assert f"{US}  unreachable (reading it took longer than the 15 s allowed per cluster)" in result.stdout
    assert elapsed < 25, f"took {elapsed:.1f} s"


def test_an_endless_answer_is_cut_at_the_body_cap(fleet):
    server = serve_hostile_us(fleet, endless_body)
    try:
        result, elapsed = bounded_status(fleet)
    finally:
        server.close()
    assert_eu_still_reported(result)
    assert "answered with more than 64 MiB; status reads at most that much per answer" in result.stdout
    assert elapsed < 25


def test_a_declared_oversized_answer_is_refused_unread(fleet):
    def huge(connection, stopped):
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n{")
    server = serve_hostile_us(fleet, huge)
    try:
        result, _ = bounded_status(fleet)
    finally:
        server.close()
    assert_eu_still_reported(result)
    assert "answered with 999,999,999,999 bytes; status reads at most 64 MiB per answer" in result.stdout


def test_a_gateway_that_trickles_its_health_answer_is_unreachable_within_the_probe_timeout(fleet):
    gateway = Hostile(trickle(0.5))
    us = fleet.serve_us([pod(US_REPLICA)])
    us.gateway["status"]["addresses"][0]["value"] = gateway.address
    try:
        result, elapsed = bounded_status(fleet)
    finally:
        gateway.close()
    assert rows_of(result.stdout)[US_REPLICA][5:8] == ["unreachable", "(no", "complete"], result.stdout
    assert rows_of(result.stdout)[EU_REPLICA][5] == "healthy"
    assert elapsed < 20


def test_the_overall_deadline_holds_whatever_a_cluster_read_is_stuck_in(monkeypatch):
    import modelplane.status.live as live
    monkeypatch.setattr(live, "read_cluster", lambda *args: time.sleep(30))  # stuck where no watchdog reaches
    started = time.monotonic()
    readings = read_clusters({"a": parse_kubeconfig(kubeconfig_text("http://127.0.0.1:1"), "a", "t")}, {},
                             timeout=0.2, budget=0.5, overall=1.0)
    assert time.monotonic() - started < 3
    assert readings["a"].error == "not read within status's overall limit of 1 s"


def test_the_read_timeout_is_per_read_and_the_budget_bounds_the_whole(monkeypatch):
    """A trickle faster than the per-read timeout is cut by the budget, not by the timeout."""
    server = Hostile(trickle(0.1))
    try:
        started = time.monotonic()
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(server.url), US, "t"), [NAMESPACE],
                               timeout=0.5, budget=1.0)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert reading.error == "reading it took longer than the 1 s allowed per cluster"
    assert elapsed < 3


def test_a_tls_handshake_that_trickles_is_cut_at_the_cluster_deadline():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve():
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)  # the ClientHello
            connection.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB, sent a byte at a time
            while not stop.wait(0.1):
                try:
                    connection.sendall(b"\x00")
                except OSError:
                    return

    threading.Thread(target=serve, daemon=True).start()
    url = f"https://127.0.0.1:{listener.getsockname()[1]}"
    try:
        started = time.monotonic()
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(url, **{"insecure-skip-tls-verify": True}), US, "t"),
                               [NAMESPACE], timeout=5.0, budget=1.0)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        listener.close()
    assert reading.error == "reading it took longer than the 1 s allowed per cluster"
    assert elapsed < 3


def test_an_answer_trickled_over_tls_is_cut_at_the_cluster_deadline(pki):
    """After the handshake every read is over the TLS socket, which took the connection over: the watchdog must
    guard that one, or a byte every 0.1 s keeps the read alive for ever."""
    context = tls_server(pki, require_client_cert=False)
    server = Hostile(trickle(0.1))
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    url = server.url.replace("http://", "https://")
    access = parse_kubeconfig(kubeconfig_text(url, **{"insecure-skip-tls-verify": True}), US, "t")
    result = []
    worker = threading.Thread(target=lambda: result.append(read_cluster(access, [NAMESPACE], timeout=5.0,
                                                                        budget=1.0)), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(10)
    elapsed = time.monotonic() - started
    server.close()
    assert result, "the read was still going after 10 s"
    assert result[0].error == "reading it took longer than the 1 s allowed per cluster"
    assert elapsed < 3


# --- finding 2: one odd cluster never hides the others ------------------------------------------------------------

ODD_ANSWERS = [
    ("a_list", b"[1, 2]", "answered with JSON that is not an object"),
    ("items_a_number", b'{"items": 5}', "answered with `items` that is not a list"),
    ("not_json", b"<html>", "answered with something that is not JSON"),
    ("latin1", '{"items": ["caf\xe9"]}'.encode("latin-1"), "answered with something that is not JSON"),
    ("deeply_nested", b"[" * 200_000 + b"]" * 200_000, "answered with something that is not JSON"),
]


@pytest.mark.parametrize("body, message", [c[1:] for c in ODD_ANSWERS], ids=[c[0] for c in ODD_ANSWERS])
def test_an_answer_of_an_odd_shape_makes_only_that_cluster_unreadable(fleet, body, message):
    server = serve_hostile_us(fleet, answer(200, body))
    try:
        result, _ = bounded_status(fleet)
    finally:
        server.close()
    assert_eu_still_reported(result)
    assert f"{US}  unreadable (GET /api/v1/namespaces/{NAMESPACE}/pods {message})" in result.stdout


ODD_OBJECTS = [
    ("metadata_null", {"metadata": None, "spec": {}, "status": {}}),
    ("labels_a_list", {"metadata": {"name": "p", "labels": ["modelplane.ai/serving"]}}),
    ("label_value_a_list", {"metadata": {"name": "p", "labels": {"modelplane.ai/serving": [US_REPLICA]}}}),
    ("status_a_string", {"metadata": {"name": "p", "labels": {"modelplane.ai/serving": US_REPLICA}}, "status": "x",
                         "spec": {"resourceClaims": [{"name": 5}, "x"]}}),
    ("conditions_numbers", {"metadata": {"name": ["p"], "labels": {"modelplane.ai/serving": US_REPLICA}},
                            "status": {"conditions": [1, None], "resourceClaimStatuses": {"a": 1}}}),
    ("item_a_number", 7),
]


@pytest.mark.parametrize("item", [c[1] for c in ODD_OBJECTS], ids=[c[0] for c in ODD_OBJECTS])
def test_objects_of_an_odd_shape_read_as_missing_fields(item):
    """Every GET gets the same list: the pods, the claims (odd ones too) and the Gateway (no address in it)."""
    claims = [{"metadata": None}, {"metadata": {"name": ["x"]}, "status": []}, 3]
    server = Hostile(answer(200, json.dumps({"items": [item, *claims]}).encode()))
    try:
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(server.url), US, "t"), [NAMESPACE])
    finally:
        server.close()
    assert reading.error is None, reading.error
    assert reading.gateway_address is None


def test_a_gateway_status_of_an_odd_shape_gives_no_address():
    for status in ({"addresses": "x"}, {"addresses": [5]}, {"addresses": [{"value": ["x"]}]}, None, [],
                   {"addresses": [{"value": "\x1b[31mevil"}]}):
        kube = FakeKube([], None)
        kube.gateway = {"status": status}
        try:
            reading = read_cluster(parse_kubeconfig(kubeconfig_text(kube.url), US, "t"), [NAMESPACE])
        finally:
            kube.close()
        assert reading.error is None and reading.gateway_address is None, (status, reading)


def test_api_server_error_text_is_shown_without_terminal_escapes(fleet):
    message = "\x1b]0;owned\x07\x1b[31mdenied\x1b[0m\nnext line\u202e"
    server = serve_hostile_us(fleet, answer(500, json.dumps({"kind": "Status", "message": message}).encode()))
    try:
        result, _ = bounded_status(fleet)
    finally:
        server.close()
    assert_eu_still_reported(result)
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US}"))
    assert "HTTP 500 on GET /api/v1/namespaces/ml-team/pods: ]0;owned [31mdenied [0m next line" in line
    assert all(c.isprintable() for c in result.stdout.replace("\n", ""))


def test_pod_names_from_the_api_server_are_printed_escaped(fleet):
    evil, _ = pod(US_REPLICA, ready=False)
    evil["metadata"]["name"] = "p\x1b[2Jwiped"
    us = fleet.serve_us([])
    us.pods.insert(0, evil)
    result, _ = bounded_status(fleet)
    assert "! mock-demo-49b71: pods 0/1 ready (not ready: p\\x1b[2Jwiped)" in result.stdout


def odd_kubeconfig(tmp_path: Path, case: str) -> str:
    good = json.loads(kubeconfig_text("https://127.0.0.1:6443"))
    if case == "bad_url":
        good["clusters"][0]["cluster"]["server"] = "https://[::1"
    elif case == "bad_port":
        good["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:99999"
    elif case == "port_0":
        good["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:0"
    elif case == "context_a_list":
        good["contexts"][0]["context"] = {"cluster": ["c"], "user": {"u": 1}}
    elif case == "clusters_a_mapping":
        good["clusters"] = {"c": 1}
    elif case in ("token_dev_zero", "token_fifo", "token_latin1", "token_sparse"):
        del good["users"][0]["user"]["token"]
        target = tmp_path / case
        if case == "token_dev_zero":
            target.symlink_to("/dev/zero")
        elif case == "token_fifo":
            os.mkfifo(target)
        elif case == "token_latin1":
            target.write_bytes("caf\xe9".encode("latin-1"))
        else:
            with open(target, "wb") as file:
                file.truncate(3 << 30)
        good["users"][0]["user"]["tokenFile"] = str(target)
    elif case == "deep":
        return "[" * 100_000
    return json.dumps(good)


ODD_KUBECONFIGS = [
    ("bad_url", "the cluster's server must be an https:// or http:// URL (it has an invalid host or port)"),
    ("bad_port", "the cluster's server must be an https:// or http:// URL (it has an invalid host or port)"),
    ("port_0", "the cluster's server must be an https:// or http:// URL (port 0)"),
    ("context_a_list", "its context's cluster and user must be names"),
    ("clusters_a_mapping", "clusters must be a list"),
    ("token_dev_zero", "its tokenFile"),
    ("token_fifo", "is not a regular file (a pipe or a device)"),
    ("token_latin1", "is not UTF-8 text"),
    ("token_sparse", "the limit is 0.0625 MiB"),
    ("deep", "unreadable ("),
]


@pytest.mark.parametrize("case, message", ODD_KUBECONFIGS, ids=[c[0] for c in ODD_KUBECONFIGS])
def test_an_odd_kubeconfig_makes_only_its_cluster_unreadable(fleet, tmp_path, case, message):
    (fleet.kubeconfigs / US).write_text(odd_kubeconfig(tmp_path, case))
    result, elapsed = bounded_status(fleet)
    assert_eu_still_reported(result)
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US}"))
    assert "unreadable (" in line and message in line, line
    assert elapsed < 30


def plugin(tmp_path: Path, body: str) -> str:
    script = tmp_path / "plugin"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(0o755)
    return str(script)


EXEC_OUTPUTS = [
    ("deep", "sys.stdout.write('[' * 300000)", "printed no ExecCredential"),
    ("binary", "sys.stdout.buffer.write(bytes(range(256)) * 10)", "printed no ExecCredential"),
    ("flood", "chunk = b'x' * 65536\nwhile True: sys.stdout.buffer.write(chunk)", "printed more than 1 MiB"),
    ("status_a_list", "print('{\"status\": [1]}')", "printed no ExecCredential"),
    ("token_a_number", "print('{\"status\": {\"token\": 5}}')", "printed no ExecCredential"),
    ("token_with_a_newline", "print('{\"status\": {\"token\": \"a\\\\nb\"}}')", "printed no ExecCredential"),
    ("hangs", "import time\ntime.sleep(60)", "did not answer within"),
]


@pytest.mark.parametrize("body, message", [c[1:] for c in EXEC_OUTPUTS], ids=[c[0] for c in EXEC_OUTPUTS])
def test_odd_exec_plugin_output_makes_only_its_cluster_unreadable(fleet, tmp_path, body, message):
    text = json.loads(kubeconfig_text(fleet.eu.url))
    text["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                         "command": plugin(tmp_path, body)}}
    (fleet.kubeconfigs / US).write_text(json.dumps(text))
    result, elapsed = bounded_status(fleet)
    assert_eu_still_reported(result)
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US}"))
    assert "unreadable (its kubeconfig's credential plugin" in line and message in line, line
    assert elapsed < 30


# --- finding 3: kubeconfigs as users have them ----------------------------------------------------------------------

def test_an_auth_provider_is_reported_unsupported_not_unreachable(fleet):
    text = json.loads(kubeconfig_text(f"http://127.0.0.1:{closed_port()}"))
    text["users"][0]["user"] = {"auth-provider": {"name": "oidc", "config": {"id-token": TOKEN}}}
    (fleet.kubeconfigs / US).write_text(json.dumps(text))
    result, _ = bounded_status(fleet)
    assert_eu_still_reported(result)
    assert (f"{US}  unreadable (its kubeconfig ({US} in --kubeconfig-dir) authenticates with an auth-provider "
            "plugin (oidc), which status does not support") in result.stdout
    assert f"modelplane drain {US}" not in result.stdout


def test_with_every_cluster_unreachable_the_problem_is_said_to_be_on_this_side(fleet):
    (fleet.kubeconfigs / f"{EU}.yaml").write_text(kubeconfig_text(f"http://127.0.0.1:{closed_port()}"))
    result, _ = bounded_status(fleet)
    assert result.returncode == 1
    assert "modelplane drain" not in result.stdout
    assert "note: no cluster could be reached from this machine: the problem is most likely on this side" \
        in result.stdout
    data = json.loads(bounded_status(fleet, "--output", "json")[0].stdout)
    assert all(c["commands"] == [] for c in data["clusters"])


def test_proxy_url_is_used(fleet):
    """The server's name does not resolve; the proxy (the fake API itself, which takes absolute URIs) is reached."""
    us = fleet.serve_us([pod(US_REPLICA)])
    text = json.loads(kubeconfig_text("http://kube.invalid:6443"))
    text["clusters"][0]["cluster"]["proxy-url"] = us.url
    (fleet.kubeconfigs / US).write_text(json.dumps(text))
    result, _ = bounded_status(fleet)
    assert result.returncode == 0, result.stdout
    assert any(path == f"/api/v1/namespaces/{NAMESPACE}/pods" for path, _, _ in us.requests)


def test_http_proxy_and_no_proxy_from_the_environment(fleet):
    us = fleet.serve_us([pod(US_REPLICA)])
    (fleet.kubeconfigs / US).write_text(kubeconfig_text("http://kube.invalid:6443"))
    proxied, _ = bounded_status(fleet, env={"HTTP_PROXY": us.url, "NO_PROXY": "example.com"})
    assert proxied.returncode == 0, proxied.stdout
    bypassed, _ = bounded_status(fleet, env={"HTTP_PROXY": us.url, "NO_PROXY": ".invalid"})
    assert f"{US}  unreachable (cannot resolve kube.invalid)" in bypassed.stdout


def test_a_socks_proxy_is_reported_unsupported(fleet):
    text = json.loads(kubeconfig_text("https://10.0.0.1:6443"))
    text["clusters"][0]["cluster"]["proxy-url"] = "socks5://127.0.0.1:1080"
    (fleet.kubeconfigs / US).write_text(json.dumps(text))
    result, _ = bounded_status(fleet)
    assert_eu_still_reported(result)
    assert "its proxy-url is a socks5:// proxy; status supports http:// proxies only" in result.stdout


def test_kubeconfig_with_several_files_and_contexts(fleet, tmp_path):
    """A cluster --kubeconfig-dir lacks is looked up in $KUBECONFIG (several files, merged as kubectl does) by a
    context named like it; relative paths resolve against the file that holds them."""
    us = fleet.serve_us([pod(US_REPLICA)])
    (fleet.kubeconfigs / US).unlink()
    first, second = tmp_path / "a" / "config", tmp_path / "b" / "config"
    first.parent.mkdir()
    second.parent.mkdir()
    first.write_text(json.dumps({"clusters": [{"name": "other", "cluster": {"server": "http://127.0.0.1:1"}}],
                                 "contexts": [{"name": "other", "context": {"cluster": "other"}}],
                                 "current-context": "other"}))
    (second.parent / "token").write_text(TOKEN)
    second.write_text(json.dumps({"clusters": [{"name": "us", "cluster": {"server": us.url}},
                                               {"name": "other", "cluster": {"server": us.url}}],
                                  "users": [{"name": "u", "user": {"tokenFile": "token"}}],
                                  "contexts": [{"name": US, "context": {"cluster": "us", "user": "u"}}]}))
    result, _ = bounded_status(fleet, env={"KUBECONFIG": f"{first}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{second}"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert {auth for _, _, auth in us.requests} == {f"Bearer {TOKEN}"}


# --- finding 7: names and hosts status builds requests from ------------------------------------------------------

@pytest.mark.parametrize("field, value", [("namespace", "../../api/v1/secrets"), ("cluster", "../../etc/passwd"),
                                          ("name", "x?y=1")])
def test_a_placement_with_names_that_are_not_kubernetes_names_is_refused(fleet, field, value):
    document = json.loads(fleet.previous.read_text())
    document["replicas"][0][field] = value
    fleet.previous.write_text(json.dumps(document))
    result, _ = bounded_status(fleet)
    assert result.returncode == 2 and result.stdout == ""
    assert f"the last placement holds names that are not Kubernetes names: replicas[0].{field} {value!r}" \
        in result.stderr


def test_a_host_name_idna_cannot_encode_is_reported_not_a_traceback(fleet):
    long_label = "a" * 64
    (fleet.kubeconfigs / US).write_text(kubeconfig_text(f"http://{long_label}.example:6443"))
    us = FakeKube([pod(EU_REPLICA)], f"{long_label}.example")
    (fleet.kubeconfigs / f"{EU}.yaml").write_text(kubeconfig_text(us.url))
    try:
        result, _ = bounded_status(fleet)
    finally:
        us.close()
    assert f"{US}  unreadable (its server's host name '{long_label}.example' cannot be encoded (IDNA))" \
        in result.stdout
    assert "the gateway address 'aaaa" in result.stdout
