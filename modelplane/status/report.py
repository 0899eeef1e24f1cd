"""The status report (pure): the plan, its drift and what the clusters and probes showed -> per replica
health, per cluster state, a summary and the exit code.

A deployed replica (one the last `pulumi up` placed) is `healthy` when all its serving pods are Ready,
every ResourceClaim they need is allocated and, unless probing is off, its endpoint answers the front
door's health check with 200; else `degraded`. On a cluster that could not be read it is
`unreachable` or `unreadable`, like the cluster. A replica only the plan has is `pending` (not
deployed yet: drift). Exit 0: every replica the last `pulumi up` placed is healthy and every cluster was read
(drift alone is shown, not a failure); else 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from ..scheduling import Condition, PlanResult
from .observations import ClusterReading, Probe, ReplicaPods
from .replicas import WatchedReplica

EXIT_OK, EXIT_NOT_OK = 0, 1
# A replica's health: its own, or why it could not be read (its cluster's).
ReplicaHealth = Literal["healthy", "degraded", "pending", "unreachable", "unreadable", "not read"]
FleetState = Literal[
    "healthy", "drift", "degraded"
]  # the report's, from its replicas and what `pulumi up` would change
# A replica's health, and a cluster's state (ClusterState); Final: each name has its literal type.
HEALTHY: Final = "healthy"
DEGRADED: Final = "degraded"
PENDING: Final = "pending"
UNREACHABLE: Final = "unreachable"
UNREADABLE: Final = "unreadable"
NOT_READ: Final = "not read"
RUNBOOK_GONE = 'docs/runbook.md, "A cluster that is gone for good"'
NOWHERE = (
    "no cluster could be reached from this machine: the problem is most likely on this side (its network, "
    "VPN, proxy or DNS, or expired credentials of a tunnel), not in the fleet; check that before draining "
    "anything"
)
NOWHERE_ADVICE = "no cluster answered, so check this machine's network, VPN and proxy first (see the note below)"


@dataclass(frozen=True)
class Runbook:
    """How this stack is named on the commands status suggests: `--stack demo`, or `--config FILE`."""

    modelplane_flags: str  # e.g. "--stack demo"
    pulumi_flags: str  # e.g. "--stack demo"

    def drain(self, cluster: str) -> tuple[str, str]:
        return (
            f"modelplane drain {cluster} --effect NoExecute {self.modelplane_flags}",
            f"pulumi up {self.pulumi_flags}",
        )


@dataclass(frozen=True)
class ReplicaStatus:
    replica: WatchedReplica
    health: ReplicaHealth
    pods: ReplicaPods | None  # None: its cluster was not read
    probe: Probe | None  # None: not probed (probing off, not deployed yet, or its cluster not read)
    problems: tuple[str, ...] = ()

    @property
    def claims_needed(self) -> int:
        return max(self.pods.claims if self.pods else 0, self.replica.claiming_pods)

    @property
    def pods_text(self) -> str:
        return "?" if self.pods is None else f"{self.pods.ready}/{self.replica.serving_pods}"

    @property
    def claims_text(self) -> str:
        if self.pods is None:
            return "?"
        return f"{self.pods.allocated}/{self.claims_needed}" if self.claims_needed else "-"

    @property
    def endpoint_text(self) -> str:
        if self.probe is not None:
            return self.probe.text
        return "?" if self.pods is None else "-"

    def to_dict(self) -> dict[str, Any]:
        r = self.replica
        return {
            "name": r.name,
            "cluster": r.cluster,
            "index": r.index,
            "pools": list(r.pools),
            "deployed": r.deployed,
            "health": self.health,
            "problems": list(self.problems),
            "pods": None
            if self.pods is None
            else {
                "ready": self.pods.ready,
                "expected": r.serving_pods,
                "observed": self.pods.pods,
                "notReady": list(self.pods.not_ready),
            },
            "claims": None
            if self.pods is None
            else {
                "allocated": self.pods.allocated,
                "needed": self.claims_needed,
                "unallocated": list(self.pods.unallocated),
            },
            "endpoint": None if self.probe is None else self.probe.to_dict(),
            "drift": r.drift.to_dict(),
        }


@dataclass(frozen=True)
class DeploymentStatus:
    key: str  # namespace/name
    condition: Condition | None  # None: no longer in the config
    replicas: tuple[ReplicaStatus, ...]

    @property
    def header(self) -> str:
        if self.condition is None:
            return f"{self.key}: no longer in the stack config"
        c = self.condition
        return f"{self.key}: {c.message} ({c.type}={c.status} {c.reason})"

    def to_dict(self) -> dict[str, Any]:
        namespace, _, name = self.key.partition("/")
        return {
            "namespace": namespace,
            "name": name,
            "condition": None if self.condition is None else self.condition.to_dict(),
            "replicas": [r.to_dict() for r in self.replicas],
        }


ClusterState = Literal["ok", "unreachable", "unreadable", "not read"]


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    state: ClusterState
    detail: str
    gateway_address: str | None
    replicas: int
    advice: str = ""
    commands: tuple[str, ...] = ()  # what to run: for an unreachable cluster, drain it and `pulumi up`
    caveat: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "detail": self.detail,
            "gatewayAddress": self.gateway_address,
            "replicas": self.replicas,
            "advice": self.advice,
            "commands": list(self.commands),
            "caveat": self.caveat,
        }


@dataclass(frozen=True)
class StatusReport:
    stack: str  # how the stack was named: "demo", or the stack file
    probed: bool
    deployments: tuple[DeploymentStatus, ...]
    clusters: tuple[ClusterStatus, ...]
    runbook: Runbook
    notes: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()  # what the front door does with each service's fallback tier

    def replicas(self) -> list[ReplicaStatus]:
        return [r for d in self.deployments for r in d.replicas]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((HEALTHY, DEGRADED, UNREACHABLE, UNREADABLE, NOT_READ, PENDING), 0)
        for replica in self.replicas():
            counts[replica.health] += 1
        return counts

    def drift(self) -> dict[str, int]:
        rows = [r.replica for r in self.replicas()]
        return {
            "add": sum(r.drift.change == "add" for r in rows),
            "remove": sum(r.drift.change == "remove" for r in rows),
            "move": sum(r.drift.change == "move" and not r.deployed for r in rows),
        }  # a move shows on both rows

    @property
    def degraded(self) -> bool:
        counts = self.counts()
        return bool(counts[DEGRADED] or counts[UNREACHABLE] or counts[UNREADABLE]) or any(
            c.state in (UNREACHABLE, UNREADABLE) for c in self.clusters
        )

    @property
    def drifted(self) -> bool:
        return any(self.drift().values())

    @property
    def state(self) -> FleetState:
        return "degraded" if self.degraded else "drift" if self.drifted else "healthy"

    @property
    def exit_code(self) -> int:
        return EXIT_NOT_OK if self.degraded else EXIT_OK

    def summary(self) -> str:
        counts = self.counts()
        total = sum(counts.values())
        health = ", ".join(f"{n} {state}" for state, n in counts.items() if n) or "none"
        read = [c for c in self.clusters if c.state == "ok"]
        drift = self.drift()
        changes = ", ".join(f"{n} to {what}" for what, n in drift.items() if n)
        drift_text = f"{changes} (apply with: pulumi up {self.runbook.pulumi_flags})" if changes else "none"
        return (
            f"{self.state}: {total} replica{'s' if total != 1 else ''} ({health}); clusters read: "
            f"{len(read)} of {len(self.clusters)}; drift from the last pulumi up: {drift_text}"
        )

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "Status",
            "stack": self.stack,
            "probed": self.probed,
            "summary": {
                "state": self.state,
                "exitCode": self.exit_code,
                "replicas": sum(counts.values()),
                **{_camel(k): v for k, v in counts.items()},
                "drift": self.drift(),
                "unreachableClusters": [c.name for c in self.clusters if c.state in (UNREACHABLE, UNREADABLE)],
            },
            "deployments": [d.to_dict() for d in self.deployments],
            "clusters": [c.to_dict() for c in self.clusters],
            "notes": list(self.notes),
            "fallbacks": list(self.fallbacks),
        }


def _camel(state: str) -> str:
    first, *rest = state.split()
    return first + "".join(w.capitalize() for w in rest)


def build_report(
    stack: str,
    result: PlanResult,
    watched: dict[str, list[WatchedReplica]],
    readings: dict[str, ClusterReading],
    probes: dict[tuple[str, str], Probe] | None,
    runbook: Runbook,
    notes: tuple[str, ...] = (),
    fallbacks: tuple[str, ...] = (),
) -> StatusReport:
    """`probes` is None when probing is off; a deployed replica on a read cluster without a probe had no
    gateway address to probe."""
    conditions = {str(key): plan.conditions[0] for key, plan in result.deployments.items()}
    deployments = tuple(
        DeploymentStatus(
            key, conditions.get(key), tuple(_replica_status(r, readings.get(r.cluster), probes) for r in rows)
        )
        for key, rows in watched.items()
    )
    per_cluster: dict[str, int] = {}
    for rows in watched.values():
        for r in rows:
            per_cluster[r.cluster] = per_cluster.get(r.cluster, 0) + 1
    nowhere = bool(per_cluster) and all(_unreachable(readings.get(name)) for name in per_cluster)
    clusters = tuple(
        _cluster_status(name, readings.get(name), per_cluster[name], runbook, nowhere) for name in sorted(per_cluster)
    )
    if nowhere:
        notes = (NOWHERE, *notes)
    return StatusReport(stack, probes is not None, deployments, clusters, runbook, notes, fallbacks)


def _unreachable(reading: ClusterReading | None) -> bool:
    return reading is not None and not reading.read and reading.error_kind != UNREADABLE


def _replica_status(
    replica: WatchedReplica, reading: ClusterReading | None, probes: dict[tuple[str, str], Probe] | None
) -> ReplicaStatus:
    if reading is None:
        return ReplicaStatus(replica, NOT_READ, None, None, (f"cluster {replica.cluster} was not read",))
    if not reading.read:
        kind = reading.error_kind or UNREACHABLE
        return ReplicaStatus(replica, kind, None, None, (f"cluster {replica.cluster} is {kind}: {reading.error}",))
    pods = reading.replicas.get(replica.key, ReplicaPods())
    if not replica.deployed:
        return ReplicaStatus(
            replica, PENDING, pods, None, ("not deployed yet: the plan adds it at the next pulumi up",)
        )
    problems = []
    if pods.ready < replica.serving_pods:
        waiting = f" (not ready: {', '.join(pods.not_ready[:3])})" if pods.not_ready else ""
        problems.append(f"pods {pods.ready}/{replica.serving_pods} ready{waiting}")
    status = ReplicaStatus(replica, HEALTHY, pods, None)
    if pods.allocated < status.claims_needed:
        missing = f" ({'; '.join(pods.unallocated[:3])})" if pods.unallocated else ""
        problems.append(f"claims {pods.allocated}/{status.claims_needed} allocated{missing}")
    probe = None
    if probes is not None:
        probe = probes.get(replica.key) or Probe("unreachable", detail="its cluster's workload gateway has no address")
        if probe.state != "healthy":
            problems.append(f"endpoint {probe.text}")
    return ReplicaStatus(replica, DEGRADED if problems else HEALTHY, pods, probe, tuple(problems))


def _cluster_status(
    name: str, reading: ClusterReading | None, replicas: int, runbook: Runbook, nowhere: bool = False
) -> ClusterStatus:
    if reading is None:
        return ClusterStatus(
            name, NOT_READ, "no kubeconfig: the cluster is no longer in the stack config", None, replicas
        )
    if reading.read:
        return ClusterStatus(name, "ok", "", reading.gateway_address, replicas)
    if reading.error_kind == UNREADABLE:
        return ClusterStatus(
            name,
            UNREADABLE,
            reading.error or "",
            None,
            replicas,
            advice=f"check the kubeconfig status used for {name}: its server, certificate authority and credentials",
        )
    if nowhere:  # no cluster answered: draining them all would help nothing
        return ClusterStatus(name, UNREACHABLE, reading.error or "", None, replicas, NOWHERE_ADVICE)
    return ClusterStatus(
        name,
        UNREACHABLE,
        reading.error or "",
        None,
        replicas,
        "if it stays down, move its replicas away",
        runbook.drain(name),
        f"`pulumi up` can change the fleet only while every cluster answers; if {name} is gone for "
        f"good, see {RUNBOOK_GONE}",
    )
