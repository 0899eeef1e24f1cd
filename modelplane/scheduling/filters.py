"""The filters that decide whether a replica may run on a cluster and pool, each defined once.

As in the Kubernetes scheduler framework, an ordered list of small named filters, each passing
or returning a typed reason; the first reason is the cluster's verdict, and "0/3 clusters are
available: ..." is the aggregate of those verdicts.

    cluster level   clusterSelector -> preference tiers -> ModelCache footprint -> storage for the cache -> taints -> node pools
    pool level      devices (match, selector errors) -> Synthetic-only -> capacity   (per engine, per pool)
    kept replica    engine count -> engine known -> same roles -> one pool -> pool published, then the pool level

Keeping a replica where it is (retain), placing a new one (fill) and explaining either run these
same filters. What differs is stated once, here: `KEEP` and `PLACE` below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api.labels import missing_labels
from . import reasons
from .document import DocEngine, DocReplica
from .matching import Matcher, Resolved
from .packing import Packing, kind_names, largest_block, nodes_in
from .snapshot import Cluster, Engine, Pool, Workload

# --- cluster level: (cluster, workload) -> None (passes) or why not ------------------------------


def cluster_selector(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    missing = missing_labels(cluster.labels, workload.selector)
    return reasons.not_selected(missing) if missing else None


def preferred(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """With placement preferences, a cluster in none of their tiers is not used."""
    return None if workload.tier_of(cluster.labels) is not None else reasons.not_preferred(len(workload.tiers))


def cache_footprint(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """The ModelCache's clusterSelector: a cached deployment runs only where its cache is staged."""
    return (
        reasons.outside_cache(workload.cache_selector)
        if missing_labels(cluster.labels, workload.cache_selector)
        else None
    )


