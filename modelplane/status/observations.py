"""What status saw on the live clusters and at the endpoints, as plain data, and how API objects read into it (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..render.types import SERVING

ReadErrorKind = Literal["unreachable", "unreadable"]  # a cluster that did not answer; one whose answer was unusable
ProbeState = Literal["healthy", "unhealthy", "unreachable"]

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
        return {
            "pods": self.pods,
            "ready": self.ready,
            "claims": self.claims,
            "allocated": self.allocated,
            "notReady": list(self.not_ready),
            "unallocated": list(self.unallocated),
        }


@dataclass(frozen=True)
class ClusterReading:
    """One cluster, read now: `error` set (and nothing else) when it could not be read."""

    cluster: str
    error: str | None = None
    error_kind: ReadErrorKind | None = None
    gateway_address: str | None = None  # status.addresses[0].value of the workload Gateway
    replicas: dict[tuple[str, str], ReplicaPods] = field(default_factory=dict)  # (namespace, replica) -> pods

    @property
    def read(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Probe:
    """The front door's health check of one replica, made from here."""

    state: ProbeState
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
    """Per replica name: its pods (a pod list of one namespace) and the claims they use (that namespace's claims).

    Objects come from an API server and are not trusted: a field of the wrong type reads as absent."""
    allocated = {}
    for claim in claims:
        name = _field(claim, "metadata", "name")
        if isinstance(name, str):
            allocated[name] = bool(_field(claim, "status", "allocation"))
    grouped: dict[str, list[dict]] = {}
    for pod in pods:
        replica = _field(pod, "metadata", "labels", SERVING)
        if isinstance(replica, str) and replica and _field(pod, "status", "phase") not in TERMINAL_PHASES:
            grouped.setdefault(replica, []).append(pod)
    return {replica: _read_pods(sorted(group, key=_name), allocated) for replica, group in grouped.items()}


def _field(value: Any, *keys: str) -> Any:
    """value[k1][k2]..., or None where a level is not a mapping."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _list(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _name(pod: dict) -> str:
    return _shown(_field(pod, "metadata", "name"))


def _read_pods(pods: list[dict], allocated: dict[str, bool]) -> ReplicaPods:
    ready = claims = allocated_count = 0
    not_ready: list[str] = []
    unallocated: list[str] = []
    for pod in pods:
        name = _name(pod)
        conditions = _list(_field(pod, "status", "conditions"))
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            ready += 1
        else:
            not_ready.append(name)
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in _list(_field(pod, "status", "resourceClaimStatuses"))
            if isinstance(s.get("name"), str)
        }
        for reference in _list(_field(pod, "spec", "resourceClaims")):
            claims += 1
            claim = generated.get(reference.get("name")) or reference.get("resourceClaimName")
            if not isinstance(claim, str):
                unallocated.append(f"{name}: claim {_shown(reference.get('name'))} not created yet")
            elif allocated.get(claim):
                allocated_count += 1
            else:
                unallocated.append(
                    f"{name}: claim {_shown(claim)} " + ("not allocated" if claim in allocated else "missing")
                )
    return ReplicaPods(len(pods), ready, claims, allocated_count, tuple(not_ready), tuple(unallocated))


def _shown(value: Any) -> str:
    """A name an API server sent, safe to print: as it is when printable, else escaped; at most 253 characters."""
    if not isinstance(value, str) or not value:
        return "?"
    return (value if value.isprintable() else ascii(value)[1:-1])[:253]


_ADDRESS = re.compile(r"[A-Za-z0-9._:\[\]-]{1,260}")


def gateway_address(gateway: dict | None) -> str | None:
    """The workload Gateway's first address (`status.addresses[0].value`), if it has one that is a host name or
    an IP address (with an optional port): anything else is not an address to probe."""
    addresses = _field(gateway, "status", "addresses")
    first = addresses[0] if isinstance(addresses, list) and addresses else None
    value = first.get("value") if isinstance(first, dict) else None
    return value if isinstance(value, str) and _ADDRESS.fullmatch(value) else None
