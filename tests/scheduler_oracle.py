"""The scheduler's invariants, checked against the config by code that shares none with the scheduler: a
brute-force bin packing of pods on nodes, the selectors and taints read from the config itself. Used by the
property tests of test_scheduler_properties.py and test_tiers.py (random fleets: `builders.random_*`).

Every class a config names here has one device kind (`builders.RANDOM_CLASSES`)."""
from __future__ import annotations

from modelplane.scheduling import PlacementDocument

REASONS = {"ScaledDown", "Evicted", "NoLongerFits", "NotSelected", "OutsideCacheFootprint", "ClusterRemoved",
           "Duplicate", "DeploymentRemoved", "FailedBack", "NotPreferred"}


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
    [device] = config["inferenceClasses"][body["className"]]["devices"]
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


def usable_clusters(config: dict, spec: dict) -> list[str]:
    """The clusters a deployment's spec may put a new replica on: its region selector, no untolerated taint."""
    region = spec.get("clusterSelector", {}).get("matchLabels", {}).get("region")
    tolerated = {t["key"] for t in spec.get("tolerations", [])}
    return [name for name, cluster in config["inferenceClusters"].items()
            if region in (None, cluster["labels"]["region"])
            and all(t["key"] in tolerated for t in cluster.get("taints", []))]


def takes_one_more(config: dict, cluster: str, spec: dict, pods: dict) -> bool:
    """Whether a pool of the cluster that every member's selectors match takes one more replica on top of `pods`."""
    for body in config["inferenceClusters"][cluster]["nodePools"]:
        try:
            for m in spec["engines"][0]["members"]:
                fits_by_oracle(config, cluster, body["name"], {"template": {"spec": spec}}, m["role"])
        except AssertionError:
            continue  # the pool's devices do not match
        per_node, nodes = node_of(config, cluster, body["name"])
        more = replica_pods(config, {"template": {"spec": spec}}, per_node)
        if packable(per_node, nodes, pods.get((cluster, body["name"]), []) + more):
            return True
    return False


def short_only_without_room(result, config: dict, pods: dict) -> None:
    """A short deployment: no cluster it may use has a pool that takes one more replica on top of everything placed."""
    for plan in result.deployments.values():
        if not plan.short:
            continue
        spec = config["modelDeployments"][plan.key.namespace][plan.key.name]["template"]["spec"]
        for name in usable_clusters(config, spec):
            assert not takes_one_more(config, name, spec, pods), \
                f"{plan.key} is short, yet cluster {name} takes one more replica"


def spread_violations(config: dict, loads: dict[tuple[str, str], dict[str, int]], pods: dict) -> list[str]:
    """Spread when capacity allows, from the config alone: for each (namespace, deployment) and its replicas per
    cluster, a cluster it may use that holds two fewer than another must not take one more replica on top of
    `pods` (on a fresh plan the scheduler would have put the other cluster's last replica there)."""
    found = []
    for (namespace, name), load in loads.items():
        spec = config["modelDeployments"][namespace][name]["template"]["spec"]
        most = max(load.values(), default=0)
        for cluster in usable_clusters(config, spec):
            if load.get(cluster, 0) + 2 <= most and takes_one_more(config, cluster, spec, pods):
                found.append(f"{namespace}/{name}: {cluster} holds {load.get(cluster, 0)} of {load}, yet takes one more")
    return found


def check_spread(result, config: dict) -> None:
    """A fresh plan spreads each deployment (spread_violations), with the pods the plan put on each pool."""
    loads = {(key.namespace, key.name): plan.by_cluster() for key, plan in result.deployments.items()}
    violations = spread_violations(config, loads, pods_by_oracle(result, config))
    assert not violations, "; ".join(violations)


def fits_by_oracle(config: dict, cluster: str, pool: str, spec: dict, role: str) -> dict:
    """The pool's device satisfies the member's memory selector with enough devices per node."""
    [body] = [p for p in config["inferenceClusters"][cluster]["nodePools"] if p["name"] == pool]
    [device] = config["inferenceClasses"][body["className"]]["devices"]
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
