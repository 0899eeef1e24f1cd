"""How a pool's capacity is counted and a replica's pods are packed into it (`modelplane:scheduling.packing`).

Two rules, one interface (`empty`, `take`, `combine`, `amount`), so the fill, retain and explain
read capacity alike:

* `DevicePacking` (DeviceGranular, the default). Nodes of a pool are alike, so its free capacity is
  a multiset: each distinct vector of free DRA devices per node (one entry per device kind of the
  pool's class, in declared order) with how many nodes have it. A pod is a demand vector; it fits
  on a node whose free vector covers it. A gang's pods (Leader, Worker) each take a whole node,
  as in the reference, since LeaderWorkerSet places one worker per node.

  The rule: a new replica's pods, largest first, each onto the node it fits most tightly (best
  fit; ties: the smaller free vector). Best fit keeps whole nodes whole for the large pods that come
  later (8 one-GPU replicas share one 8-GPU node instead of spreading over eight), and it is what
  kube-scheduler converges to when told to pack (MostAllocated). When the nodes as packed have no
  room, the pool's pods are packed again all together from empty nodes (best fit decreasing, then
  an exact search over the distinct free vectors): the plan only claims that *some* assignment of
  pods to nodes exists, so a replica is refused only when none does (bounded: past SEARCH_BUDGET
  states the answer is "no room", conservative; on the fleets our tests enumerate it never is).

* `WholeNodePacking` (WholeNode, the reference's accounting): a pool's capacity is its free nodes,
  and every pod that claims a DRA device takes one.

Synthetic devices (a fabric) are node attributes: never consumed, never counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal, NamedTuple

from ..api.scheduling import Packing as PackingName
from .snapshot import Engine, Pool

Vector = tuple[int, ...]  # devices per device kind of a pool's class (Synthetic kinds always 0)
FreeNodes = tuple[tuple[Vector, int], ...]  # distinct free vectors, sorted, with their node counts
Pods = tuple[Vector, ...]  # demand vectors, largest first

SEARCH_BUDGET = 20_000

Unit = Literal["nodes", "devices"]  # what a pool's free capacity counts


def per_node(pool: Pool) -> Vector:
    """The DRA devices one node of the pool carries, per device kind."""
    return tuple(d.count if d.claim == "DRA" else 0 for d in pool.devices)


def kind_names(pool: Pool) -> tuple[str, ...]:
    """The name of each device kind of the pool's class, as vectors are ordered."""
    return tuple(d.name for d in pool.devices)


def size_key(vector: Vector) -> tuple[int, Vector]:
    return sum(vector), vector


def _covers(free: Vector, pod: Vector) -> bool:
    return all(f >= p for f, p in zip(free, pod, strict=False))


def _minus(free: Vector, pod: Vector) -> Vector:
    return tuple(f - p for f, p in zip(free, pod, strict=False))


def _frozen(counts: dict[Vector, int]) -> FreeNodes:
    return tuple(sorted((v, n) for v, n in counts.items() if n > 0))


def _best_fit(free: FreeNodes, pods: Pods) -> FreeNodes | None:
    counts = dict(free)
    for pod in pods:
        fitting = [v for v, n in counts.items() if n > 0 and _covers(v, pod)]
        if not fitting:
            return None
        chosen = min(fitting, key=size_key)
        counts[chosen] -= 1
        rest = _minus(chosen, pod)
        counts[rest] = counts.get(rest, 0) + 1
    return _frozen(counts)


def _search(free: FreeNodes, pods: Pods) -> FreeNodes | None:
    """Every way to put the pods on the distinct free vectors, depth first; nodes are alike, so a
    state already seen at the same pod is not explored again. None past SEARCH_BUDGET states."""
    seen: set[tuple[int, FreeNodes]] = set()

    def place(i: int, state: FreeNodes) -> FreeNodes | None:
        if i == len(pods):
            return state
        if (i, state) in seen or len(seen) > SEARCH_BUDGET:
            return None
        seen.add((i, state))
        counts = dict(state)
        for vector in sorted((v for v in counts if _covers(v, pods[i])), key=size_key):
            counts[vector] -= 1
            rest = _minus(vector, pods[i])
            counts[rest] = counts.get(rest, 0) + 1
            if (found := place(i + 1, _frozen(counts))) is not None:
                return found
            counts[rest] -= 1
            counts[vector] += 1
        return None

    return place(0, free)


