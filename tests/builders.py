"""Small builders for valid config fragments; tests change one thing and look at the result.

One name, one signature, for every test module: the demo-shaped fleet (`fleet_config` and its `demo_*` parts),
the scheduler's fleets of node pools (`cluster`, `member`, `deployment`, `plan` and the views of a plan) and the
random fleets and edits of its property tests (`random_*`, `apply_edit`).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from modelplane.api import NamespacedName, load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.scheduling import PlacementDocument, schedule

REPO = Path(__file__).resolve().parent.parent
STACKS = REPO / "stacks"

GPU_CLASS = {
    "devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                 "capacity": {"memory": {"value": "80Gi"}}}],
}


def demo_cluster(region: str = "eu-west", pool: str = "gpu", class_name: str = "synthetic-gpu", **extra: Any) -> dict:
    body = {"labels": {"modelplane.ai/region": region}, "cluster": {"source": "Kind"},
            "nodePools": [{"name": pool, "className": class_name}]}
    body.update(extra)
    return body


def demo_member(role: str = "Standalone", cel: str | None = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0',
           **extra: Any) -> dict:
    # the model name the engine answers (what the front door puts in a request's `model`); a Worker joins its leader
    args = {"args": ["--served-model-name=mock"]} if role != "Worker" else {}
    body: dict[str, Any] = {"role": role, "template": {"spec": {"containers": [
        {"name": "engine", "image": "python:3.12", **args}]}}}
    if cel is not None:
        body["nodeSelector"] = {"devices": [{"name": "gpu", "selectors": [{"cel": cel}]}]}
    body.update(extra)
    return body


def demo_deployment(replicas: int = 2, members: list | None = None, **spec: Any) -> dict:
    engine = {"name": "main", "members": members or [demo_member()]}
    return {"replicas": replicas, "template": {"spec": {"engines": [engine], **spec}}}


def fleet_config(**overrides: Any) -> dict:
    """A small valid fleet: one class, two Kind clusters, one deployment in ml-team."""
    config = {
        "inferenceClasses": {"synthetic-gpu": copy.deepcopy(GPU_CLASS)},
        "inferenceClusters": {"gpu-eu-west": demo_cluster("eu-west"), "gpu-us-east": demo_cluster("us-east")},
        "modelDeployments": {"ml-team": {"mock-demo": demo_deployment()}},
    }
    config.update(overrides)
    return config


def floats(value: Any) -> Any:
    """A stack output as a stack reference reads it back: every number a float."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def traefik_front_door(gateway: dict, version: str = "40.2.0") -> dict:
    """`gateway` (an inferenceGateway config) served by Traefik, as the reference has it: its load-balancer settings move
    into the `traefik` block. For the tests of the Traefik option; the default front door is Envoy Gateway."""
    block = dict(gateway.pop("envoyGateway", None) or {})
    gateway["backend"] = "Traefik"
    gateway["traefik"] = {"version": version, **block}
    return gateway


def stack_config(name: str) -> dict:
    """The config of a stack under stacks/ (`demo`, `cloud`), as the CLI and the engine read it."""
    return read_stack_file(STACKS / f"Pulumi.{name}.yaml").config


# --- the scheduler's fleets: clusters of node pools, members asking for GPU memory -------------------

MEM = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("{}")) >= 0'
CLASSES = {
    "small": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                           "capacity": {"memory": {"value": "24Gi"}}}]},
    "big": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 8,
                         "capacity": {"memory": {"value": "80Gi"}}},
                        {"name": "nic", "claim": "Synthetic", "driver": "nic.example.com",
                         "attributes": {"linkType": {"string": "infiniband"}}}]},
    "nic-only": {"devices": [{"name": "nic", "claim": "Synthetic", "driver": "nic.example.com",
                              "attributes": {"linkType": {"string": "infiniband"}}}]},
    "odd": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                         "attributes": {"model": {"string": "x"}}, "capacity": {"memory": {"value": "24Gi"}}}]},
}


def cluster(*pools: tuple[str, str, int], taints=(), rwx=None, **labels) -> dict:
    """A Kind cluster of (pool, class, nodes), or with `rwx` (a StorageClass) an Existing one that can stage ModelCaches."""
    source = {"source": "Kind"} if rwx is None else \
        {"source": "Existing", "existing": {"kubeconfig": "kubeconfig-text", "cache": {"storageClassName": rwx}}}
    body = {"labels": labels, "cluster": source,
            "nodePools": [{"name": name, "className": cls, "nodeCount": nodes} for name, cls, nodes in pools]}
    if taints:
        body["taints"] = [dict(zip(("key", "effect"), t)) for t in taints]
    return body