def cache_storage(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """A cached deployment needs its cache's volume: no RWX storage, no replica (vLLM would serve its default)."""
    if workload.cache is not None and not cluster.rwx_storage:
        return reasons.no_cache_storage(f"{workload.key.namespace}/{workload.cache}")
    return None


def scheduling_taints(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """NoSchedule and NoExecute taints keep new replicas off."""
    taint = _untolerated(cluster, workload, ("NoSchedule", "NoExecute"))
    return None if taint is None else reasons.untolerated_taint(taint.key, taint.value, taint.effect)


def evicting_taints(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """Only NoExecute moves a replica that is already there."""
    taint = _untolerated(cluster, workload, ("NoExecute",))
    return None if taint is None else reasons.evicted(taint.key, taint.value)


def node_pools(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    return None if cluster.pools else reasons.no_pools()


def _untolerated(cluster: Cluster, workload: Workload, effects: tuple[str, ...]):
    """The first taint with one of `effects` that no toleration tolerates (Kubernetes' rule)."""
    for taint in cluster.taints:
        if taint.effect in effects and not any(
            t.tolerates(taint.key, taint.value, taint.effect) for t in workload.tolerations
        ):
            return taint
    return None


ClusterFilter = Callable[[Cluster, Workload], "reasons.Reason | None"]

# A cluster the deployment could use at all, taints aside (its condition says NoClusters otherwise).
CANDIDATE: tuple[ClusterFilter, ...] = (cluster_selector, preferred, cache_footprint, cache_storage)
# A new replica: everything, and any untolerated NoSchedule or NoExecute taint keeps it off.
PLACE: tuple[ClusterFilter, ...] = CANDIDATE + (scheduling_taints, node_pools)
# A replica already there stays unless NoExecute evicts it; its engines are pinned to their pools,
# so the pool filters below see only those (a missing pool is "no longer published", not "no pools").
KEEP: tuple[ClusterFilter, ...] = CANDIDATE + (evicting_taints,)


def first_failure(filters: tuple[ClusterFilter, ...], cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    for check in filters:
        if (reason := check(cluster, workload)) is not None:
            return reason
    return None


def _what_filters_read(cluster: Cluster) -> tuple:
    return (
        tuple(sorted(cluster.labels.items())),
        tuple((t.key, t.value, t.effect) for t in cluster.taints),
        cluster.rwx_storage,
        bool(cluster.pools),
    )


class ClusterVerdicts:
    """Each cluster's verdict under `PLACE` for a deployment, recorded once per distinct question.

    The fill reads which clusters pass; explanations read the same record for why the others do
    not. Keyed by what the filters read: selectors, the cache (its reason names it) and tolerations.
    """

    def __init__(self, clusters: tuple[Cluster, ...]) -> None:
        self.clusters = clusters
        # The cluster filters read a cluster's labels, taints, storage and whether it has pools (their reasons
        # never name it): clusters alike in those get one verdict, asked of the first of them.
        alike: dict[tuple, int] = {}
        self._alike = [alike.setdefault(_what_filters_read(c), len(alike)) for c in clusters]
        first: dict[int, Cluster] = {}
        for cluster, group in zip(clusters, self._alike, strict=True):
            first.setdefault(group, cluster)
        self._firsts = [first[group] for group in range(len(alike))]
        self._verdicts: dict[tuple, tuple[reasons.Reason | None, ...]] = {}
        self._eligible: dict[tuple, list[Cluster]] = {}
        self._candidates: dict[tuple, bool] = {}
        self._tiers: dict[tuple, dict[str, int]] = {}
        self._keys: dict[int, tuple[Workload, tuple]] = {}  # asked several times per deployment
        self._by_tier: dict[tuple, list[Cluster]] = {}

    def _key(self, workload: Workload) -> tuple:
        found = self._keys.get(id(workload))
        if found is not None and found[0] is workload:
            return found[1]
        cache = f"{workload.key.namespace}/{workload.cache}" if workload.cache is not None else None
        key = (
            tuple(sorted(workload.selector.items())),
            tuple(sorted(workload.cache_selector.items())),
            cache,
            workload.tolerations,
            workload.tiers,
        )
        self._keys[id(workload)] = (workload, key)  # the workload held: its id is not reused while here
        return key

    def of(self, workload: Workload) -> tuple[reasons.Reason | None, ...]:
        """Per cluster, in fleet order: why a new replica may not go there, or None."""
        key = self._key(workload)
        if key not in self._verdicts:
            verdicts = [first_failure(PLACE, c, workload) for c in self._firsts]
            self._verdicts[key] = tuple(verdicts[group] for group in self._alike)
        return self._verdicts[key]

    def eligible(self, workload: Workload) -> list[Cluster]:
        key = self._key(workload)
        if key not in self._eligible:
            self._eligible[key] = [c for c, why in zip(self.clusters, self.of(workload), strict=False) if why is None]
        return self._eligible[key]

    def by_tier(self, workload: Workload) -> list[Cluster]:
        """`eligible` in (preference tier, name) order (fleet order is name order); without preferences, `eligible`."""
        tiers = self.tiers(workload)
        if tiers is None:
            return self.eligible(workload)
        key = self._key(workload)
        if key not in self._by_tier:
            self._by_tier[key] = sorted(self.eligible(workload), key=lambda c: (tiers[c.name], c.name))
        return self._by_tier[key]

    def tiers(self, workload: Workload) -> dict[str, int] | None:
        """Each eligible cluster's preference tier (0 first), or None: the deployment has no preferences."""
        if not workload.tiers:
            return None
        key = self._key(workload)
        if key not in self._tiers:
            # A tier reads labels alone: asked of the first cluster of each alike group, as `of` asks.
            per_group = [workload.tier_of(c.labels) for c in self._firsts]
            self._tiers[key] = {
                c.name: tier
                for c, group in zip(self.clusters, self._alike, strict=True)
                if (tier := per_group[group]) is not None
            }
        return self._tiers[key]

    def any_candidate(self, workload: Workload) -> bool:
        """Does any cluster pass `CANDIDATE` (selector, cache footprint and storage; taints aside)?"""
        key = self._key(workload)
        if key not in self._candidates:
            self._candidates[key] = any(first_failure(CANDIDATE, c, workload) is None for c in self.clusters)
        return self._candidates[key]


# --- pool level: one engine on one pool -> None (passes) or why not --------------------------------
# `resolved` is the matcher's answer per member (`Resolved`). `claimable` says, per member, whether
# some pool the engine may use gives it a DRA device: any pool of the cluster for a new replica, the
# pinned pool for a kept one. The fill asks `pool_passes` (the same checks without building a
# reason, on its hot path); retain and explain ask `pool_failure` for the reason.


def device_match(
    pool: Pool, engine: Engine, resolved: tuple[Resolved, ...], claimable: tuple[bool, ...], matcher: Matcher
) -> reasons.Reason | None:
    """Every member's requests find devices on the pool (and no selector errors on its class)."""
    unmatched = next((m for m, r in zip(engine.members, resolved, strict=False) if not r.matched), None)
    return None if unmatched is None else matcher.why_not(pool, unmatched, engine.name)


def claims_a_device(
    pool: Pool, engine: Engine, resolved: tuple[Resolved, ...], claimable: tuple[bool, ...], matcher: Matcher
) -> reasons.Reason | None:
    """The engine claims some DRA device, and no claim-capable member is stranded on a Synthetic-only match."""
    return None if _claims_a_device(resolved, claimable) else reasons.only_synthetic(engine.name, pool.name)


def _claims_a_device(resolved: tuple[Resolved, ...], claimable: tuple[bool, ...]) -> bool:
    return any(claimable) and not any(c and not r.claims for c, r in zip(claimable, resolved, strict=False))


PoolFilter = Callable[[Pool, Engine, "tuple[Resolved, ...]", "tuple[bool, ...]", Matcher], "reasons.Reason | None"]

# Capacity comes last, against the ledger (`capacity_reason`).
POOL: tuple[PoolFilter, ...] = (device_match, claims_a_device)


def pool_failure(
    pool: Pool, engine: Engine, resolved: tuple[Resolved, ...], claimable: tuple[bool, ...], matcher: Matcher
) -> reasons.Reason | None:
    for check in POOL:
        if (reason := check(pool, engine, resolved, claimable, matcher)) is not None:
            return reason
    return None


def pool_passes(resolved: tuple[Resolved, ...], claimable: tuple[bool, ...]) -> bool:
    """`pool_failure(...) is None`, without building a reason."""
    return all(r.matched for r in resolved) and _claims_a_device(resolved, claimable)


def capacity_reason(packing: Packing, pool: Pool, free: Any, demand: Any) -> reasons.Reason:
    """The capacity filter's reason: nodes needed and free, or the pods' devices against the free ones."""
    if packing.unit == "nodes":
        return reasons.insufficient_capacity(pool.name, demand, max(packing.amount(free), 0))
    return reasons.insufficient_devices(
        pool.name, demand, kind_names(pool), packing.amount(free), nodes_in(free), largest_block(free)
    )


# --- kept replicas: the engines a previous replica was placed with, against the deployment now ------


def engine_count(doc: DocReplica, workload: Workload) -> reasons.Reason | None:
    if len(doc.engines) == len(workload.engines):
        return None
    return reasons.no_longer_fits(
        f"the deployment now has {len(workload.engines)} engine(s), the replica {len(doc.engines)}"
    )


def engine_known(observed: DocEngine, engine: Engine | None, cluster: Cluster) -> reasons.Reason | None:
    return (
        None if engine is not None else reasons.no_longer_fits(f"engine {observed.name} is no longer in the deployment")
    )


def same_roles(observed: DocEngine, engine: Engine | None, cluster: Cluster) -> reasons.Reason | None:
    if engine is None:  # engine_known says so
        return None
    roles = [m.role for m in engine.members]
    return (
        None
        if [m.role for m in observed.members] == roles
        else reasons.no_longer_fits(f"engine {engine.name} changed shape (members {roles})")
    )


def one_pool(observed: DocEngine, engine: Engine | None, cluster: Cluster) -> reasons.Reason | None:
    return (
        None
        if len({m.node_pool for m in observed.members}) == 1
        else reasons.no_longer_fits(f"engine {observed.name} was split across pools")
    )


def pool_published(observed: DocEngine, engine: Engine | None, cluster: Cluster) -> reasons.Reason | None:
    pool = observed.members[0].node_pool
    return None if cluster.pool(pool) is not None else reasons.no_longer_fits(f"pool {pool} is no longer published")


KeptEngineFilter = Callable[[DocEngine, "Engine | None", Cluster], "reasons.Reason | None"]

# In this order: each assumes the ones before passed.
KEPT_ENGINE: tuple[KeptEngineFilter, ...] = (engine_known, same_roles, one_pool, pool_published)


def kept_engine_failure(observed: DocEngine, engine: Engine | None, cluster: Cluster) -> reasons.Reason | None:
    for check in KEPT_ENGINE:
        if (reason := check(observed, engine, cluster)) is not None:
            return reason
    return None
