"""Where a deployment's engines fit on a cluster: the pool filters, memoised, and the node ledger.

`Fit` answers "which pools could each engine use here, capacity aside" once per deployment shape
and cluster shape (a fleet has few of each); `place_engines` adds the capacity filter against the
ledger. The fill, the explanation of "one more replica" and a kept replica's pinned pools all go
through the same `filters` functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .filters import pool_passes
from .matching import Matcher, Resolved
from .packing import Packing
from .placement import EngineAssignment, MemberAssignment
from .snapshot import Cluster, Engine, Pool, Workload


@dataclass
class Ledger:
    """Free capacity per (cluster, pool), as the packing rule counts it: declared nodes (WholeNode) or
    each node's free devices (DeviceGranular), minus what replicas occupy."""

    packing: Packing
    free: dict[tuple[str, str], Any]
    pools: dict[str, tuple[str, ...]]
    most_free: dict[str, int]  # per cluster: the free amount of its emptiest pool, a quick "is it full?"
    amounts: dict[tuple[str, str], int]  # `packing.amount` of each pool's free capacity, kept with `free`

    @classmethod
    def of(cls, clusters: tuple[Cluster, ...], packing: Packing) -> Ledger:
        free: dict[tuple[str, str], Any] = {(c.name, p.name): packing.empty(p) for c in clusters for p in c.pools}
        pools = {c.name: tuple(p.name for p in c.pools) for c in clusters}
        ledger = cls(packing, free, pools, {}, {key: packing.amount(state) for key, state in free.items()})
        for cluster in clusters:
            ledger._refresh(cluster.name)
        return ledger

    def amount(self, cluster: str, pool: str) -> int:
        """Free nodes (WholeNode) or free devices (DeviceGranular) of the pool."""
        return self.amounts.get((cluster, pool), 0)

    def take(self, cluster: str, pool: str, demand, trial: dict | None = None):
        """The pool's free capacity after `demand` (from `trial` if it holds the pool), or None: no room."""
        free = trial.get(pool) if trial else None
        if free is None:
            free = self.free.get((cluster, pool))
        return None if free is None else self.packing.take(free, demand)

    def commit(self, cluster: str, changed: dict[str, Any]) -> None:
        for pool, free in changed.items():
            self.free[(cluster, pool)] = free
            self.amounts[(cluster, pool)] = self.packing.amount(free)
        self._refresh(cluster)

    def _refresh(self, cluster: str) -> None:
        self.most_free[cluster] = max((self.amounts[(cluster, p)] for p in self.pools[cluster]), default=0)


