"""The fleet scheduler (spec §4): retain, scale down, then fill, for every deployment in one pass.

    snapshot  -> clusters (published pools) and workloads (what each deployment asks for)
    retain    -> each previous replica keeps its cluster and index while still eligible and its
                 pinned pools still match; NoExecute taints evict
    scale     -> surplus removed from the most-loaded cluster, then the later name, then the highest index
    ledger    -> every retained replica of every deployment charged first, at what it occupies after
                 this plan; one that no longer fits (shape grown, pool shrunk) is placed again
    fill      -> deployments in (namespace, name) order, one replica at a time, to the eligible
                 cluster with the fewest replicas of that deployment (ties: name); engines never
                 split across pools; lowest free index per cluster
    names     -> unique per namespace: kept replicas keep theirs, new ones get the reference's name
                 when it is free

Deterministic: inputs are sorted and every tie-break ends in a name.
"""

from __future__ import annotations

import heapq

from ..api import Fleet, NamespacedName
from ..devices import SelectorCache
from . import reasons
from .diagnosis import Explanations
from .document import DocReplica, PlacementDocument
from .failback import fail_back
from .filters import KEEP, ClusterVerdicts, engine_count, first_failure, kept_engine_failure, pool_failure
from .fit import Fit, Ledger, assignment, place_engines
from .matching import Matcher, ResolvedRequest
from .names import NameBook, replica_identity
from .packing import kind_names, packing_for
from .placement import (
    DeploymentPlan,
    EngineAssignment,
    MemberAssignment,
    PlacedReplica,
    RemovedReplica,
    ReplicaStatus,
    conditions_for,
)
from .result import PlanResult
from .snapshot import Cluster, Pool, Workload, clusters_of, workloads_of


def schedule(
    fleet: Fleet, previous: PlacementDocument | None = None, selectors: SelectorCache | None = None
) -> PlanResult:
    """The plan for `fleet`, keeping what `previous` placed where the rules allow (the module docstring's steps).

    Long: the pipeline's steps in their order (snapshot, retain, scale-in, charge, fill, failback, names, plans),
    in one place, so that what each step sees of the ones before reads top to bottom.
    """
    previous = previous or PlacementDocument()
    clusters = clusters_of(fleet)
    by_name = {c.name: c for c in clusters}
    workloads = workloads_of(fleet)
    matcher = Matcher(selectors)
    packing = packing_for(fleet.packing)
    shared: dict[tuple, Fit] = {}
    classes: dict[str, Pool] = {}
    for cluster in clusters:
        for pool in cluster.pools:
            classes.setdefault(pool.class_name, pool)
    fits = {w.key: shared.setdefault(w.signature, Fit(w, matcher, packing, classes)) for w in workloads}
    ledger = Ledger.of(clusters, packing)

    # The document guarantees one entry per (namespace, deployment, cluster, index); sorting by it
    # makes everything below independent of document order.
    earlier: dict[NamespacedName, list[DocReplica]] = {}
    for replica in sorted(previous.replicas, key=_identity):
        earlier.setdefault(NamespacedName(replica.namespace, replica.deployment), []).append(replica)

    verdicts = ClusterVerdicts(clusters)
    removed: list[RemovedReplica] = []
    retained: dict[NamespacedName, list[PlacedReplica]] = {}
    for workload in workloads:
        kept, dropped = _retain(workload, earlier.get(workload.key, []), by_name, fits[workload.key])
        kept, surplus = _scale_down(kept, workload.replicas, verdicts.tiers(workload))
        retained[workload.key] = kept
        removed += dropped + surplus
    for key, replicas in sorted(earlier.items()):
        if key not in fits:
            removed += [
                RemovedReplica(
                    _doc_placed(r),
                    reasons.Reason(
                        "DeploymentRemoved", "deployment removed", f"{key} is no longer in the stack config"
                    ),
                )
                for r in replicas
            ]
    stamped = {_identity(r): r for r in previous.replicas}
    removed += _charge_retained(retained, stamped, ledger, {w.key: w for w in workloads}, fits, by_name)

    full: dict[tuple, set[str]] = {}  # per signature: clusters that could not take one; the ledger only shrinks
    placed = {
        w.key: _fill(
            w,
            retained[w.key],
            verdicts.eligible(w),
            verdicts.by_tier(w),
            fits[w.key],
            ledger,
            full.setdefault(w.signature, set()),
            verdicts.tiers(w),
        )
        for w in workloads
    }
    # Room a replica removed in this plan leaves is only free once `pulumi up` deletes it, after every create has
    # rolled out: a move never waits on it (it would wait for ever). Such clusters take moves from the next plan on.
    freeing = {gone.replica.cluster for gone in removed}
    for workload in workloads:  # after every fill: a move never takes room a missing replica could use
        tiers = verdicts.tiers(workload)  # None: the deployment has no preferences
        if workload.failback == "WhenRoom" and tiers is not None:
            removed += fail_back(
                workload,
                retained[workload.key],
                placed[workload.key],
                verdicts.eligible(workload),
                tiers,
                fits[workload.key],
                ledger,
                freeing,
            )
    _name_replicas(fleet, workloads, retained, placed, removed, stamped)

    removed_from: dict[NamespacedName, list[RemovedReplica]] = {}
    for gone in removed:
        removed_from.setdefault(gone.replica.key, []).append(gone)
    plans = {}
    for workload in workloads:
        ordered = sorted(retained[workload.key] + placed[workload.key], key=lambda r: (r.cluster, r.index))
        plans[workload.key] = DeploymentPlan(
            workload.key,
            workload.replicas,
            tuple(ordered),
            conditions_for(workload, ordered, verdicts.any_candidate(workload)),
            tuple(removed_from.get(workload.key, ())),
        )
    orphans = tuple(r for r in removed if r.replica.key not in plans)
    free = {(c, p): ledger.amount(c, p) for c, p in ledger.free}
    return PlanResult(
        plans, orphans, clusters, free, Explanations(plans, workloads, fits, ledger, verdicts), packing.name
    )


