"""Where a deployment's engines fit on a cluster: the pool filters, memoised, and the node ledger.

`Fit` answers "which pools could each engine use here, capacity aside" once per deployment shape
and cluster shape (a fleet has few of each); `place_engines` adds the capacity filter against the
ledger. The fill, the explanation of "one more replica" and a kept replica's pinned pools all go
through the same `filters` functions.
"""
from __future__ import annotations

from dataclasses import dataclass

from .filters import engine_cost, engine_rejection, has_room
from .matching import Matcher
from .placement import EngineAssignment, MemberAssignment
from .snapshot import Cluster, Engine, Pool, Workload


@dataclass
class Ledger:
    """Free nodes per (cluster, pool): declared nodeCount minus what replicas occupy."""

    capacity: dict[tuple[str, str], int]
    free: dict[tuple[str, str], int]
    pools: dict[str, tuple[str, ...]]
    most_free: dict[str, int]  # per cluster: free nodes of its emptiest pool, a quick "is it full?"

    @classmethod
    def of(cls, clusters: tuple[Cluster, ...]) -> "Ledger":
        capacity = {(c.name, p.name): p.nodes for c in clusters for p in c.pools}
        pools = {c.name: tuple(p.name for p in c.pools) for c in clusters}
        most_free = {c.name: max((p.nodes for p in c.pools), default=0) for c in clusters}
        return cls(capacity, dict(capacity), pools, most_free)

    def charge(self, cluster: str, pool: str, nodes: int) -> None:
        if (cluster, pool) in self.free:
            self.free[(cluster, pool)] -= nodes
            self.most_free[cluster] = max(self.free[(cluster, p)] for p in self.pools[cluster])


class Fit:
    """Per deployment shape, ignoring capacity: how each member resolves on each device class, and
    per cluster shape (its pools' classes) the pools each engine could use, with their node cost."""

    def __init__(self, workload: Workload, matcher: Matcher) -> None:
        self.workload, self.matcher = workload, matcher
        # No engine fits on fewer free nodes than its cheapest claiming member needs.
        self.least_nodes = max((min((m.pods * e.copies for m in e.members if m.requests), default=0)
                                for e in workload.engines), default=0)
        self._by_class: dict[str, tuple] = {}
        self._by_shape: dict[tuple[str, ...], tuple | None] = {}
        self._by_cluster: dict[str, tuple | None] = {}

    def engine_on(self, pool: Pool, engine: Engine) -> tuple:
        """Per member: its resolved DRA requests on this pool (empty: only Synthetic), or None."""
        key = pool.class_name
        if key not in self._by_class:
            self._by_class[key] = tuple(tuple(self.matcher.fits(pool, m) for m in e.members)
                                        for e in self.workload.engines)
        return self._by_class[key][engine.index]

    def claimable(self, cluster: Cluster, engine: Engine) -> tuple[bool, ...]:
        """Per member: does some pool of the cluster give it at least one DRA device (capacity ignored)?"""
        per_pool = [self.engine_on(p, engine) for p in cluster.pools]
        return tuple(any(bool(r[i]) for r in per_pool) for i in range(len(engine.members)))

    def options(self, cluster: Cluster) -> tuple | None:
        """Per engine, the (pool, resolved, cost) it may use, in pool order; None if an engine has none."""
        if cluster.name in self._by_cluster:
            return self._by_cluster[cluster.name]
        shape = tuple(p.class_name for p in cluster.pools)
        if shape not in self._by_shape:
            self._by_shape[shape] = self._options(cluster)
        found = self._by_shape[shape]
        # Shapes are shared across clusters; pool names are not.
        options = None if found is None else tuple(
            tuple((cluster.pools[i], resolved, cost) for i, resolved, cost in engine) for engine in found)
        self._by_cluster[cluster.name] = options
        return options

    def _options(self, cluster: Cluster) -> tuple | None:
        per_engine = []
        for engine in self.workload.engines:
            per_pool = [self.engine_on(pool, engine) for pool in cluster.pools]
            # One member: it claims on a pool iff it resolves to a DRA device there (the filter's
            # answer without the cluster-wide scan).
            claimable = None if len(engine.members) == 1 else self.claimable(cluster, engine)
            options = tuple((i, resolved, engine_cost(engine, resolved)) for i, resolved in enumerate(per_pool)
                            if engine_rejection(resolved, claimable or (bool(resolved[0]),)) is None)
            if not options:
                return None
            per_engine.append(options)
        return tuple(per_engine)


def place_engines(cluster: Cluster, workload: Workload, fit: Fit, ledger: Ledger) -> list[EngineAssignment] | None:
    """§4.4: every engine on one pool, in declared order, against a trial copy of the ledger."""
    if ledger.most_free.get(cluster.name, 0) < fit.least_nodes:
        return None
    options = fit.options(cluster)
    if options is None:
        return None
    trial: dict[str, int] = {}
    placed = []
    for engine, choices in zip(workload.engines, options):
        for pool, resolved, cost in choices:
            free = trial.get(pool.name)
            if free is None:
                free = ledger.free.get((cluster.name, pool.name), 0)
            if has_room(free, cost):
                trial[pool.name] = free - cost
                placed.append(assignment(engine, pool.name, resolved))
                break
        else:
            return None
    return placed


def assignment(engine: Engine, pool: str, resolved: tuple) -> EngineAssignment:
    return EngineAssignment(engine.name, engine.copies, engine.phase, tuple(
        MemberAssignment(m.role, pool, m.pods, tuple(r)) for m, r in zip(engine.members, resolved)))
