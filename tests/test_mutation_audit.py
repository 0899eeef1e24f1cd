"""Behaviours a mutation audit (issue 25, finding 8) found no test would notice if changed.

Each test pins one of them and was checked by making the change and seeing it fail: a split gang
kept on retain; replica names ignoring the index; a kept replica accepting any old name; NaN in
comparisons; the regex cost; `auth` as a secret position; the front door's 3 s connect timeout;
a health check accepting an answer other than 200; a 404 from the API server treated as an error.
"""
from __future__ import annotations

import copy
import hashlib

import pytest

from builders import CLASSES, cluster, deployment, fleet_config, member, plan
from modelplane.api import ConfigError, NamespacedName, load_fleet
from modelplane.cel import selector_problem
from modelplane.devices.evaluation import evaluate
from modelplane.render import front_door as fd
from modelplane.scheduling import PlacementDocument, schedule
from modelplane.scheduling.names import NameBook, replica_name
from modelplane.status.kubeconfig import parse_kubeconfig
from modelplane.status.live import read_cluster
from modelplane.status.probe import ProbeTarget, probe
from status_fakes import NAMESPACE, US, kubeconfig_text
from status_fakes import Hostile, answer

GPU = {"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
       "capacity": {"memory": {"value": "80Gi"}}}


# --- scheduling -------------------------------------------------------------------------------------------------

def test_a_gang_found_split_across_pools_is_not_kept_on_retain():
    gang = deployment(members=[member("Leader"), member("Worker", worker={"nodes": 2})])
    clusters = {"a": cluster(("p1", "small", 3), ("p2", "small", 3))}
    first = plan(clusters, {"ml": {"d": gang}})
    document = first.document().model_dump(by_alias=True)
    members = document["replicas"][0]["engines"][0]["members"]
    assert {m["nodePool"] for m in members} == {"p1"}
    members[1]["nodePool"] = "p2"  # the leader on p1, the workers on p2: not a gang any more
    fleet = load_fleet(copy.deepcopy({"inferenceClasses": CLASSES,
                                      "inferenceClusters": clusters, "modelDeployments": {"ml": {"d": gang}}}))
    result = schedule(fleet, PlacementDocument.model_validate(document))
    plan_ = result.deployments[NamespacedName("ml", "d")]
    assert "retained" not in [r.status for r in plan_.replicas]
    assert [r.reason.detail for r in plan_.removed] == ["engine main was split across pools"]


def test_replica_names_are_the_reference_hash_of_deployment_cluster_and_index():
    for index in (0, 1, 7):
        expected = "mock-demo-" + hashlib.sha256(f"mock-demo-gpu-eu-west-{index}".encode()).hexdigest()[:5]
        assert replica_name("mock-demo", "gpu-eu-west", index) == expected
    assert replica_name("mock-demo", "gpu-eu-west", 0) == "mock-demo-be445"  # the demo's, as the README shows
    assert len({replica_name("d", "c", i) for i in range(50)}) == 50


def test_a_kept_replica_keeps_only_a_name_that_is_one_of_its_own():
    book = NameBook()
    assert book.assign("ml", "d", "c", 0, previous="someone-elses-name") == replica_name("d", "c", 0)
    assert NameBook().assign("ml", "d", "c", 0, previous=replica_name("d", "c", 0)) == replica_name("d", "c", 0)
    # through the scheduler: a previous placement naming the replica oddly gets the reference name back
    clusters = {"a": cluster(("p", "small", 2))}
    first = plan(clusters, {"ml": {"d": deployment()}})
    document = first.document().model_dump(by_alias=True)
    document["replicas"][0]["name"] = "d-zzzzz"
    fleet = load_fleet(copy.deepcopy({"inferenceClasses": CLASSES,
                                      "inferenceClusters": clusters, "modelDeployments": {"ml": {"d": deployment()}}}))
    result = schedule(fleet, PlacementDocument.model_validate(document))
    assert [r.name for r in result.deployments[NamespacedName("ml", "d")].replicas] == [replica_name("d", "a", 0)]


# --- CEL ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression, expected", [
    ("0.0/0.0 < 1.0", False), ("0.0/0.0 <= 1.0", False), ("0.0/0.0 > 1.0", False), ("0.0/0.0 >= 1.0", False),
    ("1.0 < 0.0/0.0", False), ("1.0 >= 0.0/0.0", False), ("0.0/0.0 == 0.0/0.0", False), ("0.0/0.0 != 0.0/0.0", True),
    ("double('NaN') < 1", False), ("[0.0/0.0].exists(x, x == x)", False), ("!(0.0/0.0 < 1.0)", True),
])
def test_every_comparison_with_nan_is_false_but_not_equal(expression, expected):
    assert evaluate(expression, GPU) is expected


