"""Why is my model not on cluster X? A verdict per cluster for one deployment, against the final ledger.

Like the Kubernetes scheduler's filter statuses: each cluster gets its reasons in filter order
(selector, cache footprint, taints, pools, devices, capacity), and the first one is what the
"0/3 clusters are available: ..." summary counts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import reasons
from .result import ClusterVerdict, Explanation
from .scheduler import place_engines
from .snapshot import cache_unstageable, missing_labels, untolerated

if TYPE_CHECKING:
    from ..api import NamespacedName
    from .result import PlanResult


def explain(result: "PlanResult", key: "NamespacedName") -> Explanation:
    plan = result.deployments[key]
    workload = next(w for w in result.workloads if w.key == key)
    fit = result.fits[key]
    hosts = plan.by_cluster()
    verdicts = []
    for cluster in result.clusters:
        free = {p.name: result.ledger.free.get((cluster.name, p.name), 0) for p in cluster.pools}
        found = _cluster_reasons(cluster, workload, fit, result)
        verdicts.append(ClusterVerdict(cluster.name, hosts.get(cluster.name, 0), not found, tuple(found), free))
    return Explanation(key, plan, tuple(verdicts))


def _cluster_reasons(cluster, workload, fit, result) -> list[reasons.Reason]:
    if missing := missing_labels(cluster.labels, workload.selector):
        return [reasons.not_selected(missing)]
    if missing_labels(cluster.labels, workload.cache_selector):
        return [reasons.outside_cache(workload.cache_selector)]
    if (unstageable := cache_unstageable(cluster, workload)) is not None:
        return [unstageable]
    if (taint := untolerated(cluster, workload, ("NoSchedule", "NoExecute"))) is not None:
        return [taint]
    if not cluster.pools:
        return [reasons.no_pools()]
    if place_engines(cluster, workload, fit, result.ledger) is not None:
        return []
    found: list[reasons.Reason] = []
    for engine in workload.engines:
        found += _engine_reasons(cluster, workload, engine, fit, result)
    capacity = [r for r in found if r.code == "InsufficientCapacity"]
    # A pool that matches but is full explains more than pools that never match.
    return capacity + [r for r in found if r.code != "InsufficientCapacity"] if capacity else found


def _engine_reasons(cluster, workload, engine, fit, result) -> list[reasons.Reason]:
    claimable = fit.claimable(cluster, engine)
    found = []
    for pool in cluster.pools:
        resolved = fit.engine_on(pool, engine)
        misfit = next(((m, r) for m, r in zip(engine.members, resolved) if r is None), None)
        if misfit is not None:
            reason = result.matcher.why_not(pool, misfit[0], engine.name)
            found.append(reason or reasons.selector_mismatch(engine.name, misfit[0].index, "?", "", pool.name))
            continue
        if not any(claimable) or any(c and not r for c, r in zip(claimable, resolved)):
            found.append(reasons.only_synthetic(engine.name, pool.name))
            continue
        cost = sum(m.pods * engine.copies for m, r in zip(engine.members, resolved) if r)
        free = result.ledger.free.get((cluster.name, pool.name), 0)
        found.append(reasons.insufficient_capacity(pool.name, cost, max(free, 0)))
    return found
