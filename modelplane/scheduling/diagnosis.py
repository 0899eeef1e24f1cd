"""Why is my model not on cluster X? A verdict per cluster for one deployment, against the final ledger.

Like the Kubernetes scheduler's filter statuses: each cluster gets its reasons in filter order
(selector, cache footprint, taints, pools, devices, capacity), and the first one is what the
"0/3 clusters are available: ..." summary counts.

A plan explains every short deployment (the warnings), so verdicts are memoised by what decides
them, as the scheduler memoises fits: the cluster-level filters by the deployment's selectors,
cache and tolerations; the pool-level ones by its engines (shape and names) per cluster. The
ledger is final, so a verdict computed once holds for every deployment that asks alike, and a
plan's warnings cost the distinct requests times the clusters, not the deployments times them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from . import reasons
from .result import ClusterVerdict, Explanation
from .scheduler import place_engines
from .snapshot import cache_unstageable, missing_labels, untolerated

if TYPE_CHECKING:
    from ..api import NamespacedName
    from .result import PlanResult
    from .snapshot import Cluster, Workload


class Diagnosis:
    """Explanations for one plan result, memoised (the result does not change once planned)."""

    def __init__(self, result: "PlanResult") -> None:
        self.result = result
        self.workloads = {w.key: w for w in result.workloads}
        ledger = result.ledger
        self._free = [{p.name: ledger.free.get((c.name, p.name), 0) for p in c.pools} for c in result.clusters]
        self._ids: dict[tuple, int] = {}  # what filters read -> a small number, hashed once per explain
        self._cluster_level: dict[int, list[ClusterVerdict | None]] = {}  # per cluster; None: all pass
        self._pool_level: dict[int, list[ClusterVerdict | None]] = {}  # per cluster; None: not yet asked
        self._verdicts: dict[tuple[int, int], tuple[tuple[ClusterVerdict, ...], str]] = {}
        self._pool_status: dict[tuple, reasons.Reason | int] = {}

    def explain(self, key: "NamespacedName") -> Explanation:
        plan = self.result.deployments[key]
        workload = self.workloads[key]
        asked = (self._id(_cluster_key(workload)), self._id(_engines_key(workload)))
        if asked not in self._verdicts:
            verdicts = self._verdicts_for(workload, *asked)
            available = sum(v.available for v in verdicts)
            unavailable = [v.primary for v in verdicts if not v.available and v.primary is not None]
            self._verdicts[asked] = verdicts, reasons.summarize(available, len(verdicts), unavailable)
        verdicts, summary = self._verdicts[asked]
        if hosts := plan.by_cluster():
            verdicts = tuple(replace(v, hosts=hosts[v.cluster]) if v.cluster in hosts else v for v in verdicts)
        return Explanation(key, plan, verdicts, summary)

    def _id(self, asked: tuple) -> int:
        return self._ids.setdefault(asked, len(self._ids))

    def _verdicts_for(self, workload: "Workload", cluster_id: int, engines_id: int) -> tuple[ClusterVerdict, ...]:
        clusters = self.result.clusters
        if cluster_id not in self._cluster_level:
            self._cluster_level[cluster_id] = [self._cluster_verdict(i, c, workload) for i, c in enumerate(clusters)]
        pool_level = self._pool_level.setdefault(engines_id, [None] * len(clusters))
        verdicts = []
        for i, verdict in enumerate(self._cluster_level[cluster_id]):
            if verdict is None:
                verdict = pool_level[i]
                if verdict is None:
                    found = self._pool_reasons(clusters[i], workload, engines_id)
                    verdict = pool_level[i] = ClusterVerdict(clusters[i].name, 0, not found, found, self._free[i])
            verdicts.append(verdict)
        return tuple(verdicts)

    def _cluster_verdict(self, i: int, cluster: "Cluster", workload: "Workload") -> ClusterVerdict | None:
        """The cluster-level filters: the first that fails, or None when all pass."""
        if missing := missing_labels(cluster.labels, workload.selector):
            reason = reasons.not_selected(missing)
        elif missing_labels(cluster.labels, workload.cache_selector):
            reason = reasons.outside_cache(workload.cache_selector)
        elif (unstageable := cache_unstageable(cluster, workload)) is not None:
            reason = unstageable
        elif (taint := untolerated(cluster, workload, ("NoSchedule", "NoExecute"))) is not None:
            reason = taint
        elif not cluster.pools:
            reason = reasons.no_pools()
        else:
            return None
        return ClusterVerdict(cluster.name, 0, False, (reason,), self._free[i])

    def _pool_reasons(self, cluster: "Cluster", workload: "Workload", engines_id: int) -> tuple[reasons.Reason, ...]:
        fit = self.result.fits[workload.key]
        if place_engines(cluster, workload, fit, self.result.ledger) is not None:
            return ()
        found: list[reasons.Reason] = []
        for engine in workload.engines:
            claimable = fit.claimable(cluster, engine) if len(engine.members) > 1 else None
            for pool in cluster.pools:
                status = self._status(pool, engine, engines_id, fit, claimable)
                if isinstance(status, int):
                    free = self.result.ledger.free.get((cluster.name, pool.name), 0)
                    status = reasons.insufficient_capacity(pool.name, status, max(free, 0))
                found.append(status)
        capacity = [r for r in found if r.code == "InsufficientCapacity"]
        # A pool that matches but is full explains more than pools that never match.
        return tuple(capacity + [r for r in found if r.code != "InsufficientCapacity"] if capacity else found)

    def _status(self, pool, engine, engines_id: int, fit, claimable: list[bool] | None) -> reasons.Reason | int:
        """Why the engine cannot go on this pool, capacity aside, or the nodes it would need there.

        The same for every pool of this class and name (and, for a gang, which members the rest of
        the cluster can give a DRA device), so asked of the matcher once.
        """
        key = (engines_id, engine.index, pool.class_name, pool.name, claimable and tuple(claimable))
        if key not in self._pool_status:
            resolved = fit.engine_on(pool, engine)
            if None in resolved:
                member = engine.members[resolved.index(None)]
                status = self.result.matcher.why_not(pool, member, engine.name) or \
                    reasons.selector_mismatch(engine.name, member.index, "?", "", pool.name)
            elif claimable is None and not resolved[0] or \
                    claimable is not None and (not any(claimable) or any(c and not r for c, r in zip(claimable, resolved))):
                status = reasons.only_synthetic(engine.name, pool.name)
            else:
                status = sum(m.pods * engine.copies for m, r in zip(engine.members, resolved) if r)
            self._pool_status[key] = status
        return self._pool_status[key]

def _cluster_key(workload: "Workload") -> tuple:
    """What the cluster-level filters read (the cache's namespace too: its reason names it)."""
    cache = f"{workload.key.namespace}/{workload.cache}" if workload.cache is not None else None
    return (tuple(sorted(workload.selector.items())), tuple(sorted(workload.cache_selector.items())), cache,
            workload.tolerations)


def _engines_key(workload: "Workload") -> tuple:
    """What the pool-level filters read: the fit (by signature) and the engine names reasons carry."""
    return workload.signature, tuple(e.name for e in workload.engines)
