"""`modelplane status` as a user runs it (a subprocess) against a fake Kubernetes API and a fake gateway.

The fake API (`http.server` on 127.0.0.1) serves the pods, ResourceClaims and workload Gateway of one
cluster, checks the bearer token, and records every request. The gateway address it reports is a
second little server's `127.0.0.1:<port>`, which answers `/health` per Host header the way a
workload gateway would. The demo stack's two clusters are gpu-eu-west and gpu-us-east.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from status_fakes import (  # noqa: F401  (fixtures)
    EU,
    EU_REPLICA,
    FakeKube,
    NAMESPACE,
    REPO,
    TOKEN,
    US,
    US_REPLICA,
    b64,
    closed_port,
    demo_placement,
    fleet,
    host_of,
    kubeconfig_text,
    modelplane,
    openssl,
    pki,
    pod,
    status,
    tls_server,
)
from modelplane.status.kube_client import ReadError, tls_context
from modelplane.status.kubeconfig import parse_kubeconfig
from modelplane.status.live import read_cluster, read_clusters
from terminal import run_with_terminal_stderr


def test_a_healthy_replica_and_an_unreachable_cluster(fleet):
    started = time.monotonic()
    result = status(fleet)
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < 30
    lines = result.stdout.splitlines()
    assert lines[:2] == ["stack demo: the live fleet, read from each cluster's API server now",
                         "endpoints probed from this machine the way the front door probes them: GET /health on the "
                         "replica's workload gateway, Host: the replica's virtual host, 200 expected"]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("  mock-demo-")}
    assert rows[EU_REPLICA] == [EU_REPLICA, EU, EU, "1/1", "1/1", "healthy", "healthy", "-"]
    assert rows[US_REPLICA] == [US_REPLICA, US, US, "?", "?", "?", "unreachable", "-"]
    text = result.stdout
    assert f"  {US}  unreachable (connection refused by 127.0.0.1:" in text
    assert (f"{US} is unreachable: if it stays down, move its replicas away:\n"
            f"  modelplane drain {US} --effect NoExecute --stack demo\n  pulumi up --stack demo\n") in text
    assert f"  {EU}  ok" in text and fleet.gateway.address in text
    assert lines[-1] == ("degraded: 2 replicas (1 healthy, 1 unreachable); clusters read: 1 of 2; "
                         "drift from the last pulumi up: none")
    assert fleet.gateway.requests == [("/health", host_of(EU_REPLICA))]  # the front door's probe, from here


def test_the_drain_suggestion_is_a_command_that_works(fleet, tmp_path):
    result = status(fleet, "--output", "json")
    command = json.loads(result.stdout)["clusters"][1]["commands"][0].split()
    assert command[:2] == ["modelplane", "drain"]
    stack = tmp_path / "stacks" / "Pulumi.demo.yaml"
    stack.parent.mkdir()
    shutil.copy(REPO / "stacks" / "Pulumi.demo.yaml", stack)
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    drained = modelplane(*command[1:], cwd=tmp_path)
    assert drained.returncode == 0, drained.stderr
    assert "{key: modelplane.ai/drain, effect: NoExecute}" in stack.read_text()


def test_json_output(fleet):
    result = status(fleet, "--output", "json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["summary"] == {"state": "degraded", "exitCode": 1, "replicas": 2, "healthy": 1, "degraded": 0,
                               "unreachable": 1, "unreadable": 0, "notRead": 0, "pending": 0,
                               "drift": {"add": 0, "remove": 0, "move": 0}, "unreachableClusters": [US]}
    eu, us = data["deployments"][0]["replicas"]
    assert (eu["name"], eu["health"], eu["pods"]["ready"], eu["claims"]["allocated"], eu["endpoint"]["state"]) == \
        (EU_REPLICA, "healthy", 1, 1, "healthy")
    assert (us["name"], us["health"], us["pods"], us["claims"], us["endpoint"]) == (US_REPLICA, "unreachable", None,
                                                                                   None, None)
    clusters = {c["name"]: c for c in data["clusters"]}
    assert clusters[EU]["gatewayAddress"] == fleet.gateway.address and clusters[EU]["state"] == "ok"
    assert clusters[US]["commands"] == [f"modelplane drain {US} --effect NoExecute --stack demo", "pulumi up --stack demo"]


def test_all_healthy_exits_0(fleet):
    fleet.serve_us([pod(US_REPLICA)])
    result = status(fleet)
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == ("healthy: 2 replicas (2 healthy); clusters read: 2 of 2; "
                                              "drift from the last pulumi up: none")
    assert sorted(fleet.gateway.requests) == sorted([("/health", host_of(EU_REPLICA)), ("/health", host_of(US_REPLICA))])


def test_the_api_is_asked_for_the_serving_pods_with_the_token(fleet):
    status(fleet)
    paths = [(path, query) for path, query, _ in fleet.eu.requests]
    assert (f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": "modelplane.ai/serving"}) in paths
    assert {auth for _, _, auth in fleet.eu.requests} == {f"Bearer {TOKEN}"}


def test_a_failing_probe_degrades_the_replica(fleet):
    fleet.serve_us([pod(US_REPLICA)])
    fleet.gateway.codes[host_of(US_REPLICA)] = 503
    result = status(fleet)
    assert result.returncode == 1
    assert f"  ! {US_REPLICA}: endpoint unhealthy (HTTP 503)" in result.stdout
    assert "unhealthy (HTTP 503)  degraded" in result.stdout


def test_no_probe_skips_the_endpoint(fleet):
    fleet.serve_us([pod(US_REPLICA)])
    fleet.gateway.codes.clear()  # would fail every probe
    result = status(fleet, "--no-probe")
    assert result.returncode == 0 and fleet.gateway.requests == []
    assert "endpoints not probed (--no-probe)" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US_REPLICA}"))
    assert row.split()[3:7] == ["1/1", "1/1", "-", "healthy"]


def test_pods_not_ready_and_claims_unallocated(fleet):
    fleet.serve_us([pod(US_REPLICA, ready=False, allocated=False)])
    result = status(fleet, "--no-probe")
    assert result.returncode == 1
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US_REPLICA}"))
    assert row.split()[3:7] == ["0/1", "0/1", "-", "degraded"]
    assert (f"  ! {US_REPLICA}: pods 0/1 ready (not ready: {US_REPLICA}-mock-0); claims 0/1 allocated "
            f"({US_REPLICA}-mock-0: claim {US_REPLICA}-mock-0-devices-x1 not allocated)") in result.stdout


def test_drift_is_shown_and_alone_exits_0(fleet, tmp_path):
    """A config edit not applied yet is no failure: the fleet the last `pulumi up` made is healthy."""
    fleet.serve_us([pod(US_REPLICA)])
    previous = json.loads(fleet.previous.read_text())
    previous["replicas"] = [r for r in previous["replicas"] if r["cluster"] == EU]  # the last up placed one
    fleet.previous.write_text(json.dumps(previous))
    result = status(fleet)
    assert result.returncode == 0
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"  {US_REPLICA}"))
    assert row.split()[3:] == ["1/1", "1/1", "-", "pending", "add"]
    assert result.stdout.splitlines()[-1] == (
        "drift: 2 replicas (1 healthy, 1 pending); clusters read: 2 of 2; drift from the last pulumi up: 1 to add "
        "(apply with: pulumi up --stack demo)")


def test_a_wrong_token_makes_the_cluster_unreadable(fleet):
    (fleet.kubeconfigs / f"{EU}.yaml").write_text(kubeconfig_text(fleet.eu.url, token="wrong-token"))
    result = status(fleet, "--output", "json")
    eu = json.loads(result.stdout)["clusters"][0]
    assert (result.returncode, eu["state"], eu["detail"]) == (
        1, "unreadable", "HTTP 401: the API server does not accept the kubeconfig's credentials")
    assert "wrong-token" not in result.stdout


def test_no_secret_in_any_output(fleet):
    key = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC-secret-key\n").decode()
    for cluster, server in ((EU, fleet.eu.url), (US, f"https://127.0.0.1:{closed_port()}")):
        text = json.dumps({"clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                           "users": [{"name": "u", "user": {"token": TOKEN, "client-key-data": key}}],
                           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                           "current-context": "x"})
        (fleet.kubeconfigs / f"{cluster}.yaml").write_text(text)
    (fleet.kubeconfigs / US).unlink()
    outputs = [status(fleet, *extra) for extra in ((), ("--output", "json"), ("--no-probe",))]
    fleet.eu.token = "another-token"  # the API server refuses ours now
    outputs.append(status(fleet, "--output", "json"))
    (fleet.kubeconfigs / f"{US}.yaml").write_text("clusters: [{cluster: {server: " + TOKEN + "}}")  # no valid YAML
    outputs.append(status(fleet))
    assert [o.returncode for o in outputs] == [1, 1, 1, 1, 1]  # that cluster is unreadable, the others are read
    assert f"{US}  unreadable (the kubeconfig of cluster {US} ({US}.yaml in --kubeconfig-dir) is not valid YAML" \
        in outputs[-1].stdout
    for output in outputs:
        for secret in (TOKEN, key, "secret-key", "MIIEvQ", "BEGIN PRIVATE"):
            assert secret not in output.stdout + output.stderr


# --- bad input: exit 2, no traceback, no secret -----------------------------------------------------------------

def test_a_cluster_without_a_kubeconfig(fleet):
    (fleet.kubeconfigs / US).unlink()
    result = status(fleet)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: no kubeconfig for cluster {US} in --kubeconfig-dir {fleet.kubeconfigs}: "
                                    f"add {fleet.kubeconfigs / US}")


def test_an_unreadable_kubeconfig_is_named_never_shown_and_hides_no_other_cluster(fleet):
    (fleet.kubeconfigs / US).write_text(f"users: [{{token: {TOKEN}}}\n  : [")
    result = status(fleet)
    assert result.returncode == 1 and result.stderr == ""
    assert (f"{US}  unreadable (the kubeconfig of cluster {US} ({US} in --kubeconfig-dir) is not valid YAML at "
            "line 2)") in result.stdout
    assert f"{EU}  ok" in result.stdout and "1 healthy" in result.stdout


def test_a_bad_previous_placement(fleet):
    fleet.previous.write_text("{not json")
    result = status(fleet)
    assert result.returncode == 2 and "is not JSON" in result.stderr


def test_a_bad_config(fleet, tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text((REPO / "stacks" / "Pulumi.demo.yaml").read_text().replace("replicas: 2", "replicas: 12"))
    result = modelplane("status", "--config", str(bad), "--previous", str(fleet.previous),
                        "--kubeconfig-dir", str(fleet.kubeconfigs))
    assert result.returncode == 2 and "must be at most 10 (got 12)" in result.stderr


def test_without_pulumi_it_says_what_to_pass(fleet, tmp_path):
    env = {"PATH": str(tmp_path / "empty"), "MODELPLANE_PULUMI": ""}
    no_previous = modelplane("status", "--stack", "demo", "--kubeconfig-dir", str(fleet.kubeconfigs), env=env)
    assert no_previous.returncode == 2
    assert "`pulumi` is not on PATH (or set MODELPLANE_PULUMI to it); pass --previous FILE instead" in no_previous.stderr
    no_kubeconfigs = modelplane("status", "--stack", "demo", "--previous", str(fleet.previous), env=env)
    assert no_kubeconfigs.returncode == 2
    assert "pass --kubeconfig-dir DIR instead (one kubeconfig per cluster" in no_kubeconfigs.stderr
    neither = modelplane("status", "--stack", "demo", env=env)
    assert neither.returncode == 2
    assert "pass --previous FILE and --kubeconfig-dir DIR instead" in neither.stderr


# --- reading the stack with the Pulumi CLI (a fake `pulumi`) ---------------------------------------------------------

FAKE_PULUMI = """#!{python}
import json, os, sys
from pathlib import Path
here = Path(__file__).parent
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"args": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
if "--fail" in (here / "mode").read_text():
    print("error: no stack named 'demo' found", file=sys.stderr)
    sys.exit(255)
