"""Device-granular packing against the real allocator (kube-scheduler's DynamicResources plugin).

Each case is a pool of alike nodes publishing `per_node` devices and deployments asking for
replicas of `count` devices each. Our answer is modelplane's plan (`schedule`, packing
DeviceGranular): which replicas are placed and how many each deployment is short. The allocator's
answer: one pod per replica the config asks for, each with a ResourceClaim for `count` devices
(allocationMode ExactCount), kept to the case's nodes by their pool label and placed by
kube-scheduler. The planned pods are created first, in fill order; they must all be bound with their
claims allocated. Only then are the short replicas' pods created: each must stay Pending
(Unschedulable). So a pool is reported short exactly when kube-scheduler leaves a pod Pending.

Cases: nine 1-device replicas for one 8-device node (eight fit, the ninth is short); 4 + 2 + 1 + 1 on one 8-device node; three
2-device replicas on three 3-device nodes (one a node, 2 + 2 > 3) and one more 2-device replica,
short with 3 devices free (fragmented: largest free block 1).
Standalone (starts its own one-cluster LocalFleet): `python -m tests.e2e.packing_cases [work dir]`.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelplane.api import NamespacedName, load_fleet
from modelplane.scheduling import schedule

if TYPE_CHECKING:
    from .kube_api import KubeApi

DRIVER = "packing.example.com"
DEVICE_CLASS = "packing-cases.example.com"
POOL_LABEL = "modelplane.ai/pool"
NAMESPACE = "packing-cases"
TIMEOUT = 60.0  # seconds for the planned pods to be bound
PENDING_FOR = 10.0  # seconds a short replica's pod must stay Pending after every planned pod is bound


@dataclass(frozen=True)
class PackingCase:
    name: str
    per_node: int
    nodes: int
    deployments: tuple[tuple[str, int, int], ...]  # (name, replicas, devices per replica)


CASES = (
    PackingCase("eight-on-one", 8, 1, (("one-gpu", 9, 1),)),  # the ninth is short: the node has 8
    PackingCase("mixed", 8, 1, (("four", 1, 4), ("two", 1, 2), ("one-a", 1, 1), ("one-b", 1, 1))),
    PackingCase("fragmented", 3, 3, (("code", 3, 2), ("reasoning", 1, 2))),
)


@dataclass(frozen=True)
class Planned:
    """Our answer for a case: the pods of placed replicas in fill order, those of missing ones, and explain's summary."""

    placed: tuple[tuple[str, int, int], ...]  # (deployment, replica number, devices)
    short: tuple[tuple[str, int, int], ...]
    summaries: tuple[str, ...]


