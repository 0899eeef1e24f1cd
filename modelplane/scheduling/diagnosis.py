"""Why is my model not on cluster X? A verdict per cluster for one more replica, against the final ledger.

Like the Kubernetes scheduler's filter statuses: each cluster's reasons come from the filters in
their order (scheduling/filters.py), and the first one is what the "0/3 clusters are available:
..." summary counts. The cluster-level verdicts are the ones the fill recorded (`ClusterVerdicts`);
the pool-level ones are one evaluation of the pool filters against the final ledger.

A plan explains every short deployment (its warnings), so pool-level verdicts are memoised by what
decides them, as the fill memoises fits: per deployment shape (engines and their names) and
cluster. A plan's warnings cost the distinct requests times the clusters, not the deployments
times them. A warning prints only the summary, which counts each cluster's first reason:
`summary` finds that one reason per cluster and builds no other (with many deployment shapes,
building every pool's reason for every cluster was most of a plan's warnings).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from ..api import NamespacedName
from . import reasons
from .filters import ClusterVerdicts, capacity_reason, pool_failure, pool_passes
from .fit import Fit, Ledger, place_engines
from .placement import DeploymentPlan
from .result import ClusterVerdict, Explanation, ExplanationSource
from .snapshot import Cluster, Engine, Pool, Workload


class Explanations(ExplanationSource):
    """Every deployment's explanation, computed on first read and kept (the plan does not change)."""

    def __init__(
        self,
        plans: Mapping[NamespacedName, DeploymentPlan],
        workloads: tuple[Workload, ...],
        fits: Mapping[NamespacedName, Fit],
        ledger: Ledger,
        verdicts: ClusterVerdicts,
    ) -> None:
        self._plans, self._fits, self._ledger, self._cluster_verdicts = plans, fits, ledger, verdicts
        self._workloads = {w.key: w for w in workloads}
        self._clusters = verdicts.clusters
        self._free = [{p.name: ledger.amount(c.name, p.name) for p in c.pools} for c in self._clusters]
        self._ids: dict[tuple, int] = {}  # a deployment shape -> a small number, hashed once per deployment
        self._cluster_level: dict[int, list[ClusterVerdict | None]] = {}  # per cluster; None: all pass
        self._pool_level: dict[int, list[ClusterVerdict | None]] = {}  # per cluster; None: not asked yet
        self._asked: dict[tuple[int, int], tuple[tuple[ClusterVerdict, ...], str]] = {}
        self._pool_reason: dict[tuple, reasons.Reason | None] = {}
        # The capacity filter's reason per (cluster, pool, demand): the final ledger does not change, and
        # with many deployment shapes the same few demands are asked of every full pool again and again.
        self._capacity: dict[tuple, reasons.Reason] = {}
        self._explained: dict[NamespacedName, Explanation] = {}
        self._summaries: dict[tuple[int, int], str] = {}  # as `_asked`, for a summary alone
        self._passes: dict[tuple, bool] = {}  # do the pool filters pass (`_pool_reason` is None)?

    def __getitem__(self, key: NamespacedName) -> Explanation:
        if key not in self._explained:
            self._explained[key] = self._explain(key)
        return self._explained[key]

    def __iter__(self) -> Iterator[NamespacedName]:
        return iter(self._plans)

    def __len__(self) -> int:
        return len(self._plans)

    def summary(self, key: NamespacedName) -> str:
        """`self[key].summary`, from each cluster's first reason only (`_first_reason`)."""
        if key in self._explained:
            return self._explained[key].summary
        workload = self._workloads[key]
        asked = self._question(workload)
        if asked in self._asked:
            return self._asked[asked][1]
        if asked not in self._summaries:
            self._summaries[asked] = self._summary(workload, asked[1])
        return self._summaries[asked]

    def _question(self, workload: Workload) -> tuple[int, int]:
        """What a deployment's verdicts depend on: its cluster-level verdicts and its engines' shape."""
        # The recorded cluster verdicts are one tuple per distinct question, kept alive by the record.
        return (
            id(self._cluster_verdicts.of(workload)),
            self._id((workload.signature, tuple(e.name for e in workload.engines))),
        )

    def _explain(self, key: NamespacedName) -> Explanation:
        plan = self._plans[key]
        workload = self._workloads[key]
        asked = self._question(workload)
        if asked not in self._asked:
            verdicts = self._verdicts(workload, *asked)
            available = sum(v.available for v in verdicts)
            unavailable = [v.primary for v in verdicts if not v.available and v.primary is not None]
            self._asked[asked] = verdicts, reasons.summarize(available, len(verdicts), unavailable)
        verdicts, summary = self._asked[asked]
        if hosts := plan.by_cluster():
            verdicts = tuple(replace(v, hosts=hosts[v.cluster]) if v.cluster in hosts else v for v in verdicts)
        return Explanation(
            key, plan, verdicts, summary, self._cluster_verdicts.tiers(workload), workload.failback, workload.max_moves
        )

    def _id(self, asked: tuple) -> int:
        return self._ids.setdefault(asked, len(self._ids))

    def _verdicts(self, workload: Workload, cluster_id: int, engines_id: int) -> tuple[ClusterVerdict, ...]:
        clusters = self._clusters
        if cluster_id not in self._cluster_level:
            self._cluster_level[cluster_id] = [
                None if why is None else ClusterVerdict(c.name, 0, False, (why,), self._free[i])
                for i, (c, why) in enumerate(zip(clusters, self._cluster_verdicts.of(workload), strict=False))
            ]
        pool_level = self._pool_level.setdefault(engines_id, [None] * len(clusters))
        verdicts = []
        for i, verdict in enumerate(self._cluster_level[cluster_id]):
            if verdict is None:
                verdict = pool_level[i]
                if verdict is None:
                    found = self._one_more(clusters[i], workload, engines_id)
                    verdict = pool_level[i] = ClusterVerdict(clusters[i].name, 0, not found, found, self._free[i])
            verdicts.append(verdict)
        return tuple(verdicts)

    def _one_more(self, cluster: Cluster, workload: Workload, engines_id: int) -> tuple[reasons.Reason, ...]:
        """The pool filters for one more replica on a cluster that passes the cluster filters:
        nothing if it fits, else every pool's reason, engine by engine."""
        fit = self._fits[workload.key]
        if place_engines(cluster, workload, fit, self._ledger) is not None:
            return ()
        found: list[reasons.Reason] = []
        for engine in workload.engines:
            # One member: the pool's own answer is the cluster's (as in `Fit`), no scan of the others.
            claimable = fit.claimable(cluster, engine) if len(engine.members) > 1 else None
            for pool in cluster.pools:
                reason = self._pool_reason_of(fit, engine, pool, claimable, engines_id)
                if reason is None:  # it would fit here but for the capacity filter
                    reason = self._capacity_reason(cluster, pool, fit.demand(pool, engine))
                found.append(reason)
        capacity = [r for r in found if r.code == "InsufficientCapacity"]
        # A pool that matches but is full explains more than pools that never match.
        return tuple(capacity + [r for r in found if r.code != "InsufficientCapacity"] if capacity else found)

    def _pool_reason_of(
        self, fit: Fit, engine: Engine, pool: Pool, claimable: tuple[bool, ...] | None, engines_id: int
    ) -> reasons.Reason | None:
        """The pool filters' reason (None: they pass). The same for every pool of this class and name
        (given which members the rest of the cluster can give a DRA device): asked once."""
        key = (engines_id, engine.index, pool.class_name, pool.name, claimable)
        if key not in self._pool_reason:
            resolved = fit.engine_on(pool, engine)
            self._pool_reason[key] = pool_failure(
                pool, engine, resolved, claimable or (resolved[0].claims,), fit.matcher
            )
        return self._pool_reason[key]

    def _summary(self, workload: Workload, engines_id: int) -> str:
        """What `_verdicts` would summarize: the available clusters and each other cluster's first reason."""
        pool_level = self._pool_level.get(engines_id)
        available = 0
        unavailable: list[reasons.Reason] = []
        # A cluster the cluster filters refuse: that reason alone, as `_verdicts` makes it the verdict's.
        for i, why in enumerate(self._cluster_verdicts.of(workload)):
            if why is not None:
                unavailable.append(why)
                continue
            verdict = pool_level[i] if pool_level is not None else None  # built for an explanation already
            if verdict is not None:
                fits, first = verdict.available, verdict.primary
            else:
                fits, first = self._first_reason(self._clusters[i], workload, engines_id)
            if fits:
                available += 1
            elif first is not None:
                unavailable.append(first)
        return reasons.summarize(available, len(self._clusters), unavailable)

    def _first_reason(
        self, cluster: Cluster, workload: Workload, engines_id: int
    ) -> tuple[bool, reasons.Reason | None]:
        """`_one_more`'s verdict as (available, its first reason), building that reason alone: the first
        pool (engine by engine) the pool filters pass is full, else the first pool's own reason."""
        fit = self._fits[workload.key]
        if place_engines(cluster, workload, fit, self._ledger) is not None:
            return True, None
        first: tuple[Engine, Pool, tuple[bool, ...] | None] | None = None
        for engine in workload.engines:
            claimable = fit.claimable(cluster, engine) if len(engine.members) > 1 else None
            for pool in cluster.pools:
                # `pool_failure(...) is None`, without building the reason: it reads the pool's class alone.
                key = (engines_id, engine.index, pool.class_name, claimable)
                passes = self._passes.get(key)
                if passes is None:
                    resolved = fit.engine_on(pool, engine)
                    passes = self._passes[key] = pool_passes(resolved, claimable or (resolved[0].claims,))
                if passes:
                    return False, self._capacity_reason(cluster, pool, fit.demand(pool, engine))
                if first is None:
                    first = engine, pool, claimable
        if first is None:  # no engine or no pool: `_one_more` finds no reason, and says it fits
            return True, None
        return False, self._pool_reason_of(fit, *first, engines_id)

    def _capacity_reason(self, cluster: Cluster, pool: Pool, demand) -> reasons.Reason:
        key = (cluster.name, pool.name, demand)
        found = self._capacity.get(key)
        if found is None:
            free = self._ledger.free[(cluster.name, pool.name)]
            found = self._capacity[key] = capacity_reason(self._ledger.packing, pool, free, demand)
        return found
