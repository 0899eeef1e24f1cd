"""The scheduler's promises under edits and hostile previous placements: never overcommit a pool,
one name per replica, order-independent plans, caches only where they can stage, honest reasons."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from modelplane.api import ModelplaneError, NamespacedName, load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.render.fleet import render_fleet
from modelplane.scheduling import PlacementDocument, load_previous, replica_name, schedule
from builders import CLASSES, MEM, cluster, deployment, member, plan, status, where

REPO = Path(__file__).resolve().parent.parent
D = NamespacedName("ml", "d")


def doc(result) -> dict:
    return json.loads(result.to_json())


def pool_use(result) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for replica in result.replicas():
        for pool, nodes in replica.pool_cost().items():
            used[(replica.cluster, pool)] = used.get((replica.cluster, pool), 0) + nodes
    return used


def assert_within_capacity(result) -> None:
    declared = {(c.name, p.name): p.nodes for c in result.clusters for p in c.pools}
    for key, nodes in pool_use(result).items():
        assert nodes <= declared[key], f"pool {key} holds {nodes} of {declared[key]}"


# --- 1. Shape edits and shrinking pools never overcommit -------------------------------------------------------

def test_growing_copies_re_places_a_replica_that_no_longer_fits_and_says_so():
    one = {"a": cluster(("p", "small", 1))}
    first = plan(one, {"ml": {"d": deployment(replicas=1)}})
    bigger = plan(one, {"ml": {"d": deployment(replicas=1, copies=3)}}, previous=first)
    assert where(bigger) == []
    assert status(bigger) == ("False", "InsufficientCapacity", "Scheduled 0 of 1 replicas")
    [gone] = bigger.deployments[D].removed
    assert gone.reason.code == "NoLongerFits" and "needs 3 nodes, 1 of the pool's 1 free" in gone.reason.detail
    assert_within_capacity(bigger)


def test_growing_copies_keeps_the_replica_where_it_still_fits_and_charges_the_new_size():
    roomy = {"a": cluster(("p", "small", 4))}
    first = plan(roomy, {"ml": {"d": deployment(replicas=1)}})
    bigger = plan(roomy, {"ml": {"d": deployment(replicas=1, copies=3)}}, previous=first)
    assert [r.status for r in bigger.deployments[D].replicas] == ["retained"]
    assert bigger.free[("a", "p")] == 1


def test_growing_copies_moves_the_replica_to_a_cluster_with_room():
    clusters = {"a": cluster(("p", "small", 1)), "b": cluster(("p", "small", 3))}
    first = plan(clusters, {"ml": {"d": deployment(replicas=1)}})
    assert where(first) == [("a", 0, ("p",))]
    bigger = plan(clusters, {"ml": {"d": deployment(replicas=1, copies=3)}}, previous=first)
    assert where(bigger) == [("b", 0, ("p",))]
    assert status(bigger)[0] == "True"
    assert_within_capacity(bigger)


def test_growing_worker_nodes_re_places_a_gang_that_no_longer_fits():
    gang = lambda nodes: deployment(replicas=1, members=[member("Leader"), member("Worker", worker={"nodes": nodes})])
    clusters = {"a": cluster(("p", "small", 3)), "b": cluster(("p", "small", 6))}
    first = plan(clusters, {"ml": {"d": gang(1)}})
    assert where(first) == [("a", 0, ("p",))]
    wider = plan(clusters, {"ml": {"d": gang(4)}}, previous=first)
    assert where(wider) == [("b", 0, ("p",))]  # 1 leader + 4 workers = 5 nodes
    assert_within_capacity(wider)


def test_a_shrunk_pool_keeps_the_oldest_replicas_and_re_places_the_rest():
    three = {"a": cluster(("p", "small", 3)), "b": cluster(("p", "small", 0))}
    first = plan(three, {"ml": {"d": deployment(replicas=3)}})
    assert where(first) == [("a", 0, ("p",)), ("a", 1, ("p",)), ("a", 2, ("p",))]
    shrunk = {"a": cluster(("p", "small", 1)), "b": cluster(("p", "small", 2))}
    result = plan(shrunk, {"ml": {"d": deployment(replicas=3)}}, previous=first)
    kept = [(r.cluster, r.index, r.status) for r in result.deployments[D].replicas]
    assert kept == [("a", 0, "retained"), ("b", 0, "new"), ("b", 1, "new")]
    assert sorted((r.replica.index, r.reason.code) for r in result.deployments[D].removed) == \
        [(1, "NoLongerFits"), (2, "NoLongerFits")]
    assert_within_capacity(result)


def test_a_shrunk_pool_with_nowhere_else_to_go_is_reported_short():
    first = plan({"a": cluster(("p", "small", 2))}, {"ml": {"d": deployment(replicas=2)}})
    result = plan({"a": cluster(("p", "small", 1))}, {"ml": {"d": deployment(replicas=2)}}, previous=first)
    assert where(result) == [("a", 0, ("p",))]
    assert status(result) == ("False", "InsufficientCapacity", "Scheduled 1 of 2 replicas")
    assert pool_use(result) == {("a", "p"): 1}


def test_editing_one_deployment_never_pushes_out_another():
    shared = {"a": cluster(("p", "small", 3)), "b": cluster(("p", "small", 3))}
    first = plan(shared, {"ml": {"grows": deployment(replicas=1), "steady": deployment(replicas=1)}})
    assert where(first, name="grows") == [("a", 0, ("p",))] and where(first, name="steady") == [("a", 0, ("p",))]
    result = plan(shared, {"ml": {"grows": deployment(replicas=1, copies=3), "steady": deployment(replicas=1)}},
                  previous=first)
    assert [r.status for r in result.deployments[NamespacedName("ml", "steady")].replicas] == ["retained"]
    assert where(result, name="grows") == [("b", 0, ("p",))]
    assert_within_capacity(result)


def test_demo_stack_with_three_copies_is_not_scheduled_on_one_node_pools(tmp_path):
    config = read_stack_file(REPO / "stacks" / "Pulumi.demo.yaml").config
    first = schedule(load_fleet(copy.deepcopy(config)))
    engine = config["modelDeployments"]["ml-team"]["mock-demo"]["template"]["spec"]["engines"][0]
    engine["copies"] = 3
    result = schedule(load_fleet(config), PlacementDocument.model_validate(doc(first)))
    key = NamespacedName("ml-team", "mock-demo")
    condition = result.deployments[key].conditions[0]
    assert (condition.status, condition.reason) == ("False", "InsufficientCapacity")
    assert result.deployments[key].scheduled == 0
    assert_within_capacity(result)


# --- 2. Replica names are unique per namespace, deterministic, stable ------------------------------------------

CLASHING = ("gpu-535", "gpu-918")  # replica_name("mock-demo", c, 0) is mock-demo-51ea0 for both


def test_reference_names_do_clash_for_these_clusters():
    assert replica_name("mock-demo", CLASHING[0], 0) == replica_name("mock-demo", CLASHING[1], 0) == "mock-demo-51ea0"


def clash_plan(previous=None, **extra):
    clusters = {c: cluster(("p", "small", 1)) for c in CLASHING}
    return plan(clusters, {"ml": {"mock-demo": deployment(replicas=2)}}, previous=previous, **extra)


def test_clashing_reference_names_are_resolved_deterministically():
    result = clash_plan()
    names = {r.cluster: r.name for r in result.replicas()}
    assert names["gpu-535"] == "mock-demo-51ea0"  # the first in fill order keeps the reference's name
    assert names["gpu-918"] != "mock-demo-51ea0" and names["gpu-918"].startswith("mock-demo-")
    assert len(names["gpu-918"]) == len("mock-demo-51ea0")
    assert clash_plan().to_json() == result.to_json()


def test_resolved_names_are_stable_across_runs_and_survive_the_first_leaving():
    first = clash_plan()
    names = {r.cluster: r.name for r in first.replicas()}
    again = clash_plan(previous=first)
    assert {r.cluster: r.name for r in again.replicas()} == names
    # gpu-535 leaves: gpu-918's replica keeps its name; the freed reference name goes to no one else now
    drained = plan({CLASHING[0]: cluster(("p", "small", 1), taints=[("drain", "NoExecute")]),
                    CLASHING[1]: cluster(("p", "small", 1))},
                   {"ml": {"mock-demo": deployment(replicas=2)}}, previous=first)
    assert {r.cluster: r.name for r in drained.replicas()} == {"gpu-918": names["gpu-918"]}


def test_a_replica_never_takes_the_name_of_a_model_endpoint():
    taken = replica_name("d", "a", 0)
    endpoints = {"ml": {taken: {"url": "https://api.example.com/v1", "labels": {"x": "y"}}}}
    result = plan({"a": cluster(("p", "small", 1))}, {"ml": {"d": deployment(replicas=1)}}, modelEndpoints=endpoints)
    [replica] = result.replicas()
    assert replica.name != taken and replica.name.startswith("d-")


def test_a_name_leaving_in_this_plan_goes_to_no_other_replica():
    first = clash_plan()
    names = {r.cluster: r.name for r in first.replicas()}
    # hand-edit: pretend gpu-918's replica holds the reference name and gpu-535's the alternative
    swapped = doc(first)
    for r in swapped["replicas"]:
        r["name"] = names["gpu-918"] if r["cluster"] == "gpu-535" else names["gpu-535"]
    result = plan({c: cluster(("p", "small", 1)) for c in CLASHING},
                  {"ml": {"mock-demo": deployment(replicas=2)}}, previous=_Doc(swapped))
    got = [r.name for r in result.replicas()]
    assert len(set(got)) == 2


def test_render_of_clashing_clusters_has_no_two_objects_with_one_name():
    clusters = {c: cluster(("p", "small", 1)) for c in CLASHING}
    served = member()
    served["template"]["spec"]["containers"][0]["args"] = ["--served-model-name=mock"]  # the name the service sends
    config = {"inferenceClasses": CLASSES, "inferenceClusters": clusters,
              "modelDeployments": {"ml": {"mock-demo": deployment(replicas=2, members=[served])}},
              "modelServices": {"ml": {"svc": {"endpoints": [{"selector": {"matchLabels": {
                  "modelplane.ai/deployment": "mock-demo"}}}]}}},
              "inferenceGateway": {"clusterName": "control", "cluster": {"source": "Kind"},
                                   "traefik": {"version": "40.2.0", "loadBalancer": "MetalLB", "metallb": {}}}}
    fleet = load_fleet(config)
    manifests = render_fleet(fleet, schedule(fleet))
    for cluster_manifests in manifests:
        ids = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in cluster_manifests.objects]
        assert len(ids) == len(set(ids)), cluster_manifests.cluster


class _Doc:
    """A hand-made previous placement in the shape `plan(previous=...)` takes."""

    def __init__(self, data: dict) -> None:
        self.data = data

    def document(self) -> PlacementDocument:
        return PlacementDocument.model_validate(self.data)


# --- 3. A previous placement with duplicate entries ------------------------------------------------------------

def test_conflicting_duplicate_entries_are_a_clear_error():
    data = doc(plan({"a": cluster(("p", "small", 2))}, {"ml": {"d": deployment(replicas=1)}}))
    twin = copy.deepcopy(data["replicas"][0])
    twin["name"] = "d-00000"
    data["replicas"].append(twin)
    with pytest.raises(ModelplaneError, match=r"ml/d on cluster a index 0 is listed twice"):
        load_previous(data)


def test_identical_duplicate_entries_collapse_and_charge_once():
    first = plan({"a": cluster(("p", "small", 2))}, {"ml": {"d": deployment(replicas=1)}})
    data = doc(first)
    data["replicas"] = data["replicas"] * 3
    result = plan({"a": cluster(("p", "small", 2))}, {"ml": {"d": deployment(replicas=2)}}, previous=_Doc(data))
    assert where(result) == [("a", 0, ("p",)), ("a", 1, ("p",))]
    assert_within_capacity(result)


def test_the_plan_does_not_depend_on_the_order_of_the_previous_document():
    clusters = {c: cluster(("p", "small", 2)) for c in ("a", "b", "c")}
    deployments = {"ml": {"d": deployment(replicas=4), "e": deployment(replicas=3)}}
    first = doc(plan(clusters, deployments))
    smaller = {c: cluster(("p", "small", 1)) for c in ("a", "b", "c")}
    forward = plan(smaller, deployments, previous=_Doc(first)).to_json()
    first["replicas"].reverse()
    assert plan(smaller, deployments, previous=_Doc(first)).to_json() == forward


def test_cli_refuses_conflicting_duplicates_with_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "modelplane", "plan", "--stack", "demo", "--output", "json"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout)
    twin = copy.deepcopy(data["replicas"][0])
    twin["engines"][0]["members"][0]["pods"] = 2
    data["replicas"].append(twin)
    previous = tmp_path / "prev.json"
    previous.write_text(json.dumps(data))
    run = subprocess.run([sys.executable, "-m", "modelplane", "plan", "--stack", "demo", "--previous", str(previous)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "listed twice" in run.stderr and "Traceback" not in run.stderr


# --- 12. A cached deployment only where its cache can stage ----------------------------------------------------

CACHES = {"ml": {"w": {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1}}}}


def test_cached_deployment_is_never_placed_on_a_cluster_without_rwx_storage():
    clusters = {"a": cluster(("p", "small", 4)), "b": cluster(("p", "small", 4), rwx="nfs")}
    result = plan(clusters, {"ml": {"d": deployment(replicas=2, modelCacheRef={"name": "w"})}}, modelCaches=CACHES)
    assert [c for c, _, _ in where(result)] == ["b", "b"]
    verdicts = {v.cluster: v.primary.code for v in result.explain(D).verdicts if v.primary}
    assert verdicts["a"] == "NoCacheStorage"
    assert "ReadWriteMany" in next(v for v in result.explain(D).verdicts if v.cluster == "a").primary.detail


def test_cached_deployment_with_no_cluster_that_can_stage_has_no_candidates():
    result = plan({"a": cluster(("p", "small", 4))},
                  {"ml": {"d": deployment(replicas=1, modelCacheRef={"name": "w"})}}, modelCaches=CACHES)
    assert where(result) == [] and status(result)[:2] == ("False", "NoClusters")


def test_retained_cached_replica_leaves_a_cluster_that_lost_its_storage():
    first = plan({"a": cluster(("p", "small", 4), rwx="nfs")},
                 {"ml": {"d": deployment(replicas=1, modelCacheRef={"name": "w"})}}, modelCaches=CACHES)
    assert where(first) == [("a", 0, ("p",))]
    result = plan({"a": cluster(("p", "small", 4))},
                  {"ml": {"d": deployment(replicas=1, modelCacheRef={"name": "w"})}}, modelCaches=CACHES,
                  previous=first)
    assert where(result) == []
    assert [r.reason.code for r in result.deployments[D].removed] == ["NoCacheStorage"]


# --- 13. explain names the right error -------------------------------------------------------------------------

NIC_CEL = 'device.attributes["nic.example.com"].linkType == "infiniband"'
TWO_GPUS = {"devices": [
    {"name": "gpu-a", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
     "attributes": {"model": {"string": "x"}}, "capacity": {"memory": {"value": "24Gi"}}},
    {"name": "gpu-b", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
     "capacity": {"memory": {"value": "24Gi"}}}]}


def test_a_selector_erroring_on_another_kind_of_device_is_a_mismatch_not_an_abort():
    nic = {"name": "nic", "selectors": [{"cel": NIC_CEL}]}
    gpu = {"name": "gpu", "selectors": [{"cel": MEM.format("20Gi")}]}
    m = member()
    m["nodeSelector"] = {"devices": [gpu, nic]}
    result = plan({"a": cluster(("p", "small", 1))}, {"ml": {"d": deployment(members=[m])}})
    [verdict] = result.explain(D).verdicts
    assert verdict.primary.code == "SelectorMismatch", verdict.primary
    assert "abort" not in verdict.primary.detail and "nic" in verdict.primary.detail


def test_a_selector_erroring_on_a_sibling_device_of_the_same_class_rejects_the_pool():
    classes = {**CLASSES, "two": TWO_GPUS, "one": {"devices": TWO_GPUS["devices"][:1]}}
    m = member(extra=['device.attributes["gpu.example.com"].model == "x"'])
    config = {"inferenceClasses": classes,
              "inferenceClusters": {"a": cluster(("p", "two", 1)), "b": cluster(("p", "one", 1))},
              "modelDeployments": {"ml": {"d": deployment(replicas=2, members=[m])}}}
    result = schedule(load_fleet(config))
    assert where(result) == [("b", 0, ("p",))]  # Kubernetes would abort allocation on a: gpu-b has no model
    verdicts = {v.cluster: v.primary for v in result.explain(D).verdicts if v.primary}
    assert verdicts["a"].code == "SelectorError" and "gpu-b" in verdicts["a"].detail


# --- mutations the suite must catch -----------------------------------------------------------------------------

def test_tolerations_decide_eligibility_per_deployment():
    clusters = {"a": cluster(("p", "small", 4), taints=[("x", "NoSchedule")]), "b": cluster(("p", "small", 4))}
    tolerant = deployment(replicas=2, tolerations=[{"key": "x", "operator": "Exists"}])
    result = plan(clusters, {"ml": {"d0": tolerant, "d1": deployment(replicas=2)}})
    assert [c for c, _, _ in where(result, name="d0")] == ["a", "b"]
    assert [c for c, _, _ in where(result, name="d1")] == ["b", "b"]


def test_deployments_of_one_shape_but_different_selectors_fit_differently():
    clusters = {"a": cluster(("p", "small", 4)), "b": cluster(("p", "big", 4))}
    result = plan(clusters, {"ml": {"d0": deployment(members=[member(memory="20Gi")]),
                                    "d1": deployment(members=[member(memory="70Gi")])}})
    assert where(result, name="d0") == [("a", 0, ("p",))]
    assert where(result, name="d1") == [("b", 0, ("p",))]


def test_a_new_replica_takes_the_lowest_free_index():
    clusters = {"a": cluster(("p", "small", 4))}
    first = doc(plan(clusters, {"ml": {"d": deployment(replicas=2)}}))
    first["replicas"] = [r for r in first["replicas"] if r["index"] == 1]  # index 0 is gone
    result = plan(clusters, {"ml": {"d": deployment(replicas=3)}}, previous=_Doc(first))
    assert [(r.index, r.status) for r in result.deployments[D].replicas] == [(0, "new"), (1, "retained"), (2, "new")]


def test_the_caches_footprint_wins_a_clash_with_the_deployments_selector_as_in_the_reference():
    """`{**deployment_labels, **cache_labels}` (spec §4.2): the replica goes where the cache is staged."""
    caches = {"ml": {"w": {**CACHES["ml"]["w"], "clusterSelector": {"matchLabels": {"region": "us"}}}}}
    clusters = {"eu": cluster(("p", "small", 4), rwx="nfs", region="eu"),
                "us": cluster(("p", "small", 4), rwx="nfs", region="us")}
    result = plan(clusters, {"ml": {"d": deployment(replicas=2, modelCacheRef={"name": "w"},
                                                    clusterSelector={"matchLabels": {"region": "eu"}})}},
                  modelCaches=caches)
    assert [c for c, _, _ in where(result)] == ["us", "us"]
    assert {v.cluster: v.primary.code if v.primary else None for v in result.explain(D).verdicts} == \
        {"eu": "OutsideCacheFootprint", "us": None}
