"""The filters that decide whether a replica may run on a cluster and pool, each defined once.

As in the Kubernetes scheduler framework, an ordered list of small named filters, each passing
or returning a typed reason; the first reason is the cluster's verdict, and "0/3 clusters are
available: ..." is the aggregate of those verdicts.

    cluster level   clusterSelector -> ModelCache footprint -> storage for the cache -> taints -> node pools
    pool level      devices (match, selector errors) -> Synthetic-only -> capacity   (per engine, per pool)

Keeping a replica where it is (retain), placing a new one (fill) and explaining either run these
same filters. What differs is stated once, here: `KEEP` and `PLACE` below.
"""
from __future__ import annotations

from typing import Callable

from ..api.labels import missing_labels
from . import reasons
from .snapshot import Cluster, Engine, Workload


# --- cluster level: (cluster, workload) -> None (passes) or why not ------------------------------

def cluster_selector(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    missing = missing_labels(cluster.labels, workload.selector)
    return reasons.not_selected(missing) if missing else None


def cache_footprint(cluster: Cluster, workload: Workload) -> reasons.Reason | None:
    """The ModelCache's clusterSelector: a cached deployment runs only where its cache is staged."""
    return reasons.outside_cache(workload.cache_selector) if missing_labels(cluster.labels, workload.cache_selector) \
        else None


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
        if taint.effect in effects and not any(t.tolerates(taint.key, taint.value, taint.effect)
                                               for t in workload.tolerations):
            return taint
    return None


ClusterFilter = Callable[[Cluster, Workload], "reasons.Reason | None"]

# A cluster the deployment could use at all, taints aside (its condition says NoClusters otherwise).
CANDIDATE: tuple[ClusterFilter, ...] = (cluster_selector, cache_footprint, cache_storage)
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


class ClusterVerdicts:
    """Each cluster's verdict under `PLACE` for a deployment, recorded once per distinct question.

    The fill reads which clusters pass; explanations read the same record for why the others do
    not. Keyed by what the filters read: selectors, the cache (its reason names it) and tolerations.
    """

    def __init__(self, clusters: tuple[Cluster, ...]) -> None:
        self.clusters = clusters
        self._verdicts: dict[tuple, tuple[reasons.Reason | None, ...]] = {}
        self._eligible: dict[tuple, list[Cluster]] = {}
        self._candidates: dict[tuple, bool] = {}

    @staticmethod
    def _key(workload: Workload) -> tuple:
        cache = f"{workload.key.namespace}/{workload.cache}" if workload.cache is not None else None
        return (tuple(sorted(workload.selector.items())), tuple(sorted(workload.cache_selector.items())), cache,
                workload.tolerations)

    def of(self, workload: Workload) -> tuple[reasons.Reason | None, ...]:
        """Per cluster, in fleet order: why a new replica may not go there, or None."""
        key = self._key(workload)
        if key not in self._verdicts:
            self._verdicts[key] = tuple(first_failure(PLACE, c, workload) for c in self.clusters)
        return self._verdicts[key]

    def eligible(self, workload: Workload) -> list[Cluster]:
        key = self._key(workload)
        if key not in self._eligible:
            self._eligible[key] = [c for c, why in zip(self.clusters, self.of(workload)) if why is None]
        return self._eligible[key]

    def any_candidate(self, workload: Workload) -> bool:
        """Does any cluster pass `CANDIDATE` (selector, cache footprint and storage; taints aside)?"""
        key = self._key(workload)
        if key not in self._candidates:
            self._candidates[key] = any(first_failure(CANDIDATE, c, workload) is None for c in self.clusters)
        return self._candidates[key]


# --- pool level: one engine on one pool --------------------------------------------------------
# `resolved` is the matcher's answer per member (its DRA requests; empty: only Synthetic devices;
# None: no match, or a selector error). `claimable` says, per member, whether some pool the engine
# may use gives it a DRA device: any pool of the cluster for a new replica, the pinned pool for a
# kept one.

DEVICES, SYNTHETIC = "devices", "synthetic"


def engine_rejection(resolved: tuple, claimable: tuple[bool, ...]) -> str | None:
    """Capacity aside, the pool filter that rejects the engine here (DEVICES, SYNTHETIC), or None."""
    if None in resolved:
        return DEVICES  # a member's requests match no device (or a selector errors): the matcher says which
    if not any(claimable) or any(c and not r for c, r in zip(claimable, resolved)):
        return SYNTHETIC  # no DRA device at all, or a claim-capable member stranded on a Synthetic-only match
    return None


def engine_cost(engine: Engine, resolved: tuple) -> int:
    """Nodes the engine occupies on a pool: pods x copies for every member that claims a DRA device."""
    return sum(m.pods * engine.copies for m, r in zip(engine.members, resolved) if r)


def has_room(free: int, cost: int) -> bool:
    """The capacity filter: declared nodes not yet occupied."""
    return free >= cost