def _identity(doc: DocReplica) -> tuple[str, str, str, int]:
    return doc.namespace, doc.deployment, doc.cluster, doc.index


def _charge_retained(
    retained: dict[NamespacedName, list[PlacedReplica]],
    stamped: dict[tuple, DocReplica],
    ledger: Ledger,
    workloads: dict[NamespacedName, Workload],
    fits: dict[NamespacedName, Fit],
    clusters: dict[str, Cluster],
) -> list[RemovedReplica]:
    """Charge every kept replica what it occupies after this plan (its shape may have grown, its pool
    shrunk); one that no longer fits leaves its pool and is placed again like a missing one.

    Who stays, deterministically: replicas whose shape did not grow first (editing one deployment
    never pushes out another), then the lower index (placed earlier), then namespace, name, cluster.
    """
    unit = ledger.packing.unit

    def grew(replica: PlacedReplica) -> bool:
        before = stamped[(replica.key.namespace, replica.key.name, replica.cluster, replica.index)]
        was = before.node_cost() if unit == "nodes" else before.device_cost()
        now = replica.pool_cost() if unit == "nodes" else replica.pool_devices()
        return any(amount > was.get(pool, 0) for pool, amount in now.items())

    everyone = [r for kept in retained.values() for r in kept]
    removed = []
    for replica in sorted(everyone, key=lambda r: (grew(r), r.index, r.key.namespace, r.key.name, r.cluster)):
        demand = _demand_per_pool(replica, workloads[replica.key], fits[replica.key], clusters[replica.cluster], ledger)
        after = {pool: ledger.take(replica.cluster, pool, amount) for pool, amount in sorted(demand.items())}
        short = next((pool for pool, free in after.items() if free is None), None)
        if short is None:
            ledger.commit(replica.cluster, after)
            continue
        retained[replica.key].remove(replica)
        removed.append(
            RemovedReplica(
                replica,
                reasons.no_longer_fits(
                    f"pool {short}: the replica now needs {_needs(demand[short], unit, clusters[replica.cluster].published_pool(short))}, "
                    f"{ledger.amount(replica.cluster, short)} of the pool's "
                    f"{ledger.packing.declared(clusters[replica.cluster].published_pool(short))}{'' if unit == 'nodes' else ' devices'} "
                    "free after the replicas kept before it"
                ),
            )
        )
    return removed


