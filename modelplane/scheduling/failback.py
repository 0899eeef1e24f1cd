"""Failback (`placement.failback: WhenRoom`): kept replicas move back to a more preferred tier.

After every deployment has filled, each deployment with preference tiers and `failback: WhenRoom`
moves at most `maxMovesPerPlan` of its kept replicas, from the last tier first (then the highest
index, then cluster name), to the most preferred cluster that can take one more against the ledger
as it stands: nothing is evicted, and a missing replica never loses room to a move. The replica
that leaves keeps its capacity charged for the rest of the plan (make-before-break: Pulumi creates
the replacement, and it is ready, before the old one is deleted, as for a drain). A move only ever
goes to a strictly better tier, so replicas never flap. A cluster where this plan removes a replica (a
scale-in, a drop) takes no move until the next plan: the room it frees exists only once `pulumi up` has
deleted that replica, which it does after the replacement has rolled out, so a replacement counting on
it would wait for ever.
"""

from __future__ import annotations

from . import reasons
from .fit import Fit, Ledger, place_engines
from .names import replica_name
from .placement import PlacedReplica, RemovedReplica
from .snapshot import Cluster, Workload


def fail_back(
    workload: Workload,
    kept: list[PlacedReplica],
    placed: list[PlacedReplica],
    eligible: list[Cluster],
    tiers: dict[str, int],
    fit: Fit,
    ledger: Ledger,
    freeing: set[str],
) -> list[RemovedReplica]:
    """Move kept replicas to better tiers (appending the new ones to `placed`, dropping the old from `kept`), never
    to a cluster in `freeing` (one where this plan removes a replica)."""
    moved: list[RemovedReplica] = []
    movable = sorted(
        (r for r in kept if tiers.get(r.cluster, 0) > 0), key=lambda r: (-tiers[r.cluster], -r.index, r.cluster)
    )
    for replica in movable:
        if len(moved) >= workload.max_moves:
            break
        was = tiers[replica.cluster]
        load: dict[str, int] = {}
        for other in kept + placed:
            load[other.cluster] = load.get(other.cluster, 0) + 1
        better = sorted(
            (c for c in eligible if tiers[c.name] < was and c.name not in freeing),
            key=lambda c: (tiers[c.name], load.get(c.name, 0), c.name),
        )
        for cluster in better:
            found = place_engines(cluster, workload, fit, ledger)
            if found is None:
                continue
            engines, changed = found
            ledger.commit(cluster.name, changed)
            taken = {r.index for r in kept + placed if r.cluster == cluster.name}
            index = next(i for i in range(len(taken) + 1) if i not in taken)
            placed.append(
                PlacedReplica(
                    workload.key,
                    replica_name(workload.key.name, cluster.name, index),
                    cluster.name,
                    index,
                    tuple(engines),
                    "new",
                )
            )
            kept.remove(replica)
            moved.append(RemovedReplica(replica, reasons.failed_back(cluster.name, tiers[cluster.name], was)))
            break
    return moved
