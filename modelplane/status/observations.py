"""What status saw on the live clusters and at the endpoints, as plain data, and how API objects read into it (pure)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..render.replica import SERVING

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ReplicaPods:
    """A replica's pods on its cluster (those labelled modelplane.ai/serving=<replica>) and their ResourceClaims."""

    pods: int = 0
    ready: int = 0
    claims: int = 0  # ResourceClaims the pods use (one per entry of spec.resourceClaims)
    allocated: int = 0  # of those, claims that exist and have status.allocation
    not_ready: tuple[str, ...] = ()  # pod names
    unallocated: tuple[str, ...] = ()  # "<pod>: claim <name> not allocated" / "... not created yet"

    def to_dict(self) -> dict[str, Any]:
        return {"pods": self.pods, "ready": self.ready, "claims": self.claims, "allocated": self.allocated,
                "notReady": list(self.not_ready), "unallocated": list(self.unallocated)}


@dataclass(frozen=True)
class ClusterReading:
    """One cluster, read now: `error` set (and nothing else) when it could not be read."""

    cluster: str
    error: str | None = None
    error_kind: str | None = None  # "unreachable" | "unreadable"
    gateway_address: str | None = None  # status.addresses[0].value of the workload Gateway
    replicas: dict[tuple[str, str], ReplicaPods] = field(default_factory=dict)  # (namespace, replica) -> pods

    @property
    def read(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Probe:
    """The front door's health check of one replica, made from here."""

    state: str  # "healthy" | "unhealthy" | "unreachable"
    http_status: int | None = None
    detail: str = ""

    @property
    def text(self) -> str:
        if self.state == "healthy":
            return "healthy"
        if self.state == "unhealthy":
            return f"unhealthy (HTTP {self.http_status})"
        return f"unreachable ({self.detail})"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "httpStatus": self.http_status, "detail": self.detail}


def replica_pods(pods: Iterable[dict], claims: Iterable[dict]) -> dict[str, ReplicaPods]:
    """Per replica name: its pods (a pod list of one namespace) and the claims they use (that namespace's claims)."""
    allocated = {c.get("metadata", {}).get("name"): bool((c.get("status") or {}).get("allocation")) for c in claims}
    grouped: dict[str, list[dict]] = {}
    for pod in pods:
        replica = (pod.get("metadata", {}).get("labels") or {}).get(SERVING)
        if replica and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            grouped.setdefault(replica, []).append(pod)
    return {replica: _read_pods(sorted(group, key=lambda p: p["metadata"].get("name", "")), allocated)
            for replica, group in grouped.items()}


def _read_pods(pods: list[dict], allocated: dict[str, bool]) -> ReplicaPods:
    ready = claims = allocated_count = 0
    not_ready: list[str] = []
    unallocated: list[str] = []
    for pod in pods:
        name = pod["metadata"].get("name", "?")
        status = pod.get("status") or {}
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
            ready += 1
        else:
            not_ready.append(name)
        generated = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
        for reference in (pod.get("spec") or {}).get("resourceClaims") or []:
            claims += 1
            claim = generated.get(reference.get("name")) or reference.get("resourceClaimName")
            if claim is None:
                unallocated.append(f"{name}: claim {reference.get('name')} not created yet")
            elif allocated.get(claim):
                allocated_count += 1
            else:
                unallocated.append(f"{name}: claim {claim} " + ("not allocated" if claim in allocated else "missing"))
    return ReplicaPods(len(pods), ready, claims, allocated_count, tuple(not_ready), tuple(unallocated))


def gateway_address(gateway: dict | None) -> str | None:
    """The workload Gateway's first address (`status.addresses[0].value`), if it has one."""
    addresses = ((gateway or {}).get("status") or {}).get("addresses") or []
    value = addresses[0].get("value") if addresses and isinstance(addresses[0], dict) else None
    return value if isinstance(value, str) and value else None