def _demand_per_pool(
    replica: PlacedReplica, workload: Workload, fit: Fit, cluster: Cluster, ledger: Ledger
) -> dict[str, object]:
    """What the kept replica's engines take, per pool they are pinned to (pools with a DRA claim only)."""
    per_pool: dict[str, list] = {}
    for placed in replica.engines:
        if not any(m.device_requests for m in placed.members):
            continue
        pool = cluster.published_pool(placed.members[0].node_pool)
        per_pool.setdefault(pool.name, []).append(fit.demand(pool, workload.kept_engine(placed.name)))
    return {pool: ledger.packing.combine(demands) for pool, demands in per_pool.items()}


def _needs(demand, unit: str, pool: Pool) -> str:
    if unit == "nodes":
        return f"{demand} node{'s' if demand != 1 else ''}"
    return reasons.pods_text(demand, kind_names(pool))


def _name_replicas(
    fleet: Fleet,
    workloads,
    retained: dict[NamespacedName, list[PlacedReplica]],
    placed: dict[NamespacedName, list[PlacedReplica]],
    removed: list[RemovedReplica],
    stamped: dict[tuple, DocReplica],
) -> None:
    """Names unique per namespace: hand-made endpoints' names are taken; kept replicas keep theirs;
    a name leaving in this plan goes to no other identity; new replicas, in fill order, get the
    reference's name when free, else the first free alternative."""
    book = NameBook()
    for key in sorted(fleet.model_endpoints):
        book.reserve(key.namespace, key.name, ("endpoint", key.name))
    for workload in workloads:
        retained[workload.key] = [
            _named(
                r,
                book.assign(
                    r.key.namespace,
                    r.key.name,
                    r.cluster,
                    r.index,
                    stamped[(r.key.namespace, r.key.name, r.cluster, r.index)].name,
                ),
            )
            for r in retained[workload.key]
        ]
    for gone in removed:
        r = gone.replica
        book.reserve(r.key.namespace, r.name, replica_identity(r.key.name, r.cluster, r.index))
    for workload in workloads:
        placed[workload.key] = [
            _named(r, book.assign(r.key.namespace, r.key.name, r.cluster, r.index)) for r in placed[workload.key]
        ]


def _named(r: PlacedReplica, name: str) -> PlacedReplica:
    """`dataclasses.replace(r, name=name)`, without its per-call field introspection (thousands per plan)."""
    return PlacedReplica(r.key, name, r.cluster, r.index, r.engines, r.status)


def _doc_placed(doc: DocReplica, status: ReplicaStatus = "retained") -> PlacedReplica:
    engines = tuple(
        EngineAssignment(
            e.name,
            e.copies,
            e.phase,
            tuple(
                MemberAssignment(
                    m.role,
                    m.node_pool,
                    m.pods,
                    tuple(
                        ResolvedRequest(d.name, d.device_class_name, d.count, tuple(s.cel for s in d.selectors))
                        for d in m.device_requests
                    ),
                )
                for m in e.members
            ),
        )
        for e in doc.engines
    )
    return PlacedReplica(
        NamespacedName(doc.namespace, doc.deployment), doc.name, doc.cluster, doc.index, engines, status
    )


def _retain(
    workload: Workload, earlier: list[DocReplica], clusters: dict[str, Cluster], fit: Fit
) -> tuple[list[PlacedReplica], list[RemovedReplica]]:
    """§4.6: keep each previous replica where it is while the `KEEP` filters pass and its engines
    still fit their pinned pools (the document holds one entry per cluster and index, so two never
    claim one identity)."""
    kept: list[PlacedReplica] = []
    dropped: list[RemovedReplica] = []
    for doc in earlier:
        cluster = clusters.get(doc.cluster)
        engines = None
        why: reasons.Reason | None
        if cluster is None:
            why = reasons.Reason(
                "ClusterRemoved", "cluster removed", f"cluster {doc.cluster} is no longer in the fleet"
            )
        elif (why := first_failure(KEEP, cluster, workload)) is None:
            engines, why = _on_pinned_pools(workload, doc, cluster, fit)
        if why is not None:
            dropped.append(RemovedReplica(_doc_placed(doc), why))
            continue
        assert engines is not None  # every filter passed: _on_pinned_pools gave the engines
        kept.append(PlacedReplica(workload.key, doc.name, doc.cluster, doc.index, engines, "retained"))
    return kept, dropped