if sys.argv[1:3] == ["stack", "output"]:
    outputs = json.loads((here / "outputs.json").read_text())
    if "--show-secrets" not in sys.argv:
        outputs = {{k: ("[secret]" if k == "kubeconfigs" else v) for k, v in outputs.items()}}
    print(json.dumps(outputs))
elif sys.argv[1] == "config":
    print((here / "config.json").read_text())
"""


@dataclass
class FakePulumi:
    folder: Path

    @property
    def path(self) -> Path:
        return self.folder / "pulumi"

    def calls(self) -> list[dict]:
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def fake_pulumi(tmp_path):
    folder = tmp_path / "fake-pulumi"
    folder.mkdir()
    fake = FakePulumi(folder)
    fake.path.write_text(FAKE_PULUMI.format(python=sys.executable))
    fake.path.chmod(0o755)
    (folder / "mode").write_text("ok")
    return fake


def test_placement_and_kubeconfigs_from_the_stack_outputs(fleet, fake_pulumi):
    fleet.serve_us([pod(US_REPLICA)])
    kubeconfigs = {EU: kubeconfig_text(fleet.eu.url), US: kubeconfig_text(fleet.us.url)}
    (fake_pulumi.folder / "outputs.json").write_text(json.dumps({"placement": json.loads(fleet.previous.read_text()),
                                                          "kubeconfigs": kubeconfigs}))
    result = modelplane("status", "--stack", "demo", env={"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(c["args"], c["cwd"]) for c in fake_pulumi.calls()] == [
        (["stack", "output", "--json", "--stack", "demo", "--show-secrets", "--non-interactive"], str(REPO))]


def test_only_the_placement_read_needs_no_secrets(fleet, fake_pulumi):
    (fake_pulumi.folder / "outputs.json").write_text(json.dumps({"placement": json.loads(fleet.previous.read_text())}))
    result = modelplane("status", "--stack", "demo", "--kubeconfig-dir", str(fleet.kubeconfigs),
                        env={"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")})
    assert result.returncode == 1  # gpu-us-east is unreachable
    assert [c["args"] for c in fake_pulumi.calls()] == [["stack", "output", "--json", "--stack", "demo",
                                                         "--non-interactive"]]


def test_a_stack_never_deployed_is_all_drift(fleet, fake_pulumi):
    (fake_pulumi.folder / "outputs.json").write_text("{}")
    result = modelplane("status", "--stack", "demo", "--kubeconfig-dir", str(fleet.kubeconfigs), "--no-probe",
                        env={"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")})
    assert result.returncode == 1
    assert "note: stack demo has no `placement` output: it has not been deployed with `pulumi up` yet" in result.stdout
    assert "drift from the last pulumi up: 2 to add" in result.stdout


def test_a_failing_pulumi_is_reported_with_what_to_pass(fleet, fake_pulumi):
    (fake_pulumi.folder / "mode").write_text("--fail")
    result = modelplane("status", "--stack", "demo", "--kubeconfig-dir", str(fleet.kubeconfigs),
                        env={"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: `pulumi stack output --json --stack demo` failed in {REPO}: no stack named 'demo' found; pass "
        "--previous FILE instead (the placement of the last `pulumi up`: `pulumi stack output placement --json > FILE`)")


def existing_project(tmp_path: Path, fleet) -> Path:
    """A project whose stack `ex` is the demo with both clusters Existing (kubeconfigs as secrets)."""
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(REPO / "Pulumi.yaml", project / "Pulumi.yaml")
    text = (REPO / "stacks" / "Pulumi.demo.yaml").read_text()
    for cluster, kind in ((EU, "modelplane-eu-west"), (US, "modelplane-us-east")):
        text = text.replace(f"source: Kind\n        kind: {{clusterName: {kind}}}",
                            "source: Existing\n        existing:\n          kubeconfig:\n"
                            "            secure: v1:abc:def")
    (project / "stacks" / "Pulumi.ex.yaml").write_text(text)
    return project


def test_existing_clusters_kubeconfigs_from_the_stack_config(fleet, fake_pulumi, tmp_path):
    fleet.serve_us([pod(US_REPLICA)])
    project = existing_project(tmp_path, fleet)
    clusters = {EU: {"cluster": {"source": "Existing", "existing": {"kubeconfig": kubeconfig_text(fleet.eu.url)}}},
                US: {"cluster": {"source": "Existing", "existing": {"kubeconfig": kubeconfig_text(fleet.us.url)}}}}
    (fake_pulumi.folder / "outputs.json").write_text(json.dumps({"placement": json.loads(fleet.previous.read_text())}))
    (fake_pulumi.folder / "config.json").write_text(json.dumps({"modelplane:inferenceClusters": {
        "value": json.dumps(clusters), "objectValue": clusters, "secret": True}}))
    env = {"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")}
    by_name = modelplane("status", "--stack", "ex", cwd=project, env=env)
    assert by_name.returncode == 0, by_name.stdout + by_name.stderr
    stack_file = project / "stacks" / "Pulumi.ex.yaml"
    by_file = modelplane("status", "--config", str(stack_file), cwd=tmp_path, env=env)
    assert by_file.returncode == 0, by_file.stdout + by_file.stderr
    calls = [(c["args"][:2], c["cwd"]) for c in fake_pulumi.calls()]
    assert calls == [(["stack", "output"], str(project)), (["config", "--show-secrets"], str(project))] * 2
    assert fake_pulumi.calls()[-1]["args"][-3:] == ["--config-file", str(stack_file), "--non-interactive"]


def test_no_kubeconfig_anywhere_in_the_stack(fleet, fake_pulumi):
    (fake_pulumi.folder / "outputs.json").write_text(json.dumps({"placement": json.loads(fleet.previous.read_text())}))
    result = modelplane("status", "--stack", "demo", env={"MODELPLANE_PULUMI": str(fake_pulumi.folder / "pulumi")})
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: no kubeconfig for clusters {EU}, {US}: stack demo has no `kubeconfigs` "
                                    "output for them")
    assert "pass --kubeconfig-dir DIR instead" in result.stderr


# --- the client: TLS, client certificates, exec plugins, dead clusters ------------------------------------------------


def test_tls_with_the_kubeconfigs_ca_and_client_certificate(pki, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the client's key is written, briefly
    server = FakeKube([pod(EU_REPLICA)], "10.0.0.9", token=None, tls=tls_server(pki, require_client_cert=True))
    try:
        text = json.dumps({"clusters": [{"name": "c", "cluster": {"server": server.url,
                                                                  "certificate-authority-data": b64(pki / "ca.crt")}}],
                           "users": [{"name": "u", "user": {"client-certificate-data": b64(pki / "client.crt"),
                                                            "client-key-data": b64(pki / "client.key")}}],
                           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"})
        reading = read_cluster(parse_kubeconfig(text, EU, "test"), [NAMESPACE])
    finally:
        server.close()
    assert reading.error is None, reading.error
    assert reading.gateway_address == "10.0.0.9" and reading.replicas[(NAMESPACE, EU_REPLICA)].allocated == 1
    assert list(tmp_path.iterdir()) == []  # the key file is gone


def test_tls_without_the_client_certificate_is_refused(pki):
    server = FakeKube([pod(EU_REPLICA)], "10.0.0.9", tls=tls_server(pki, require_client_cert=True))
    try:
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(server.url, **{"certificate-authority-data":
                                                                               b64(pki / "ca.crt")}), EU, "test"),
                               [NAMESPACE])
    finally:
        server.close()
    assert reading.error_kind in ("unreadable", "unreachable") and TOKEN not in (reading.error or "")


def test_tls_with_an_untrusted_certificate_is_unreadable(pki, tmp_path):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.crt", "-days", "1",
            "-subj", "/CN=other-ca", cwd=tmp_path)
    server = FakeKube([pod(EU_REPLICA)], "10.0.0.9", tls=tls_server(pki, require_client_cert=False))
    try:
        untrusted = read_cluster(parse_kubeconfig(kubeconfig_text(server.url, **{"certificate-authority-data":
                                                                                 b64(tmp_path / "other.crt")}), EU, "t"),
                                 [NAMESPACE])
        insecure = read_cluster(parse_kubeconfig(kubeconfig_text(server.url, **{"insecure-skip-tls-verify": True}),
                                                 EU, "t"), [NAMESPACE])
    finally:
        server.close()
    assert untrusted.error_kind == "unreadable" and "is not trusted by its kubeconfig" in untrusted.error
    assert insecure.error is None and insecure.replicas[(NAMESPACE, EU_REPLICA)].ready == 1


def test_a_bad_client_key_is_named_not_shown(pki):
    access = parse_kubeconfig(json.dumps({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64(pki / "client.crt"),
                                         "client-key-data": base64.b64encode(b"not a key " + TOKEN.encode()).decode()}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}), EU, "origin-x")
    with pytest.raises(ReadError) as error:
        tls_context(access)
    assert error.value.message == "the client certificate or key in its kubeconfig (origin-x) cannot be loaded"


def test_an_exec_credential_plugin_supplies_the_token(tmp_path):
    plugin = tmp_path / "get-token"
    plugin.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'kind': 'ExecCredential', "
                      f"'status': {{'token': {TOKEN!r}}}}}))\n")
    plugin.chmod(0o755)
    server = FakeKube([pod(EU_REPLICA)], "10.0.0.9")
    try:
        text = json.dumps({"clusters": [{"name": "c", "cluster": {"server": server.url}}],
                           "users": [{"name": "u", "user": {"exec": {
                               "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}}],
                           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"})
        reading = read_cluster(parse_kubeconfig(text, EU, "t"), [NAMESPACE])
        broken = parse_kubeconfig(text.replace(str(plugin), str(tmp_path / "missing")), EU, "t")
        missing = read_cluster(broken, [NAMESPACE])
    finally:
        server.close()
    assert reading.error is None and reading.replicas[(NAMESPACE, EU_REPLICA)].pods == 1
    assert missing.error == f"its kubeconfig's credential plugin {str(tmp_path / 'missing')!r} is not installed here"


def test_a_cluster_that_never_answers_costs_its_timeout_and_clusters_are_read_together():
    silent = [socket.socket() for _ in range(6)]
    try:
        accesses = {}
        for i, s in enumerate(silent):
            s.bind(("127.0.0.1", 0))
            s.listen(8)  # the kernel accepts connections; nobody ever answers
            name = f"silent-{i}"
            accesses[name] = parse_kubeconfig(kubeconfig_text(f"http://127.0.0.1:{s.getsockname()[1]}"), name, "t")
        started = time.monotonic()
        readings = read_clusters(accesses, {name: {NAMESPACE} for name in accesses}, timeout=0.5, budget=1.0)
        elapsed = time.monotonic() - started
    finally:
        for s in silent:
            s.close()
    assert elapsed < 2.0, f"six silent clusters took {elapsed:.1f} s: read one after another (3 s)?"
    assert {r.error_kind for r in readings.values()} == {"unreachable"}
    assert all("within 0.5 s" in r.error for r in readings.values())


# --- progress on a terminal only ---------------------------------------------------------------------------------

def test_status_shows_its_progress_on_a_terminal_and_nothing_otherwise(fleet):
    """The reads take seconds per unreachable cluster: a terminal sees what status is doing; a pipe sees nothing."""
    piped = status(fleet)
    assert (piped.returncode, piped.stderr) == (1, "")
    done, text = run_with_terminal_stderr(
        [sys.executable, "-m", "modelplane", "status", "--stack", "demo", "--previous", str(fleet.previous),
         "--kubeconfig-dir", str(fleet.kubeconfigs)],
        cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1 and done.stdout == piped.stdout
    lines = [line for line in text.split("\r\x1b[K") if line]
    assert lines[:3] == ["status: reading clusters (0/2)...", "status: reading clusters (1/2)...",
                         "status: reading clusters (2/2)..."]
    assert lines[3] == "status: probing replicas (0/1)..." and lines[-1] == "status: probing replicas (1/1)..."
    assert text.endswith("\r\x1b[K")  # cleared before the table is printed


def test_status_reading_the_stack_output_says_so_on_a_terminal(fleet, fake_pulumi):
    (fake_pulumi.folder / "outputs.json").write_text(json.dumps({"placement": json.loads(fleet.previous.read_text())}))
    done, text = run_with_terminal_stderr(
        [sys.executable, "-m", "modelplane", "status", "--stack", "demo", "--kubeconfig-dir", str(fleet.kubeconfigs)],
        cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "MODELPLANE_PULUMI": str(fake_pulumi.path)})
    assert done.returncode == 1, done.stdout
    assert "status: reading the last placement of stack demo (pulumi stack output)..." in text
    assert text.endswith("\r\x1b[K")
