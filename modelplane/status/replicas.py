"""Which replicas status looks at, what each should have running, and its drift (pure).

Planned against the last `pulumi up`'s placement, every replica is one of:

    retained   in the last placement and the plan: deployed, no drift
    new        in the plan only: not deployed yet; drift `add`, or `move` when it replaces a removed one
    removed    in the last placement only: still deployed until the next `pulumi up`; drift `remove`,
               or `move` when a new replica of the same deployment replaces it

A removed replica pairs with a new one of the same deployment (both in (cluster, index) order) unless
it was scaled down: a drain, a cluster gone or a pool that no longer fits moves it; a scale-down
removes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..scheduling import PlacedReplica, PlacementDocument, PlanResult, RemovedReplica
from ..scheduling.reasons import ReasonCode

Change = Literal["none", "add", "remove", "move"]
SCALED_DOWN: ReasonCode = "ScaledDown"


@dataclass(frozen=True)
class Drift:
    change: Change
    detail: str = ""  # e.g. "to gpu-us-east (replaced by mock-demo-49b71)", "scaled down"
    partner: str = ""  # the replica a move pairs this one with

    @property
    def text(self) -> str:
        return "-" if self.change == "none" else f"{self.change} {self.detail}".strip()

    def to_dict(self) -> dict:
        return {"change": self.change, "detail": self.detail, **({"partner": self.partner} if self.partner else {})}


NO_DRIFT = Drift("none")


@dataclass(frozen=True)
class WatchedReplica:
    """A replica as status checks it: where it is planned (or was placed) and what it should run."""

    namespace: str
    deployment: str
    name: str
    cluster: str
    index: int
    pools: tuple[str, ...]
    serving_pods: (
        int  # pods labelled modelplane.ai/serving=<name>: one per engine copy (a Deployment pod or an LWS leader)
    )
    claiming_pods: int  # of those, the ones that claim DRA devices
    deployed: bool  # in the last `pulumi up`'s placement
    drift: Drift = NO_DRIFT

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def serving_pods(engines: Iterable) -> tuple[int, int]:
    """(pods carrying the serving label, those of them with ResourceClaims) for a replica's engines.

    Works on planned engines and on a placement document's: each engine copy is one Deployment pod
    (Standalone) or one LeaderWorkerSet group, whose leader carries the label.
    """
    pods = claiming = 0
    for engine in engines:
        leader = next((m for m in engine.members if m.role in ("Standalone", "Leader")), engine.members[0])
        pods += engine.copies
        claiming += engine.copies if leader.device_requests else 0
    return pods, claiming


def _watched(replica: PlacedReplica, deployed: bool, drift: Drift) -> WatchedReplica:
    pods, claiming = serving_pods(replica.engines)
    return WatchedReplica(
        replica.key.namespace,
        replica.key.name,
        replica.name,
        replica.cluster,
        replica.index,
        tuple(replica.pools),
        pods,
        claiming,
        deployed,
        drift,
    )


def watched_replicas(result: PlanResult, previous: PlacementDocument) -> dict[str, list[WatchedReplica]]:
    """Per deployment (`namespace/name`, in plan order, then deployments no longer in the config): its
    planned replicas in (cluster, index) order, then the ones the plan removes."""
    deployed = {(r.namespace, r.deployment, r.cluster, r.index) for r in previous.replicas}
    out: dict[str, list[WatchedReplica]] = {}
    for key, plan in result.deployments.items():
        removed = sorted(plan.removed, key=lambda r: (r.replica.cluster, r.replica.index, r.replica.name))
        # kept: deployed and not removed (a replica that no longer fits its pool may come back at its old index)
        kept = deployed - {(key.namespace, key.name, r.replica.cluster, r.replica.index) for r in removed}
        new = [r for r in plan.replicas if (key.namespace, key.name, r.cluster, r.index) not in kept]
        movable = [r for r in removed if r.reason.code != SCALED_DOWN]
        successor_of = {
            old.replica.name: n for old, n in zip(movable, new, strict=False)
        }  # a removed replica's replacement
        predecessor_of = {n.name: old for old, n in zip(movable, new, strict=False)}
        rows = []
        for replica in plan.replicas:
            if (key.namespace, key.name, replica.cluster, replica.index) in kept:
                rows.append(_watched(replica, True, NO_DRIFT))
            elif replica.name in predecessor_of:
                old = predecessor_of[replica.name]
                rows.append(
                    _watched(
                        replica,
                        False,
                        Drift(
                            "move",
                            f"from {old.replica.cluster} ({_because(old)}; replaces {old.replica.name})",
                            old.replica.name,
                        ),
                    )
                )
            else:
                rows.append(_watched(replica, False, Drift("add")))
        for gone in removed:
            successor = successor_of.get(gone.replica.name)
            drift = (
                Drift(
                    "move", f"to {successor.cluster} ({_because(gone)}; replaced by {successor.name})", successor.name
                )
                if successor
                else Drift("remove", f"({_because(gone)})")
            )
            rows.append(_watched(gone.replica, True, drift))
        out[str(key)] = rows
    for gone in sorted(result.orphans, key=lambda r: (str(r.replica.key), r.replica.cluster, r.replica.index)):
        out.setdefault(str(gone.replica.key), []).append(
            _watched(gone.replica, True, Drift("remove", f"({_because(gone)})"))
        )
    return out


def _because(removed: RemovedReplica) -> str:
    return removed.reason.summary