def case_config(case: PackingCase) -> dict:
    device = {"name": "gpu", "driver": DRIVER, "deviceClassName": DEVICE_CLASS, "count": case.per_node,
              "capacity": {"memory": {"value": "80Gi"}}}
    member = lambda count: {"nodeSelector": {"devices": [{"name": "gpu", "count": count, "selectors": [
        {"cel": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("20Gi")) >= 0'}]}]},
        "template": {"spec": {"containers": [{"name": "engine", "image": "engine:1"}]}}}
    return {"inferenceClasses": {"gpus": {"devices": [device]}},
            "inferenceClusters": {"packing": {"cluster": {"source": "Kind"},
                                              "nodePools": [{"name": case.name, "className": "gpus",
                                                             "nodeCount": case.nodes}]}},
            "modelDeployments": {"packing": {name: {"replicas": replicas, "template": {"spec": {"engines": [
                {"name": "main", "members": [member(count)]}]}}} for name, replicas, count in case.deployments}}}


def our_plan(case: PackingCase) -> Planned:
    result = schedule(load_fleet(copy.deepcopy(case_config(case))))
    placed, short, summaries = [], [], []
    for name, replicas, count in case.deployments:  # (namespace, name) is fill order; ours are listed in it
        plan = result.deployments[NamespacedName("packing", name)]
        placed += [(name, i, count) for i in range(plan.scheduled)]
        short += [(name, i, count) for i in range(plan.scheduled, replicas)]
        if plan.short:
            summaries.append(f"{name}: {result.explain(plan.key).summary}")
    order = {name: i for i, (name, _, _) in enumerate(sorted(case.deployments))}
    return Planned(tuple(sorted(placed, key=lambda p: order[p[0]])), tuple(short), tuple(summaries))


def pod_name(case: PackingCase, deployment: str, number: int) -> str:
    return f"{case.name}-{deployment}-{number}"


# ---------------------------------------------------------------------------------------------- against the cluster

def claim_manifest(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": count}}]}}}


def pod_manifest(name: str, pool: str) -> dict:
    """Placed by kube-scheduler on any node of the case's pool."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"nodeSelector": {POOL_LABEL: pool}, "tolerations": [{"operator": "Exists"}],
                     "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "devices", "resourceClaimName": name}],
                     "containers": [{"name": "main", "image": "registry.invalid/packing-case:none",
                                     "resources": {"claims": [{"name": "devices"}]}}]}}


@dataclass(frozen=True)
class CaseResult:
    name: str
    planned: Planned
    bound: dict[str, str]  # planned pod -> its node, for those bound with their claim allocated
    pending: dict[str, str]  # short replica's pod -> its PodScheduled message, for those left Pending

    @property
    def agree(self) -> bool:
        return len(self.bound) == len(self.planned.placed) and len(self.pending) == len(self.planned.short)


def _state(api: KubeApi) -> tuple[dict, dict]:
    from .kube_api import object_path
    pods = {p["metadata"]["name"]: p for p in api.list(object_path("v1", "pods", NAMESPACE))}
    claims = {c["metadata"]["name"]: c for c in api.list(object_path("resource.k8s.io/v1", "resourceclaims", NAMESPACE))}
    return pods, claims


def _bound(pods: dict, claims: dict, name: str) -> str | None:
    node = ((pods.get(name) or {}).get("spec") or {}).get("nodeName")
    allocated = ((claims.get(name) or {}).get("status") or {}).get("allocation")
    return node if node and allocated else None


def _unschedulable(pods: dict, name: str) -> str | None:
    for condition in ((pods.get(name) or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            return condition.get("message", "")
    return None


def _create(api: KubeApi, case: PackingCase, pods: tuple[tuple[str, int, int], ...]) -> list[str]:
    from .kube_api import object_path
    names = []
    for deployment, number, count in pods:
        name = pod_name(case, deployment, number)
        api.create(object_path("resource.k8s.io/v1", "resourceclaims", NAMESPACE), claim_manifest(name, count))
        api.create(object_path("v1", "pods", NAMESPACE), pod_manifest(name, case.name))
        names.append(name)
    return names


def run_cases(api: KubeApi, cases: tuple[PackingCase, ...] = CASES, *, cluster: str = "packing-cases") -> list[CaseResult]:
    """Every case at once, each on its own pool of fake nodes; cleans up what it created."""
    from .kube_api import object_path
    from .kubelet import FakeKubelet, NodeGroup
    from .selector_cases import _delete_now, _ensure_namespace
    plans = {case.name: our_plan(case) for case in cases}
    groups = [NodeGroup(case.name, case.nodes, {POOL_LABEL: case.name}, (),
                        tuple({"name": f"gpu-{i}", "attributes": {}, "capacity": {"memory": {"value": "80Gi"}}}
                              for i in range(case.per_node)), DRIVER) for case in cases]
    api.apply(object_path("resource.k8s.io/v1", "deviceclasses", None, DEVICE_CLASS),
              {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
               "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    _ensure_namespace(api, NAMESPACE)
    kubelet = FakeKubelet(api, cluster, groups)
    kubelet.start()
    created: list[str] = []
    bound: dict[str, dict[str, str]] = {case.name: {} for case in cases}
    pending: dict[str, dict[str, str]] = {case.name: {} for case in cases}
    try:
        kubelet.wait_schedulable()
        planned = {case.name: _create(api, case, plans[case.name].placed) for case in cases}
        created += [n for names in planned.values() for n in names]
        deadline = time.monotonic() + TIMEOUT
        while True:
            pods, claims = _state(api)
            for case in cases:
                bound[case.name] = {n: node for n in planned[case.name] if (node := _bound(pods, claims, n))}
            if all(len(bound[c.name]) == len(planned[c.name]) for c in cases) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        short = {case.name: _create(api, case, plans[case.name].short) for case in cases}
        created += [n for names in short.values() for n in names]
        time.sleep(PENDING_FOR)
        pods, claims = _state(api)
        for case in cases:
            pending[case.name] = {n: message for n in short[case.name]
                                  if _bound(pods, claims, n) is None and (message := _unschedulable(pods, n)) is not None}
    finally:
        for name in created:
            _delete_now(api, object_path("v1", "pods", NAMESPACE, name))
            _delete_now(api, object_path("resource.k8s.io/v1", "resourceclaims", NAMESPACE, name))
        kubelet.stop()
        for node in kubelet.node_pool:
            _delete_now(api, object_path("v1", "nodes", None, node))
        for s in api.list(object_path("resource.k8s.io/v1", "resourceslices"), field_selector=f"spec.driver={DRIVER}"):
            _delete_now(api, object_path("resource.k8s.io/v1", "resourceslices", None, s["metadata"]["name"]))
        _delete_now(api, object_path("resource.k8s.io/v1", "deviceclasses", None, DEVICE_CLASS))
        api.delete(object_path("v1", "namespaces", None, NAMESPACE))
    return [CaseResult(case.name, plans[case.name], bound[case.name], pending[case.name]) for case in cases]


def report(results: list[CaseResult]) -> str:
    lines = []
    for r in results:
        nodes = sorted(set(r.bound.values()))
        lines.append(f"{r.name}: ours {len(r.planned.placed)} placed, {len(r.planned.short)} short; allocator "
                     f"{len(r.bound)} bound with claims allocated (on {len(nodes)} node{'s' if len(nodes) != 1 else ''}: "
                     f"{', '.join(nodes) or '-'}), {len(r.pending)} left Pending: {'agree' if r.agree else 'DISAGREE'}")
        lines += [f"  ours: {s}" for s in r.planned.summaries]
        lines += [f"  kube-scheduler, {pod}: {' '.join(message.split())}" for pod, message in sorted(r.pending.items())]
    lines.append(f"{sum(r.agree for r in results)}/{len(results)} packing cases agree")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Start a one-cluster LocalFleet, run the cases, print the report; exit 1 on any disagreement."""
    from .standalone import run_standalone

    return run_standalone(argv, "/tmp/e2e-packing-cases", run_cases, report)


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
