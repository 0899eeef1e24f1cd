"""Scheduler invariants over random fleets and random edit sequences (scale, drain, undrain, cluster
removal, selector edits), each step planned with the previous step's placement:

- no pool is over capacity, counting every replica at its current shape (shape edits, shrunk pools):
  under WholeNode no more claiming pods than nodes; under DeviceGranular the pool's pods can be put on
  its nodes with never more devices on a node than it has (a brute-force bin packing, not the scheduler's);
- under DeviceGranular, a deployment is short only if no eligible cluster and pool could take one more
  replica on top of every pod the plan put there (the same brute force);
- every placed member's pool satisfies its selectors with enough devices, and taints are respected,
  checked against the config by an oracle that shares no code with the scheduler;
- (cluster, index) is unique within a deployment and names are unique within a namespace;
- the order of the previous document does not matter;
- no engine is split across pools;
- no previous replica disappears without a typed reason; kept replicas keep cluster, index and name;
- never more replicas than desired;
- spread when capacity allows (fresh plans: a cluster with two fewer replicas than another could not take one);
- the same input gives the same output.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from modelplane.api import NamespacedName, load_fleet
from modelplane.scheduling import PlacementDocument, schedule

MEM = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("{}")) >= 0'
CLASSES = {
    "small": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                           "capacity": {"memory": {"value": "24Gi"}}}]},
    "big": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 8,
                         "capacity": {"memory": {"value": "80Gi"}}}]},
    # Three devices a node: pods of 1, 2 and 3 fragment it (1+1 on one node strands a 2 that 1+2, 1+2 would fit).
    "mid": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 3,
                         "capacity": {"memory": {"value": "48Gi"}}}]},
}
REASONS = {"ScaledDown", "Evicted", "NoLongerFits", "NotSelected", "OutsideCacheFootprint", "ClusterRemoved",
           "Duplicate", "DeploymentRemoved", "FailedBack", "NotPreferred"}

clusters = st.dictionaries(
    st.sampled_from(["c1", "c2", "c3", "c4"]),
    st.fixed_dictionaries({
        "labels": st.fixed_dictionaries({"region": st.sampled_from(["eu", "us"])}),
        "cluster": st.just({"source": "Kind"}),
        "taints": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["gpu", "drain"]),
                                                  "effect": st.sampled_from(["NoSchedule", "NoExecute"])}),
                           max_size=1),
        "nodePools": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["p", "q", "r"]),
                                                     "className": st.sampled_from(["small", "big", "mid"]),
                                                     "nodeCount": st.integers(0, 3)}),
                              min_size=1, max_size=3, unique_by=lambda p: p["name"]),
    }), min_size=1, max_size=4)


def member(role: str, memory: str, count: int, workers: int | None) -> dict:
    body = {"role": role, "template": {"spec": {"containers": [{"name": "engine", "image": "e"}]}},
            "nodeSelector": {"devices": [{"name": "gpu", "count": count, "selectors": [{"cel": MEM.format(memory)}]}]}}
    if workers:
        body["worker"] = {"nodes": workers}
    return body


@st.composite
def deployments(draw) -> dict:
    memory, count = draw(st.sampled_from(["20Gi", "70Gi"])), draw(st.integers(1, 3))
    if draw(st.booleans()):
        members = [member("Standalone", memory, count, None)]
    else:
        members = [member("Leader", memory, count, None), member("Worker", memory, count, draw(st.integers(1, 2)))]
    spec: dict = {"engines": [{"name": "e", "copies": draw(st.integers(1, 2)), "members": members}]}
    if draw(st.booleans()):
        spec["clusterSelector"] = {"matchLabels": {"region": draw(st.sampled_from(["eu", "us"]))}}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": draw(st.sampled_from(["gpu", "drain"])), "operator": "Exists"}]
    return {"replicas": draw(st.integers(1, 5)), "template": {"spec": spec}}


fleets = st.fixed_dictionaries({"inferenceClusters": clusters,
                                "modelDeployments": st.fixed_dictionaries(
                                    {"ml": st.dictionaries(st.sampled_from(["a", "b", "c"]), deployments(),
                                                           min_size=1, max_size=3)})})

edits = st.lists(st.one_of(
    st.tuples(st.just("scale"), st.sampled_from(["a", "b", "c"]), st.integers(1, 6)),
    st.tuples(st.just("drain"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.sampled_from(["NoSchedule", "NoExecute"])),
    st.tuples(st.just("undrain"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.just(None)),
    st.tuples(st.just("remove"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.just(None)),
    st.tuples(st.just("selector"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["20Gi", "70Gi"])),
    st.tuples(st.just("shrink"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.integers(0, 2)),
    st.tuples(st.just("copies"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
    st.tuples(st.just("workers"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
), max_size=6)


def apply(config: dict, edit: tuple) -> None:
    kind, target, value = edit
    found = config["modelDeployments"]["ml"].get(target) if kind in ("scale", "selector") else \
        config["inferenceClusters"].get(target)
    if found is None:
        return
    if kind == "scale":
        found["replicas"] = value
    elif kind == "drain":
        found["taints"] = [{"key": "drain", "effect": value}]
    elif kind == "undrain":
        found.pop("taints", None)
    elif kind == "remove" and len(config["inferenceClusters"]) > 1:
        del config["inferenceClusters"][target]
    elif kind == "selector":
        for m in found["template"]["spec"]["engines"][0]["members"]:
            m["nodeSelector"]["devices"][0]["selectors"] = [{"cel": MEM.format(value)}]
    elif kind == "shrink":
        for pool in found["nodePools"]:
            pool["nodeCount"] = min(pool["nodeCount"], value)
    elif kind == "copies":
        found["template"]["spec"]["engines"][0]["copies"] = value
    elif kind == "workers":
        for m in found["template"]["spec"]["engines"][0]["members"]:
            if m["role"] == "Worker":
                m["worker"] = {"nodes": value}


def check(result, previous: PlacementDocument, fleet, config: dict) -> None:
    stamped = {(r.namespace, r.deployment, r.cluster, r.index) for r in previous.replicas}
    names: set[tuple[str, str]] = set()
    for plan in result.deployments.values():
        assert plan.scheduled <= plan.desired
        spec = config["modelDeployments"][plan.key.namespace][plan.key.name]
        identities = set()
        for replica in plan.replicas:
            assert (replica.cluster, replica.index) not in identities, f"{plan.key}: two replicas at one index"
            identities.add((replica.cluster, replica.index))
            assert (plan.key.namespace, replica.name) not in names, f"two replicas named {replica.name}"
            names.add((plan.key.namespace, replica.name))
            respects_taints(config["inferenceClusters"][replica.cluster], spec, replica.status)
            for engine in replica.engines:
                assert len({m.node_pool for m in engine.members}) == 1, "an engine was split across pools"
                for m in engine.members:
                    fits_by_oracle(config, replica.cluster, m.node_pool, spec, m.role)
            identity = (plan.key.namespace, plan.key.name, replica.cluster, replica.index)
            if replica.status == "retained":
                assert identity in stamped
            elif identity in stamped:  # re-placed at the same cluster and index: the old one must be gone
                assert identity in removed_identities(result), f"{identity} placed over a kept replica"
    pods = pods_by_oracle(result, config)
    for (cluster, pool), sizes in pods.items():
        per_node, nodes = node_of(config, cluster, pool)
        assert packable(per_node, nodes, sizes), \
            f"pool {cluster}/{pool}: pods taking {sorted(sizes, reverse=True)} devices do not fit {nodes} x {per_node}"
    if config.get("scheduling", {}).get("packing") != "WholeNode":
        short_only_without_room(result, config, pods)
    kept = {(r.key.namespace, r.key.name, r.cluster, r.index) for r in result.replicas() if r.status == "retained"}
    removed = {(r.replica.key.namespace, r.replica.key.name, r.replica.cluster, r.replica.index): r.reason.code
               for r in result.removed()}
    for identity in stamped:
        assert identity in kept or removed.get(identity) in REASONS, f"{identity} vanished without a reason"


def whole_node(config: dict) -> bool:
    return config.get("scheduling", {}).get("packing") == "WholeNode"


def node_of(config: dict, cluster: str, pool: str) -> tuple[int, int]:
    """(devices per node, nodes) of a pool, from the config."""
    [body] = [p for p in config["inferenceClusters"][cluster]["nodePools"] if p["name"] == pool]
    [device] = CLASSES[body["className"]]["devices"]
    return device.get("count", 1), body["nodeCount"]


def replica_pods(config: dict, spec: dict, per_node: int) -> list[int]:
    """Devices each pod of one replica takes on a node: its request's count, a whole node for a gang's pods
    (one LeaderWorkerSet pod per node) and for every pod under WholeNode."""
    engine = spec["template"]["spec"]["engines"][0]
    sizes = []
    for m in engine["members"]:
        pods = m.get("worker", {}).get("nodes", 1) if m["role"] == "Worker" else 1
        size = per_node if whole_node(config) or m["role"] != "Standalone" else m["nodeSelector"]["devices"][0]["count"]
        sizes += [size] * (pods * engine.get("copies", 1))
    return sizes


def pods_by_oracle(result, config: dict) -> dict[tuple[str, str], list[int]]:
    """Every planned replica's pods per pool, and those of a replica failing back to a better tier: it runs
    until its replacement is ready (make-before-break), so it still holds its devices in this plan."""
    pods: dict[tuple[str, str], list[int]] = {}
    for plan in result.deployments.values():
        spec = config["modelDeployments"][plan.key.namespace][plan.key.name]
        leaving = [r.replica for r in plan.removed if r.reason.code == "FailedBack"]
        for replica in list(plan.replicas) + leaving:
            [engine] = replica.engines
            pool = engine.members[0].node_pool
            pods.setdefault((replica.cluster, pool), []).extend(
                replica_pods(config, spec, node_of(config, replica.cluster, pool)[0]))
    return pods


def packable(per_node: int, nodes: int, sizes: list[int]) -> bool:
    """Brute force: can pods of these sizes go on `nodes` nodes of `per_node` devices each?"""
    order = sorted(sizes, reverse=True)
    seen: set[tuple[int, tuple[int, ...]]] = set()

    def place(i: int, loads: tuple[int, ...]) -> bool:
        if i == len(order):
            return True
        if (i, loads) in seen:
            return False
        seen.add((i, loads))
        for n in range(nodes):
            if loads[n] + order[i] <= per_node:
                after = tuple(sorted(loads[:n] + (loads[n] + order[i],) + loads[n + 1:]))
                if place(i + 1, after):
                    return True
        return False

    return place(0, (0,) * nodes)


def short_only_without_room(result, config: dict, pods: dict) -> None:
    """A short deployment: no cluster it may use has a pool that takes one more replica on top of everything placed."""
    for plan in result.deployments.values():
        if not plan.short:
            continue
        spec = config["modelDeployments"][plan.key.namespace][plan.key.name]["template"]["spec"]
        region = spec.get("clusterSelector", {}).get("matchLabels", {}).get("region")
        tolerated = {t["key"] for t in spec.get("tolerations", [])}
        for name, cluster in config["inferenceClusters"].items():
            if region not in (None, cluster["labels"]["region"]) or \
                    any(t["key"] not in tolerated for t in cluster.get("taints", [])):
                continue
            for body in cluster["nodePools"]:
                try:
                    for m in spec["engines"][0]["members"]:
                        fits_by_oracle(config, name, body["name"], {"template": {"spec": spec}}, m["role"])
                except AssertionError:
                    continue  # the pool's devices do not match
                per_node, nodes = node_of(config, name, body["name"])
                more = replica_pods(config, {"template": {"spec": spec}}, per_node)
                assert not packable(per_node, nodes, pods.get((name, body["name"]), []) + more), \
                    f"{plan.key} is short, yet pool {name}/{body['name']} takes one more replica"


def fits_by_oracle(config: dict, cluster: str, pool: str, spec: dict, role: str) -> dict:
    """The pool's device satisfies the member's memory selector with enough devices per node."""
    [body] = [p for p in config["inferenceClusters"][cluster]["nodePools"] if p["name"] == pool]
    [device] = CLASSES[body["className"]]["devices"]
    [m] = [m for m in spec["template"]["spec"]["engines"][0]["members"] if m["role"] == role]
    [request] = m["nodeSelector"]["devices"]
    wanted = int(request["selectors"][0]["cel"].split('quantity("')[1].split("Gi")[0])
    assert int(device["capacity"]["memory"]["value"].removesuffix("Gi")) >= wanted, f"{pool} lacks {wanted}Gi"
    assert device.get("count", 1) >= request["count"], f"{pool} has too few devices for {request['count']}"
    return body


def respects_taints(cluster: dict, spec: dict, status: str) -> None:
    tolerated = {t["key"] for t in spec["template"]["spec"].get("tolerations", [])}
    for taint in cluster.get("taints", []):
        if taint["key"] in tolerated:
            continue
        assert taint["effect"] != "NoExecute", f"a replica stays under untolerated {taint}"
        assert status == "retained", f"a new replica placed under untolerated {taint}"


def removed_identities(result) -> set:
    return {(r.replica.key.namespace, r.replica.key.name, r.replica.cluster, r.replica.index) for r in result.removed()}


def check_spread(result, fleet) -> None:
    for key, plan in result.deployments.items():
        load = plan.by_cluster()
        explanation = result.explain(key)
        for verdict in explanation.verdicts:
            if verdict.available and verdict.primary is None:
                assert all(n <= verdict.hosts + 1 for n in load.values()), \
                    f"{key}: {verdict.cluster} could take more but has {verdict.hosts} vs {load}"


@pytest.mark.parametrize("packing", ["DeviceGranular", "WholeNode"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=fleets, steps=edits)
def test_invariants_hold_through_edit_sequences(packing, config, steps):
    config = {"inferenceClasses": CLASSES, "scheduling": {"packing": packing}, **config}
    fleet = load_fleet(copy.deepcopy(config))
    result = schedule(fleet)
    check(result, PlacementDocument(), fleet, config)
    check_spread(result, fleet)
    assert schedule(fleet).document() == result.document()
    for edit in steps:
        apply(config, edit)
        previous = PlacementDocument.model_validate(result.document().model_dump(by_alias=True))
        fleet = load_fleet(copy.deepcopy(config))
        result = schedule(fleet, previous)
        check(result, previous, fleet, config)
        assert schedule(fleet, previous).document() == result.document(), "same input, different output"
        reversed_previous = PlacementDocument.model_validate(
            {**previous.model_dump(by_alias=True), "replicas": list(previous.model_dump(by_alias=True)["replicas"])[::-1]})
        assert schedule(fleet, reversed_previous).document() == result.document(), "previous order changed the plan"
        again = schedule(fleet, PlacementDocument.model_validate(result.document().model_dump(by_alias=True)))
        assert [(r.cluster, r.index, r.name) for r in again.replicas()] == \
               [(r.cluster, r.index, r.name) for r in result.replicas()], "a stable placement moved on replan"


def test_fresh_plans_spread_the_demo_fleet():
    from pathlib import Path

    from modelplane.api.stackfile import read_stack_file

    config = read_stack_file(Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.demo.yaml").config
    result = schedule(load_fleet(config))
    assert result.deployments[NamespacedName("ml-team", "mock-demo")].by_cluster() == {"gpu-eu-west": 1, "gpu-us-east": 1}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fleets, st.booleans())
def test_an_explanation_does_not_depend_on_what_was_explained_before(config, backwards):
    """A plan memoises verdicts across deployments that ask alike; each must read as if asked alone."""
    fleet = load_fleet({"inferenceClasses": CLASSES, **copy.deepcopy(config)})
    keys = sorted(schedule(fleet).deployments, reverse=backwards)
    shared = schedule(fleet)
    together = [shared.explain(key) for key in keys]
    alone = [schedule(fleet).explain(key) for key in keys]
    assert together == alone
    assert [e.summary for e in together] == [e.summary for e in alone]