def _on_pinned_pools(workload: Workload, doc: DocReplica, cluster: Cluster, fit: Fit):
    """The kept replica's engines through the kept-engine and pool filters on the pools they are
    pinned to (capacity is charged later, for every kept replica at once), or why it must be placed again."""
    if (why := engine_count(doc, workload)) is not None:
        return None, why
    engines = []
    for observed in doc.engines:  # retained engine order follows the replica's
        engine = workload.engine(observed.name)
        if (why := kept_engine_failure(observed, engine, cluster)) is not None:
            return None, why
        pool = cluster.published_pool(observed.members[0].node_pool)  # kept_engine_failure: still published
        assert engine is not None  # kept_engine_failure: still in the deployment
        resolved = fit.engine_on(pool, engine)
        # Pinned: only this pool may give the engine's members their DRA devices.
        if (why := pool_failure(pool, engine, resolved, tuple(r.claims for r in resolved), fit.matcher)) is not None:
            return None, reasons.no_longer_fits(why.detail)
        engines.append(assignment(engine, pool.name, resolved))
    return tuple(engines), None


def _scale_down(
    kept: list[PlacedReplica], desired: int, tiers: dict[str, int] | None
) -> tuple[list[PlacedReplica], list[RemovedReplica]]:
    """§4.7: remove from the last preference tier first, then the most-loaded cluster, then the later
    cluster name, then the highest index."""
    survivors = list(kept)
    removed = []
    while len(survivors) > desired:
        load: dict[str, int] = {}
        for replica in survivors:
            load[replica.cluster] = load.get(replica.cluster, 0) + 1
        victim = max(survivors, key=lambda r: (tiers[r.cluster] if tiers else 0, load[r.cluster], r.cluster, r.index))
        survivors.remove(victim)
        removed.append(
            RemovedReplica(victim, reasons.Reason("ScaledDown", "scaled down", f"replicas reduced to {desired}"))
        )
    return survivors, removed


def _fill(
    workload: Workload,
    kept: list[PlacedReplica],
    eligible: list[Cluster],
    ordered: list[Cluster],
    fit: Fit,
    ledger: Ledger,
    full: set[str],
    tiers: dict[str, int] | None,
) -> list[PlacedReplica]:
    """§4.9: one replica at a time to the eligible cluster of the first preference tier with room,
    the one with the fewest of this deployment's replicas (ties: name)."""
    missing = workload.replicas - len(kept)
    if missing <= 0:
        return []
    load: dict[str, int] = {}
    used: dict[str, set[int]] = {}
    for replica in kept:
        load[replica.cluster] = load.get(replica.cluster, 0) + 1
        used.setdefault(replica.cluster, set()).add(replica.index)

    def rank(count: int, cluster: Cluster) -> tuple[int, int, str]:
        return tiers[cluster.name] if tiers else 0, count, cluster.name

    # Candidates in (tier, load, name) order: clusters without a replica yet lazily, in (tier, name)
    # order; the others wait in a heap. A cluster that cannot take one replica is dropped for good,
    # since the ledger only shrinks during the pass.
    queue = [(rank(load[c.name], c), c) for c in eligible if c.name in load and c.name not in full] if load else []
    heapq.heapify(queue)
    # Lazily: a deployment usually takes its few replicas from the first clusters in order. `full` only
    # grows by clusters already taken from here, so filtering it as we go reads what a copy made now would.
    fresh = (c for c in ordered if c.name not in load and c.name not in full)
    head = next(fresh, None)
    placed: list[PlacedReplica] = []
    while len(placed) < missing:
        if head is not None and (not queue or rank(0, head) < queue[0][0]):
            cluster, count, head = head, 0, next(fresh, None)
        elif queue:
            (_, count, _), cluster = heapq.heappop(queue)
        else:
            break
        name = cluster.name
        found = place_engines(cluster, workload, fit, ledger)
        if found is None:
            full.add(name)
            continue
        engines, changed = found
        ledger.commit(name, changed)
        taken = used.setdefault(name, set())
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        taken.add(index)
        placed.append(
            PlacedReplica(workload.key, "", name, index, tuple(engines), "new")
        )  # named once the whole plan is known
        heapq.heappush(queue, (rank(count + 1, cluster), cluster))
    return placed