class Fit:
    """Per deployment shape, ignoring capacity: how each member resolves on each device class, and
    per cluster shape (its pools' classes) the pools each engine could use, with what it takes there."""

    def __init__(
        self, workload: Workload, matcher: Matcher, packing: Packing, classes: dict[str, Pool] | None = None
    ) -> None:
        """`classes`: a pool of each InferenceClass in the fleet (lets `options` refuse a cluster by its classes)."""
        self.workload, self.matcher, self.packing, self.classes = workload, matcher, packing, classes
        # A quick lower bound against a cluster's emptiest pool: whole nodes, no engine fits on fewer
        # free nodes than its cheapest claiming member needs; devices, every engine claims one.
        self.least = (
            max(
                (min((m.pods * e.copies for m in e.members if m.requests), default=0) for e in workload.engines),
                default=0,
            )
            if packing.unit == "nodes"
            else min(1, len(workload.engines))
        )
        self._by_class: dict[str, tuple] = {}
        self._demand: dict[tuple[str, int], Any] = {}
        self._classes: dict[str, tuple[tuple[tuple[Resolved, ...], bool | None], ...]] = {}
        self._by_cluster: dict[str, tuple | None] = {}
        self._claimable: dict[tuple[int, frozenset[str]], tuple[bool, ...]] = {}
        self._usable_classes: tuple[frozenset[str], ...] | None = None  # per engine

    def engine_on(self, pool: Pool, engine: Engine) -> tuple[Resolved, ...]:
        """Per member: how its requests resolve on this pool."""
        key = pool.class_name
        if key not in self._by_class:
            self._by_class[key] = tuple(
                tuple(self.matcher.resolve(pool, m) for m in e.members) for e in self.workload.engines
            )
        return self._by_class[key][engine.index]

    def demand(self, pool: Pool, engine: Engine):
        """What the engine takes on the pool (nodes, or pods' device vectors); the same for every pool of its class."""
        key = (pool.class_name, engine.index)
        if key not in self._demand:
            self._demand[key] = self.packing.engine_demand(pool, engine, self.engine_on(pool, engine))
        return self._demand[key]

    def claimable(self, cluster: Cluster, engine: Engine) -> tuple[bool, ...]:
        """Per member: does some pool of the cluster give it at least one DRA device (capacity ignored)?

        It reads the pools' classes alone (`engine_on`), so it is asked once per set of classes."""
        key = (engine.index, cluster.class_names)
        found = self._claimable.get(key)
        if found is None:
            per_pool = [self.engine_on(p, engine) for p in cluster.pools]
            found = self._claimable[key] = tuple(any(r[i].claims for r in per_pool) for i in range(len(engine.members)))
        return found

    def options(self, cluster: Cluster) -> tuple | None:
        """Per engine: the (pool, resolved, cost) it may use, in pool order; None if an engine has none."""
        try:
            return self._by_cluster[cluster.name]
        except KeyError:
            options = self._by_cluster[cluster.name] = self._options(cluster) if self._may_use(cluster) else None
            return options

    def _may_use(self, cluster: Cluster) -> bool:
        """False if some engine has no pool here whose class it matches (a one-member engine: that claims
        there), so no pool passes. Most clusters a deployment cannot use are refused here, without building
        their options (with many distinct deployment shapes, that is most of the fill's work)."""
        if self._usable_classes is None:
            if self.classes is None:
                return True
            on = [(name, self._on_class(pool)) for name, pool in self.classes.items()]
            self._usable_classes = tuple(
                frozenset(
                    name
                    for name, verdicts in on
                    if (verdicts[e][1] if verdicts[e][1] is not None else all(r.matched for r in verdicts[e][0]))
                )
                for e in range(len(self.workload.engines))
            )
        names = cluster.class_names
        return all(not usable.isdisjoint(names) for usable in self._usable_classes)

    def _on_class(self, pool: Pool) -> tuple[tuple[tuple[Resolved, ...], bool | None], ...]:
        """Per engine, on the pool's class: how its members resolve and, for a one-member engine, the pool
        filters' verdict (it claims on a pool iff it resolves to a DRA device there: the same for every pool
        of the class, no cluster-wide scan); None for a gang, whose verdict depends on the rest of the cluster."""
        found = self._classes.get(pool.class_name)
        if found is None:
            per_engine = []
            for engine in self.workload.engines:
                resolved = self.engine_on(pool, engine)
                alone = pool_passes(resolved, (resolved[0].claims,)) if len(engine.members) == 1 else None
                per_engine.append((resolved, alone))
            found = self._classes[pool.class_name] = tuple(per_engine)
        return found

    def _options(self, cluster: Cluster) -> tuple | None:
        pools = cluster.pools
        on = [self._on_class(pool) for pool in pools]
        per_engine = []
        for engine in self.workload.engines:
            e = engine.index
            if len(engine.members) == 1:
                passing = [i for i, verdicts in enumerate(on) if verdicts[e][1]]
            else:  # `claimable`, from the answers at hand
                claimable = tuple(any(v[e][0][m].claims for v in on) for m in range(len(engine.members)))
                passing = [i for i, verdicts in enumerate(on) if pool_passes(verdicts[e][0], claimable)]
            if not passing:
                return None
            per_engine.append(tuple((pools[i], on[i][e][0], self.demand(pools[i], engine)) for i in passing))
        return tuple(per_engine)


def place_engines(
    cluster: Cluster, workload: Workload, fit: Fit, ledger: Ledger
) -> tuple[list[EngineAssignment], dict[str, Any]] | None:
    """§4.4: every engine on one pool, in declared order, against a trial copy of the ledger; the
    engines and each used pool's free capacity after them (for `Ledger.commit`), or None."""
    if ledger.most_free.get(cluster.name, 0) < fit.least:
        return None
    options = fit.options(cluster)
    if options is None:
        return None
    trial: dict[str, Any] = {}
    placed = []
    for engine, choices in zip(workload.engines, options, strict=False):
        for pool, resolved, demand in choices:
            after = ledger.take(cluster.name, pool.name, demand, trial)
            if after is not None:
                trial[pool.name] = after
                placed.append(assignment(engine, pool.name, resolved))
                break
        else:
            return None
    return placed, trial


def assignment(engine: Engine, pool: str, resolved: tuple[Resolved, ...]) -> EngineAssignment:
    return EngineAssignment(
        engine.name,
        engine.copies,
        engine.phase,
        tuple(
            MemberAssignment(m.role, pool, m.pods, r.requests) for m, r in zip(engine.members, resolved, strict=False)
        ),
    )
