"""Pods on real nodes, as the API servers hold them: a pod bound to a node of its planned pool with its DRA claims
allocated from that node's devices, and every gang (multi-node) replica of the plan a LeaderWorkerSet that reports
Available, its leader and worker pods each placed that way (the LWS controller of tests/e2e/lws_controller.py
makes the groups, kube-controller-manager the pods, kube-scheduler binds them, the fake kubelet runs them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from modelplane.scheduling.names import child_name

from .kube_api import object_path
from .kubelet import POOL_LABEL
from .lws_controller import SET_NAME_LABEL

if TYPE_CHECKING:
    from .kube_api import KubeApi

LWS_API = "leaderworkerset.x-k8s.io/v1"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # "0" on a group's leader
CHECK = ("gang replicas: each LeaderWorkerSet Available, its leader and worker pods bound to the planned pools, "
         "claims allocated there")


@dataclass(frozen=True)
class Gang:
    """One multi-node engine of a planned replica: `copies` groups of a leader and `workers` worker pods."""

    cluster: str
    namespace: str
    replica: str
    name: str  # the LeaderWorkerSet's
    copies: int
    leader_pool: str
    worker_pool: str
    workers: int  # worker pods per group


def planned_gangs(plan: dict) -> list[Gang]:
    """The LeaderWorkerSets `modelplane plan --output json` implies: one per engine with a Leader member."""
    gangs = []
    for replica in plan["replicas"]:
        for engine in replica["engines"]:
            roles = {m["role"]: m for m in engine["members"]}
            if "Leader" not in roles:
                continue
            gangs.append(Gang(replica["cluster"], replica["namespace"], replica["name"],
                              child_name(replica["name"], engine["name"]), engine["copies"],
                              roles["Leader"]["nodePool"], roles["Worker"]["nodePool"], roles["Worker"]["pods"]))
    return gangs


def is_available(lws: dict) -> bool:
    conditions = lws.get("status", {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def gang_problems(api: "KubeApi", gang: Gang) -> tuple[list[str], int, int]:
    """What is wrong with `gang` on its cluster, and how many leader and worker pods were checked."""
    lws = api.get(object_path(LWS_API, "leaderworkersets", gang.namespace, gang.name))
    if lws is None:
        return [f"{gang.name}: no LeaderWorkerSet on {gang.cluster}"], 0, 0
    problems = [] if is_available(lws) else [f"{gang.name}: not Available ({lws.get('status', {}).get('conditions')})"]
    pods = [p for p in api.list(object_path("v1", "pods", gang.namespace), label_selector=f"{SET_NAME_LABEL}={gang.name}")
            if not p["metadata"].get("deletionTimestamp")]
    leaders = [p for p in pods if p["metadata"]["labels"].get(WORKER_INDEX_LABEL) == "0"]
    workers = [p for p in pods if p not in leaders]
    if len(leaders) != gang.copies or len(workers) != gang.copies * gang.workers:
        problems.append(f"{gang.name}: {len(leaders)} leader and {len(workers)} worker pods, planned {gang.copies} "
                        f"and {gang.copies * gang.workers}")
    for pod in leaders:
        problems += pod_placement_problems(api, pod, {gang.leader_pool})
    for pod in workers:
        problems += pod_placement_problems(api, pod, {gang.worker_pool})
    return problems, len(leaders), len(workers)


def gangs_on_real_nodes(plan: dict, api_of: Callable[[str], "KubeApi"]) -> tuple[str, bool, str]:
    """The report's check: (name, ok, detail). A plan with no gang replica fails: the stack is meant to have one."""
    gangs = planned_gangs(plan)
    problems, leaders, workers = [] if gangs else ["the plan has no gang replica"], 0, 0
    for gang in gangs:
        found, led, worked = gang_problems(api_of(gang.cluster), gang)
        problems, leaders, workers = problems + found, leaders + led, workers + worked
    pools = sorted({(g.cluster, g.leader_pool, g.worker_pool) for g in gangs})
    return CHECK, not problems, "; ".join(problems[:6]) if problems else (
        f"{len(gangs)} LeaderWorkerSets Available; {leaders} leader and {workers} worker pods Ready on "
        + ", ".join(f"{c} pools {lp}/{wp}" for c, lp, wp in pools))


def pod_placement_problems(api: "KubeApi", pod: dict, pools: set[str]) -> list[str]:
    """`pod` is bound to a node of one of `pools`, Ready, and each of its claims allocated from that node's devices."""
    name = pod["metadata"]["name"]
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        return [f"{name}: not bound"]
    node = api.get(object_path("v1", "nodes", None, node_name)) or {}
    pool = node.get("metadata", {}).get("labels", {}).get(POOL_LABEL)
    problems = [] if pool in pools else [f"{name}: bound to {node_name} in pool {pool}, planned {sorted(pools)}"]
    if not any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])):
        problems.append(f"{name}: not Ready")
    slices = api.list(object_path("resource.k8s.io/v1", "resourceslices"), field_selector=f"spec.nodeName={node_name}")
    devices = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"].get("devices", [])}
    for status in pod.get("status", {}).get("resourceClaimStatuses", []):
        claim = api.get(object_path("resource.k8s.io/v1", "resourceclaims", pod["metadata"]["namespace"],
                                    status["resourceClaimName"])) or {}
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        if not results:
            problems.append(f"{name}: claim {status['resourceClaimName']} not allocated")
        problems += [f"{name}: device {r['device']} of pool {r['pool']} is not on node {node_name}"
                     for r in results if (r["driver"], r["pool"], r["device"]) not in devices]
    if not pod.get("status", {}).get("resourceClaimStatuses"):
        problems.append(f"{name}: no allocated claim")
    return problems