def test_a_regex_call_costs_ten_in_the_estimate_so_nested_regexes_are_refused():
    attributes = "device.attributes['gpu.example.com']"

    def nested(function: str) -> str:
        loops = "".join(f"{attributes}.all({v}, " for v in "abc")
        return loops + f"a.{function}(b) && b.{function}(c)" + ")))"

    assert selector_problem(nested("contains")) is None
    problem = selector_problem(nested("matches"))
    assert problem is not None and "too complex: estimated cost 1250467 exceeds the limit of 1000000" in problem


# --- secrets --------------------------------------------------------------------------------------------------------

def test_a_token_pasted_as_a_key_under_auth_is_never_shown():
    """`auth` is a secret position: a key under it that is not a field name (a token pasted where a field goes) is
    not echoed; the message points at `auth` and lists the fields it takes."""
    config = fleet_config(inferenceGateway={"clusterName": "control", "cluster": {"source": "Kind"},
                                            "envoyGateway": {"loadBalancer": "MetalLB", "metallb": {}}})
    config["modelEndpoints"] = {"ml-team": {"saas": {"url": "https://api.example.com/",
                                                     "auth": {"sk-live-4242abcd": "x", "token": "t"}}}}
    with pytest.raises(ConfigError) as error:
        load_fleet(config)
    text = str(error.value)
    assert "modelplane:modelEndpoints.ml-team.saas.auth: has an unknown field (its name is not shown" in text
    assert "4242" not in text


# --- the front door -------------------------------------------------------------------------------------------------

def envoy_policies() -> list[dict]:
    config = fleet_config(inferenceGateway={"clusterName": "control", "cluster": {"source": "Kind"},
                                            "envoyGateway": {"loadBalancer": "MetalLB", "metallb": {}}})
    config["modelServices"] = {"ml-team": {"mock": {"endpoints": [
        {"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}}]}}}
    fleet = load_fleet(config)
    objects = fd.front_door_parts(fleet, schedule(fleet), {}).manifests().objects
    return [o for o in objects if o["kind"] == "BackendTrafficPolicy"]


def test_the_front_door_gives_up_connecting_to_a_backend_after_3_s():
    timeouts = [p["spec"]["timeout"]["tcp"]["connectTimeout"] for p in envoy_policies() if "timeout" in p["spec"]]
    assert timeouts and set(timeouts) == {"3s"}


def test_the_front_doors_health_check_of_a_replica_expects_200_only():
    checks = [p["spec"]["healthCheck"]["active"]["http"] for p in envoy_policies()
              if "active" in p["spec"].get("healthCheck", {})]
    replica_checks = [c["expectedStatuses"] for c in checks if c["path"] == "/health"]
    assert replica_checks and all(statuses == [200] for statuses in replica_checks)


@pytest.mark.parametrize("code, state", [(200, "healthy"), (204, "unhealthy"), (302, "unhealthy"),
                                         (404, "unhealthy"), (429, "unhealthy"), (503, "unhealthy")])
def test_status_probe_counts_only_200_as_healthy(code, state):
    gateway = Hostile(answer(code, b"{}"))
    try:
        result = probe(ProbeTarget(("ml", "r"), gateway.address, 80, "r.ml.replica.modelplane.internal"))
    finally:
        gateway.close()
    assert (result.state, result.http_status) == (state, code)


# --- status and the API server ----------------------------------------------------------------------------------------

def test_a_404_from_the_api_server_is_an_absent_object_not_an_error():
    """No serving pods in a namespace that does not exist, no workload Gateway yet: the cluster was read."""
    server = Hostile(answer(404, b'{"kind": "Status", "reason": "NotFound"}'))
    try:
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(server.url), US, "t"), [NAMESPACE])
    finally:
        server.close()
    assert (reading.error, reading.gateway_address, reading.replicas) == (None, None, {})
    server = Hostile(answer(403, b'{"kind": "Status", "message": "forbidden"}'))
    try:
        reading = read_cluster(parse_kubeconfig(kubeconfig_text(server.url), US, "t"), [NAMESPACE])
    finally:
        server.close()
    assert reading.error_kind == "unreadable" and reading.error.startswith("HTTP 403 on GET")