def member(role="Standalone", memory="20Gi", count=1, extra=(), image="engine:1", **more) -> dict:
    """A member asking for `count` GPUs of at least `memory` (None: no device), and `extra` CEL selectors."""
    body = {"role": role, "template": {"spec": {"containers": [{"name": "engine", "image": image}]}}, **more}
    if memory is not None:
        selectors = [{"cel": MEM.format(memory)}] + [{"cel": e} for e in extra]
        body["nodeSelector"] = {"devices": [{"name": "gpu", "count": count, "selectors": selectors}]}
    return body


def deployment(replicas=1, members=None, copies=1, engines=None, **spec) -> dict:
    engines = engines or [{"name": "main", "copies": copies, "members": members or [member()]}]
    return {"replicas": replicas, "template": {"spec": {"engines": engines, **spec}}}


def plan(clusters: dict, deployments: dict, previous=None, **extra):
    """The reference's scenarios: its whole-node accounting unless a case says otherwise."""
    config = {"inferenceClasses": CLASSES, "inferenceClusters": clusters, "modelDeployments": deployments,
              "scheduling": {"packing": "WholeNode"}, **extra}
    fleet = load_fleet(copy.deepcopy(config))
    return schedule(fleet, PlacementDocument.model_validate(previous.document().model_dump(by_alias=True))
                    if previous is not None else None)


def where(result, namespace="ml", name="d") -> list[tuple[str, int, tuple[str, ...]]]:
    plan_ = result.deployments[NamespacedName(namespace, name)]
    return [(r.cluster, r.index, tuple(r.pools)) for r in plan_.replicas]


def status(result, namespace="ml", name="d") -> tuple[str, str, str]:
    c = result.deployments[NamespacedName(namespace, name)].conditions[0]
    return c.status, c.reason, c.message


# --- random fleets and edit sequences for the scheduler's property tests ------------------------------

RANDOM_CLASSES = {
    "small": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                           "capacity": {"memory": {"value": "24Gi"}}}]},
    "big": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 8,
                         "capacity": {"memory": {"value": "80Gi"}}}]},
    # Three devices a node: pods of 1, 2 and 3 fragment it (1+1 on one node strands a 2 that 1+2, 1+2 would fit).
    "mid": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 3,
                         "capacity": {"memory": {"value": "48Gi"}}}]},
}

random_clusters = st.dictionaries(
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


def random_member(role: str, memory: str, count: int, workers: int | None) -> dict:
    body = {"role": role, "template": {"spec": {"containers": [{"name": "engine", "image": "e"}]}},
            "nodeSelector": {"devices": [{"name": "gpu", "count": count, "selectors": [{"cel": MEM.format(memory)}]}]}}
    if workers:
        body["worker"] = {"nodes": workers}
    return body


@st.composite
def random_deployments(draw) -> dict:
    memory, count = draw(st.sampled_from(["20Gi", "70Gi"])), draw(st.integers(1, 3))
    if draw(st.booleans()):
        members = [random_member("Standalone", memory, count, None)]
    else:
        members = [random_member("Leader", memory, count, None),
                   random_member("Worker", memory, count, draw(st.integers(1, 2)))]
    spec: dict = {"engines": [{"name": "e", "copies": draw(st.integers(1, 2)), "members": members}]}
    if draw(st.booleans()):
        spec["clusterSelector"] = {"matchLabels": {"region": draw(st.sampled_from(["eu", "us"]))}}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": draw(st.sampled_from(["gpu", "drain"])), "operator": "Exists"}]
    return {"replicas": draw(st.integers(1, 5)), "template": {"spec": spec}}


random_fleets = st.fixed_dictionaries({"inferenceClusters": random_clusters,
                                       "modelDeployments": st.fixed_dictionaries(
                                           {"ml": st.dictionaries(st.sampled_from(["a", "b", "c"]), random_deployments(),
                                                                  min_size=1, max_size=3)})})

random_edits = st.lists(st.one_of(
    st.tuples(st.just("scale"), st.sampled_from(["a", "b", "c"]), st.integers(1, 6)),
    st.tuples(st.just("drain"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.sampled_from(["NoSchedule", "NoExecute"])),
    st.tuples(st.just("undrain"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.just(None)),
    st.tuples(st.just("remove"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.just(None)),
    st.tuples(st.just("selector"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["20Gi", "70Gi"])),
    st.tuples(st.just("shrink"), st.sampled_from(["c1", "c2", "c3", "c4"]), st.integers(0, 2)),
    st.tuples(st.just("copies"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
    st.tuples(st.just("workers"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
), max_size=6)


def apply_edit(config: dict, edit: tuple) -> None:
    """One of `random_edits` applied to a config in place (an edit of something the fleet lacks does nothing)."""
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
