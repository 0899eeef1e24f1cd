"""A plan's placement data: replicas with their engines on pools, removals with their reasons, conditions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..api import NamespacedName
from . import reasons
from .document import pool_cost, pool_devices
from .matching import ResolvedRequest
from .snapshot import Workload

ReplicaStatus = Literal["retained", "new"]  # kept from the previous placement, or placed by this plan


@dataclass(frozen=True)
class MemberAssignment:
    role: str
    node_pool: str
    pods: int
    device_requests: tuple[ResolvedRequest, ...]  # empty for a claimless member (it costs no node)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "nodePool": self.node_pool, "pods": self.pods}
        if self.device_requests:
            out["deviceRequests"] = [
                {
                    "name": r.name,
                    "deviceClassName": r.device_class_name,
                    "count": r.count,
                    "selectors": [{"cel": s} for s in r.selectors],
                }
                for r in self.device_requests
            ]
        return out


@dataclass(frozen=True)
class EngineAssignment:
    name: str
    copies: int
    phase: str | None
    members: tuple[MemberAssignment, ...]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "copies": self.copies}
        if self.phase:
            out["phase"] = self.phase
        out["members"] = [m.to_dict() for m in self.members]
        return out


@dataclass(frozen=True)
class PlacedReplica:
    key: NamespacedName  # the deployment
    name: str
    cluster: str
    index: int
    engines: tuple[EngineAssignment, ...]
    status: ReplicaStatus

    @property
    def pools(self) -> list[str]:
        return sorted({m.node_pool for e in self.engines for m in e.members})

    def node_cost(self) -> int:
        return sum(m.pods * e.copies for e in self.engines for m in e.members if m.device_requests)

    def pool_cost(self) -> dict[str, int]:
        """Nodes it occupies per pool at this plan's shape (whole-node packing)."""
        return pool_cost(self.engines)

    def device_count(self) -> int:
        return sum(m.pods * e.copies * sum(r.count for r in m.device_requests) for e in self.engines for m in e.members)

    def pool_devices(self) -> dict[str, int]:
        """DRA devices it requests per pool at this plan's shape."""
        return pool_devices(self.engines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.key.namespace,
            "deployment": self.key.name,
            "name": self.name,
            "cluster": self.cluster,
            "index": self.index,
            "engines": [e.to_dict() for e in self.engines],
        }


@dataclass(frozen=True)
class RemovedReplica:
    replica: PlacedReplica
    reason: reasons.Reason


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class DeploymentPlan:
    key: NamespacedName
    desired: int
    replicas: tuple[PlacedReplica, ...]
    conditions: tuple[Condition, ...]
    removed: tuple[RemovedReplica, ...] = ()

    @property
    def scheduled(self) -> int:
        return len(self.replicas)

    @property
    def short(self) -> bool:
        return self.scheduled < self.desired

    def by_cluster(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for replica in self.replicas:
            counts[replica.cluster] = counts.get(replica.cluster, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.key.namespace,
            "name": self.key.name,
            "replicas": self.desired,
            "scheduled": self.scheduled,
            "conditions": [c.to_dict() for c in self.conditions],
        }


def conditions_for(workload: Workload, replicas: list, any_candidate: bool) -> tuple[Condition, ...]:
    """ReplicasScheduled, False whenever short (unlike the reference's issue #437)."""
    message = f"Scheduled {len(replicas)} of {workload.replicas} replicas"
    if not any_candidate:
        return (
            Condition(
                "ReplicasScheduled",
                "False",
                "NoClusters",
                "No InferenceCluster matches the clusterSelector (and ModelCache footprint)",
            ),
        )
    if len(replicas) < workload.replicas:
        return (Condition("ReplicasScheduled", "False", "InsufficientCapacity", message),)
    return (Condition("ReplicasScheduled", "True", "ReplicasCreated", message),)
