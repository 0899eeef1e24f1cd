"""`modelplane status`, the pure core: drift, health, exit codes and views, with no network.

The demo stack (two workload clusters, mock-demo with one replica on each) is planned against a
placement; each case says what the clusters and probes showed and what status must conclude.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplane import runbook
from modelplane.cli import load_file
from modelplane.scheduling import PlacementDocument, schedule
from modelplane.status.kubeconfig import KubeconfigError, parse_kubeconfig
from modelplane.status.observations import ClusterReading, Probe, ReplicaPods, gateway_address, replica_pods
from modelplane.status.probe import split_address
from modelplane.status.replicas import serving_pods, watched_replicas
from modelplane.status.report import Runbook, StatusReport, build_report
from modelplane.status.stack import kubeconfigs_from_config, kubeconfigs_from_outputs
from modelplane.status.table import status_table

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "stacks" / "Pulumi.demo.yaml"
EU, US = "gpu-eu-west", "gpu-us-east"
EU_REPLICA, US_REPLICA = "mock-demo-be445", "mock-demo-49b71"
RUNBOOK = Runbook("--stack demo", "--stack demo")


def fleet_from(tmp_path: Path, *edits) -> object:
    text = DEMO.read_text()
    for edit in edits:
        text = edit(text).text
    path = tmp_path / "Pulumi.demo.yaml"
    path.write_text(text)
    return load_file(path)[1]


@pytest.fixture(scope="module")
def demo():
    fleet = load_file(DEMO)[1]
    return fleet, schedule(fleet, None).document()


def healthy_pods() -> ReplicaPods:
    return ReplicaPods(pods=1, ready=1, claims=1, allocated=1)


def reading(cluster: str, pods: dict[str, ReplicaPods] | None = None, address: str | None = "10.0.0.1",
            **error) -> ClusterReading:
    if error:
        return ClusterReading(cluster, **error)
    return ClusterReading(cluster, gateway_address=address,
                          replicas={("ml-team", name): p for name, p in (pods or {}).items()})


def fleet_readings(eu: ReplicaPods | None = None, us: ReplicaPods | None = None) -> dict[str, ClusterReading]:
    return {EU: reading(EU, {EU_REPLICA: eu or healthy_pods()}), US: reading(US, {US_REPLICA: us or healthy_pods()})}


ALL_HEALTHY = {("ml-team", EU_REPLICA): Probe("healthy", 200), ("ml-team", US_REPLICA): Probe("healthy", 200)}


def report_of(fleet, previous, readings, probes=ALL_HEALTHY):
    result = schedule(fleet, previous)
    return build_report("demo", result, watched_replicas(result, previous), readings, probes, RUNBOOK)


def rows_of(report) -> dict[str, object]:
    return {r.replica.name: r for r in report.replicas()}


# --- health and exit codes ------------------------------------------------------------------------------

CASES = [
    # name, eu pods, us pods, probes, eu reading override, expected (state, exit, eu health, us health, eu problem)
    ("healthy", None, None, ALL_HEALTHY, None, ("healthy", 0, "healthy", "healthy", None)),
    ("probe skipped", None, None, None, None, ("healthy", 0, "healthy", "healthy", None)),
    ("pods not ready", ReplicaPods(1, 0, 1, 1, not_ready=("p-1",)), None, ALL_HEALTHY, None,
     ("degraded", 1, "degraded", "healthy", "pods 0/1 ready (not ready: p-1)")),
    ("no pods at all", ReplicaPods(), None, ALL_HEALTHY, None,
     ("degraded", 1, "degraded", "healthy", "pods 0/1 ready; claims 0/1 allocated")),
    ("claim unallocated", ReplicaPods(1, 1, 1, 0, unallocated=("p-1: claim c-1 not allocated",)), None, ALL_HEALTHY,
     None, ("degraded", 1, "degraded", "healthy", "claims 0/1 allocated (p-1: claim c-1 not allocated)")),
    ("probe unhealthy", None, None, {**ALL_HEALTHY, ("ml-team", EU_REPLICA): Probe("unhealthy", 503)}, None,
     ("degraded", 1, "degraded", "healthy", "endpoint unhealthy (HTTP 503)")),
    ("probe unreachable", None, None, {**ALL_HEALTHY, ("ml-team", EU_REPLICA): Probe("unreachable", detail="no answer")},
     None, ("degraded", 1, "degraded", "healthy", "endpoint unreachable (no answer)")),
    ("gateway without an address", None, None, {("ml-team", US_REPLICA): Probe("healthy", 200)},
     reading(EU, {EU_REPLICA: healthy_pods()}, address=None),
     ("degraded", 1, "degraded", "healthy", "endpoint unreachable (its cluster's workload gateway has no address)")),
    ("gateway without an address, probe skipped", None, None, None, reading(EU, {EU_REPLICA: healthy_pods()}, address=None),
     ("healthy", 0, "healthy", "healthy", None)),
    ("cluster unreachable", None, None, ALL_HEALTHY,
     reading(EU, error="connection refused by 127.0.0.1:1", error_kind="unreachable"),
     ("degraded", 1, "unreachable", "healthy", "cluster gpu-eu-west is unreachable: connection refused by 127.0.0.1:1")),
    ("cluster refuses the credentials", None, None, ALL_HEALTHY,
     reading(EU, error="HTTP 401: the API server does not accept the kubeconfig's credentials", error_kind="unreadable"),
     ("degraded", 1, "unreadable", "healthy",
      "cluster gpu-eu-west is unreadable: HTTP 401: the API server does not accept the kubeconfig's credentials")),
]


@pytest.mark.parametrize("name, eu, us, probes, eu_reading, expected", CASES, ids=[c[0] for c in CASES])
def test_health_and_exit_code(demo, name, eu, us, probes, eu_reading, expected):
    fleet, previous = demo
    readings = fleet_readings(eu, us)
    if eu_reading is not None:
        readings[EU] = eu_reading
    report = report_of(fleet, previous, readings, probes)
    state, code, eu_health, us_health, eu_problem = expected
    rows = rows_of(report)
    assert (report.state, report.exit_code, rows[EU_REPLICA].health, rows[US_REPLICA].health) == \
        (state, code, eu_health, us_health)
    assert "; ".join(rows[EU_REPLICA].problems) == (eu_problem or "")
    assert report.drift() == {"add": 0, "remove": 0, "move": 0}


def test_columns_of_a_healthy_replica_and_of_one_on_an_unreachable_cluster(demo):
    fleet, previous = demo
    readings = fleet_readings()
    readings[US] = reading(US, error="connection refused by 127.0.0.1:1", error_kind="unreachable")
    rows = rows_of(report_of(fleet, previous, readings))
    eu, us = rows[EU_REPLICA], rows[US_REPLICA]
    assert (eu.pods_text, eu.claims_text, eu.endpoint_text) == ("1/1", "1/1", "healthy")
    assert (us.pods_text, us.claims_text, us.endpoint_text) == ("?", "?", "?")


def test_an_unreachable_cluster_gets_the_drain_suggestion(demo):
    fleet, previous = demo
    readings = fleet_readings()
    readings[US] = reading(US, error="no answer from 10.1.2.3:6443 within 5 s", error_kind="unreachable")
    report = report_of(fleet, previous, readings)
    cluster = {c.name: c for c in report.clusters}[US]
    assert cluster.state == "unreachable" and cluster.replicas == 1
    assert cluster.commands == ("modelplane drain gpu-us-east --effect NoExecute --stack demo", "pulumi up --stack demo")
    text = status_table(report)
    assert "gpu-us-east is unreachable: if it stays down, move its replicas away:\n" \
           "  modelplane drain gpu-us-east --effect NoExecute --stack demo\n  pulumi up --stack demo\n" in text
    assert "unreachable (no answer from 10.1.2.3:6443 within 5 s)" in text
    assert report.to_dict()["summary"]["unreachableClusters"] == [US]


def test_the_drain_suggestion_names_a_stack_file_the_way_drain_takes_it(demo):
    fleet, previous = demo
    readings = {**fleet_readings(), US: reading(US, error="x", error_kind="unreachable")}
    result = schedule(fleet, previous)
    runbook_for_file = Runbook("--config stacks/Pulumi.demo.yaml", "--stack demo --config-file stacks/Pulumi.demo.yaml")
    report = build_report("stacks/Pulumi.demo.yaml", result, watched_replicas(result, previous), readings, None,
                          runbook_for_file)
    assert {c.name: c for c in report.clusters}[US].commands == (
        "modelplane drain gpu-us-east --effect NoExecute --config stacks/Pulumi.demo.yaml",
        "pulumi up --stack demo --config-file stacks/Pulumi.demo.yaml")


# --- drift ------------------------------------------------------------------------------------------------

def test_no_drift_after_up(demo):
    fleet, previous = demo
    watched = watched_replicas(schedule(fleet, previous), previous)
    assert [(r.name, r.deployed, r.drift.change) for r in watched["ml-team/mock-demo"]] == [
        (EU_REPLICA, True, "none"), (US_REPLICA, True, "none")]


def test_drift_add_a_first_deployment_is_all_pending(demo):
    fleet, _ = demo
    report = report_of(fleet, PlacementDocument(), {EU: reading(EU), US: reading(US)}, None)
    rows = rows_of(report)
    assert [(r.health, r.replica.drift.text) for r in rows.values()] == [("pending", "add"), ("pending", "add")]
    assert (report.state, report.exit_code, report.drift()) == ("drift", 0, {"add": 2, "remove": 0, "move": 0})
    assert rows[EU_REPLICA].pods_text == "0/1" and rows[EU_REPLICA].endpoint_text == "-"


def test_drift_add_after_a_scale_up(tmp_path, demo):
    _, two = demo
    one = schedule(fleet_from(tmp_path, lambda t: runbook.scale(t, "ml-team/mock-demo", 1)), None).document()
    fleet = fleet_from(tmp_path)
    report = report_of(fleet, one, fleet_readings(), None)
    drift = {r.replica.name: (r.replica.deployed, r.replica.drift.change, r.health) for r in report.replicas()}
    assert drift == {EU_REPLICA: (True, "none", "healthy"), US_REPLICA: (False, "add", "pending")}
    assert report.drift() == {"add": 1, "remove": 0, "move": 0} and report.exit_code == 0
    assert "drift from the last pulumi up: 1 to add (apply with: pulumi up --stack demo)" in report.summary()


def test_drift_remove_after_a_scale_down(tmp_path, demo):
    _, previous = demo
    fleet = fleet_from(tmp_path, lambda t: runbook.scale(t, "ml-team/mock-demo", 1))
    report = report_of(fleet, previous, fleet_readings(), None)
    drift = {r.replica.name: (r.replica.deployed, r.replica.drift.text, r.health) for r in report.replicas()}
    assert drift == {EU_REPLICA: (True, "-", "healthy"), US_REPLICA: (True, "remove (scaled down)", "healthy")}
    assert (report.state, report.exit_code, report.drift()) == ("drift", 0, {"add": 0, "remove": 1, "move": 0})


def test_drift_move_after_a_noexecute_drain(tmp_path):
    one = fleet_from(tmp_path, lambda t: runbook.scale(t, "ml-team/mock-demo", 1))
    previous = schedule(one, None).document()  # mock-demo-be445 on gpu-eu-west
    drained = fleet_from(tmp_path, lambda t: runbook.scale(t, "ml-team/mock-demo", 1),
                         lambda t: runbook.drain(t, EU, "NoExecute"))
    readings = {EU: reading(EU, {EU_REPLICA: healthy_pods()}), US: reading(US)}
    report = report_of(drained, previous, readings, None)
    rows = [(r.replica.name, r.replica.cluster, r.replica.deployed, r.replica.drift.change, r.replica.drift.partner,
             r.health) for r in report.replicas()]
    assert rows == [(US_REPLICA, US, False, "move", EU_REPLICA, "pending"),
                    (EU_REPLICA, EU, True, "move", US_REPLICA, "healthy")]
    texts = [r.replica.drift.text for r in report.replicas()]
    assert texts == [f"move from {EU} (evicted by taint modelplane.ai/drain (NoExecute); replaces {EU_REPLICA})",
                     f"move to {US} (evicted by taint modelplane.ai/drain (NoExecute); replaced by {US_REPLICA})"]
    assert report.drift() == {"add": 0, "remove": 0, "move": 1} and report.exit_code == 0


def test_drift_remove_of_a_deployment_no_longer_in_the_config(tmp_path, demo):
    _, previous = demo
    renamed = fleet_from(tmp_path, lambda t: runbook.Edit(t.replace("mock-demo:", "other-demo:", 1)
                                                            .replace("modelplane.ai/deployment: mock-demo",
                                                                     "modelplane.ai/deployment: other-demo")))
    report = report_of(renamed, previous, fleet_readings(), None)
    gone = {d.key: d for d in report.deployments}["ml-team/mock-demo"]
    assert gone.header == "ml-team/mock-demo: no longer in the stack config"
    assert [(r.replica.drift.text, r.health) for r in gone.replicas] == [("remove (deployment removed)", "healthy")] * 2


def test_serving_pods_count_standalone_pods_and_leaderworkerset_leaders(demo):
    _, previous = demo
    assert serving_pods(previous.replicas[0].engines) == (1, 1)

    class M:
        def __init__(self, role, claims):
            self.role, self.device_requests = role, ("gpu",) if claims else ()

    class E:
        def __init__(self, copies, members):
            self.copies, self.members = copies, members

    assert serving_pods([E(2, [M("Leader", True), M("Worker", True)]), E(3, [M("Standalone", False)])]) == (5, 2)


# --- JSON ---------------------------------------------------------------------------------------------------

def test_json_keys_are_stable(demo):
    fleet, previous = demo
    readings = {**fleet_readings(), US: reading(US, error="connection refused", error_kind="unreachable")}
    data = json.loads(json.dumps(report_of(fleet, previous, readings).to_dict()))
    assert list(data) == ["apiVersion", "kind", "stack", "probed", "summary", "deployments", "clusters", "notes", "fallbacks"]
    assert data["summary"] == {"state": "degraded", "exitCode": 1, "replicas": 2, "healthy": 1, "degraded": 0,
                               "unreachable": 1, "unreadable": 0, "notRead": 0, "pending": 0,
                               "drift": {"add": 0, "remove": 0, "move": 0}, "unreachableClusters": [US]}
    replica = data["deployments"][0]["replicas"][0]
    assert list(replica) == ["name", "cluster", "index", "pools", "deployed", "health", "problems", "pods", "claims",
                             "endpoint", "drift"]
    assert replica["pods"] == {"ready": 1, "expected": 1, "observed": 1, "notReady": []}
    assert replica["claims"] == {"allocated": 1, "needed": 1, "unallocated": []}
    assert replica["endpoint"] == {"state": "healthy", "httpStatus": 200, "detail": ""}
    assert data["deployments"][0]["replicas"][1]["pods"] is None
    assert list(data["clusters"][0]) == ["name", "state", "detail", "gatewayAddress", "replicas", "advice", "commands",
                                         "caveat"]


# --- reading API objects -------------------------------------------------------------------------------------

def pod(name, replica, ready=True, claim="devices", generated=None, phase="Running"):
    return {"metadata": {"name": name, "labels": {"modelplane.ai/serving": replica}},
            "spec": {"resourceClaims": [{"name": claim, "resourceClaimTemplateName": "t"}] if claim else []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       **({"resourceClaimStatuses": [{"name": claim, "resourceClaimName": generated}]} if generated else {})}}


def claim(name, allocated=True):
    return {"metadata": {"name": name}, "status": {"allocation": {"devices": {"results": []}}} if allocated else {}}


def test_pods_and_claims_read_per_replica():
    pods = [pod("a-1", "a", generated="a-1-devices"), pod("a-2", "a", ready=False, generated="a-2-devices"),
            pod("b-1", "b"), pod("c-1", "c", phase="Succeeded"), pod("d-1", "d", claim=None),
            pod("e-1", "e", generated="e-1-devices")]
    observed = replica_pods(pods, [claim("a-1-devices"), claim("a-2-devices", allocated=False)])
    assert observed["a"] == ReplicaPods(2, 1, 2, 1, ("a-2",), ("a-2: claim a-2-devices not allocated",))
    assert observed["b"] == ReplicaPods(1, 1, 1, 0, (), ("b-1: claim devices not created yet",))
    assert "c" not in observed  # a finished pod is no longer the replica's
    assert observed["d"] == ReplicaPods(1, 1, 0, 0)
    assert observed["e"].unallocated == ("e-1: claim e-1-devices missing",)


@pytest.mark.parametrize("gateway, address", [
    ({"status": {"addresses": [{"type": "IPAddress", "value": "10.0.0.7"}]}}, "10.0.0.7"),
    ({"status": {"addresses": []}}, None), ({}, None), (None, None),
])
def test_gateway_address(gateway, address):
    assert gateway_address(gateway) == address


@pytest.mark.parametrize("address, host_port", [
    ("10.0.0.1", ("10.0.0.1", 80)), ("gw.example.com", ("gw.example.com", 80)),
    ("127.0.0.1:8080", ("127.0.0.1", 8080)), ("[::1]:8080", ("::1", 8080)), ("::1", ("::1", 80)),
    ("[fd00::1]", ("fd00::1", 80)),
])
def test_gateway_addresses_with_and_without_a_port(address, host_port):
    assert split_address(address, 80) == host_port


# --- kubeconfigs and what Pulumi prints ---------------------------------------------------------------------------

TOKEN = "s3cr3t-t0ken-do-not-print"


def kubeconfig(server="https://10.0.0.1:6443", user=None, cluster_extra=None, contexts=None, current="main"):
    return json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster_extra or {})}},
                     {"name": "other", "cluster": {"server": "https://10.9.9.9"}}],
        "users": [{"name": "u", "user": user or {"token": TOKEN}}, {"name": "nobody", "user": {}}],
        "contexts": contexts or [{"name": "main", "context": {"cluster": "c", "user": "u"}},
                                 {"name": "alt", "context": {"cluster": "other", "user": "nobody"}}],
        "current-context": current})


def test_kubeconfig_current_context_token_and_ca():
    access = parse_kubeconfig(kubeconfig(cluster_extra={"certificate-authority-data": "LS0tLS1CRUdJTg=="}), EU, "test")
    assert (access.server, access.token, access.ca_pem, access.insecure) == ("https://10.0.0.1:6443", TOKEN,
                                                                               "-----BEGIN", False)
    assert TOKEN not in repr(access) and TOKEN not in str(access)


def test_kubeconfig_named_context_wins_and_a_missing_one_falls_back():
    assert parse_kubeconfig(kubeconfig(), EU, "test", context="alt").server == "https://10.9.9.9"
    assert parse_kubeconfig(kubeconfig(), EU, "test", context="nope").server == "https://10.0.0.1:6443"


def test_kubeconfig_relative_files_resolve_against_its_folder(tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    access = parse_kubeconfig(kubeconfig(user={"tokenFile": "token", "client-certificate": "c.crt",
                                               "client-key": "c.key"},
                                         cluster_extra={"insecure-skip-tls-verify": True}), EU, "test",
                              base_dir=tmp_path)
    assert (access.token, access.insecure, access.client_cert_file) == (TOKEN, True, str(tmp_path / "c.crt"))


@pytest.mark.parametrize("text, message", [
    (f"clusters: [{{name: c, cluster: {{server: x}}\nusers: {TOKEN}: [", "is not valid YAML at line"),
    ("[]", "is not a kubeconfig"),
    (kubeconfig(server="10.0.0.1:6443"), "the cluster's server must be an https:// or http:// URL"),
    (json.dumps({"clusters": [], "users": [{"name": "u", "user": {"token": TOKEN}}]}), "names no cluster"),
])
def test_a_bad_kubeconfig_is_named_never_shown(text, message):
    with pytest.raises(KubeconfigError) as error:
        parse_kubeconfig(text, EU, "gpu-eu-west.yaml in --kubeconfig-dir")
    assert message in str(error.value) and "gpu-eu-west.yaml in --kubeconfig-dir" in str(error.value)
    assert TOKEN not in str(error.value)


def test_kubeconfigs_from_the_stack_config_and_outputs():
    objects = {"gpu-eu-west": {"cluster": {"existing": {"kubeconfig": "kc-eu"}}}, "gpu-us-east": {"cluster": {"source": "Kind"}}}
    assert kubeconfigs_from_config({"modelplane:inferenceClusters": {"value": json.dumps(objects), "objectValue": objects,
                                                                     "secret": True}}) == {"gpu-eu-west": "kc-eu"}
    assert kubeconfigs_from_config({"modelplane:inferenceClusters": {"value": json.dumps(objects)}}) == {"gpu-eu-west": "kc-eu"}
    assert kubeconfigs_from_config({"modelplane:inferenceClusters": {"secret": True}}) == {}
    assert kubeconfigs_from_outputs({"kubeconfigs": {"a": "kc-a", "b": "[secret]", "c": ""}, "placement": {}}) == {"a": "kc-a"}
    assert kubeconfigs_from_outputs({"kubeconfigs": "[secret]"}) == {}


@pytest.mark.parametrize("fallback, words", [
    (None, "only while none of its other endpoints is healthy (fallback.when: AllPrimariesDown)"),
    ({"when": "BelowHealthy", "healthyPercent": 50},
     "once fewer than 50.00% of its other endpoints are healthy, a share of 100 - min(100, 200 x healthy / total) "
     "percent (fallback.when: BelowHealthy 50%)"),
])
def test_status_says_when_a_services_fallback_tier_takes_traffic(fallback, words):
    """Finding 6 of issue 23: status says what the front door does with the fallback tier, in its own numbers."""
    from modelplane.api import load_fleet
    from modelplane.api.stackfile import read_stack_file
    from modelplane.status.fallback import fallback_lines
    from modelplane.status.table import status_table

    config = read_stack_file(Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.cloud.yaml").config
    if fallback is not None:
        config["modelServices"]["ml-team"]["chat"]["fallback"] = fallback
    lines = fallback_lines(load_fleet(config))
    assert lines == [f"ml-team/chat: the front door sends requests to its fallback endpoints {words}"]
    text = status_table(StatusReport("cloud", False, (), (), RUNBOOK, (), tuple(lines)))
    assert f"Fallback tiers:\n  {lines[0]}\n" in text
    demo = read_stack_file(Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.demo.yaml").config
    assert fallback_lines(load_fleet(demo)) == []  # no fallback endpoint: nothing to say