def largest_block(state: PoolPods) -> int:
    """The most free devices on any one node."""
    return max((sum(v) for v, _ in state.free), default=0)


def nodes_in(state: PoolPods) -> int:
    return sum(n for _, n in state.empty)


class PoolPods(NamedTuple):
    """A pool under device-granular packing: its empty nodes, their free devices now, and every pod on them."""

    empty: FreeNodes
    free: FreeNodes
    pods: Pods  # in the order they were taken; sorted (largest first) only when the pool is packed again


class DevicePacking:
    name: ClassVar[PackingName] = "DeviceGranular"
    unit: Unit = "devices"

    @staticmethod
    def empty(pool: Pool) -> PoolPods:
        nodes = ((per_node(pool), pool.nodes),) if pool.nodes > 0 else ()
        return PoolPods(nodes, nodes, ())

    @staticmethod
    def take(state: PoolPods, pods: Pods) -> PoolPods | None:
        """Best fit for the new pods on the nodes as packed; failing that, the pool's pods packed
        again from empty nodes, all together (best fit decreasing, then the exact search)."""
        if not pods:
            return state
        after = _best_fit(state.free, pods)
        # Room for every pod, counted in devices: the free devices are the empty nodes' less the pods' already
        # there, so this is "all the pods' devices fit in the empty nodes' devices" without summing every pod.
        if after is None and sum(map(sum, pods)) <= DevicePacking.amount(state):
            everyone = DevicePacking.combine((state.pods, pods))
            after = _best_fit(state.empty, everyone) or _search(state.empty, everyone)
        return None if after is None else PoolPods(state.empty, after, state.pods + pods)

    @staticmethod
    def combine(demands: Iterable[Pods]) -> Pods:
        return tuple(sorted((p for pods in demands for p in pods), key=size_key, reverse=True))

    @staticmethod
    def amount(state: PoolPods) -> int:
        """Free devices in the pool."""
        return sum(sum(v) * n for v, n in state.free)

    @staticmethod
    def declared(pool: Pool) -> int:
        return sum(per_node(pool)) * pool.nodes

    @staticmethod
    def engine_demand(pool: Pool, engine: Engine, resolved: tuple) -> Pods:
        """The engine's pods on the pool: per member claiming a DRA device, pods x copies demand vectors."""
        whole = per_node(pool)
        pods: list[Vector] = []
        for member, found in zip(engine.members, resolved, strict=False):
            if found.claims:  # a member with only Synthetic matches consumes nothing
                pods += [whole if member.role != "Standalone" else found.demand] * (member.pods * engine.copies)
        return tuple(sorted(pods, key=size_key, reverse=True))


class WholeNodePacking:
    name: ClassVar[PackingName] = "WholeNode"
    unit: Unit = "nodes"

    @staticmethod
    def empty(pool: Pool) -> int:
        return pool.nodes

    @staticmethod
    def take(free: int, nodes: int) -> int | None:
        return free - nodes if free >= nodes else None

    @staticmethod
    def combine(demands: Iterable[int]) -> int:
        return sum(demands)

    @staticmethod
    def amount(free: int) -> int:
        return free

    @staticmethod
    def declared(pool: Pool) -> int:
        return pool.nodes

    @staticmethod
    def engine_demand(pool: Pool, engine: Engine, resolved: tuple) -> int:
        """Nodes the engine occupies: pods x copies for every member that claims a DRA device."""
        return sum(m.pods * engine.copies for m, found in zip(engine.members, resolved, strict=False) if found.claims)


Packing = type[DevicePacking] | type[WholeNodePacking]  # used as classes: their methods are static


def packing_for(name: PackingName) -> Packing:
    return WholeNodePacking if name == "WholeNode" else DevicePacking
