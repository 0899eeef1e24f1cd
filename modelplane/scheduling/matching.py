"""Matching a member's device requests against a pool's device kinds (spec §4.3), memoised.

Greedy in declared order, no backtracking: each request takes the first device kind with enough
free count whose selectors all hold; counts are consumed across requests. A selector that errors
on a device of the class a request resolves to disqualifies the pool: Kubernetes evaluates the
request's selectors on every device of that class and aborts allocation on the first error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..cel import SelectorEvaluationError
from ..devices import SelectorCache
from . import reasons
from .snapshot import DeviceKind, Member, Pool, Request


@dataclass(frozen=True)
class ResolvedRequest:
    name: str
    device_class_name: str
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class MemberMatch:
    """`resolved` is None when the pool cannot host the member (then `reason` says why);
    an empty tuple means it matched only Synthetic devices (or asks for none)."""

    resolved: tuple[ResolvedRequest, ...] | None
    reason: reasons.Reason | None = None
    demand: tuple[int, ...] = ()  # DRA devices one pod takes, per device kind of the pool (Synthetic: 0)


class Matcher:
    """Match results per (device class, member requests): a fleet has few distinct pairs.

    `fits` is the hot path (memoised, no reasons); `why_not` explains a rejection for one pool.
    """

    def __init__(self, selectors: SelectorCache | None = None) -> None:
        self.selectors = selectors or SelectorCache()
        self._memo: dict[tuple, MemberMatch] = {}

    def fits(self, pool: Pool, member: Member) -> tuple[ResolvedRequest, ...] | None:
        """The DRA requests `member` resolves to on `pool` (empty: only Synthetic), or None."""
        return self._memoised(pool, member).resolved

    def demand(self, pool: Pool, member: Member) -> tuple[int, ...]:
        """The DRA devices one pod of `member` takes on a node of `pool`, per device kind."""
        return self._memoised(pool, member).demand

    def _memoised(self, pool: Pool, member: Member) -> MemberMatch:
        key = (pool.class_name, member.requests)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._match(pool, member)
        return found

    def why_not(self, pool: Pool, member: Member, engine: str) -> reasons.Reason | None:
        return self._match(pool, member, engine).reason

    def _verdict(self, request: Request, device: DeviceKind) -> bool | SelectorEvaluationError:
        """Selectors in order, as the allocator does: the first false or error decides."""
        for expression in request.selectors:
            answer = self.selectors.matches(expression, device.key)
            if answer is not True:
                return answer
        return True

    def _failing(self, request: Request, device: DeviceKind) -> tuple[str, SelectorEvaluationError | None]:
        for expression in request.selectors:
            answer = self.selectors.matches(expression, device.key)
            if answer is not True:
                return expression, answer if isinstance(answer, SelectorEvaluationError) else None
        return "", None

    def _match(self, pool: Pool, member: Member, engine: str = "") -> MemberMatch:
        remaining = [device.count for device in pool.devices]
        demand = [0] * len(pool.devices)
        resolved = []
        for request in member.requests:
            chosen = next((i for i, device in enumerate(pool.devices)
                           if remaining[i] >= request.count and self._verdict(request, device) is True), None)
            if chosen is None:
                return MemberMatch(None, self._explain(pool, member, request, engine, remaining))
            device = pool.devices[chosen]
            if device.claim == "DRA":
                for other in pool.devices:  # Kubernetes evaluates the request on every device of its class
                    if other.claim == "DRA" and other.device_class_name == device.device_class_name:
                        expression, error = self._failing(request, other)
                        if error is not None:
                            return MemberMatch(None, reasons.selector_error(
                                engine, member.index, request.name, expression, pool.name, other.name, str(error)))
                resolved.append(ResolvedRequest(request.name, device.device_class_name, request.count,
                                                request.selectors))
                demand[chosen] += request.count
            remaining[chosen] -= request.count
        return MemberMatch(tuple(resolved), demand=tuple(demand))

    def _explain(self, pool: Pool, member: Member, request: Request, engine: str,
                 remaining: list[int]) -> reasons.Reason:
        matching = [d for d in pool.devices if self._verdict(request, d) is True]
        if matching:  # the selectors hold, but not on enough free devices of this node
            return reasons.selector_mismatch(engine, member.index, request.name,
                                             f"count {request.count} (free per node: "
                                             f"{', '.join(f'{d.name} {r}' for d, r in zip(pool.devices, remaining))})",
                                             pool.name)
        aimed = _domains(request.selectors)
        for device in pool.devices:
            expression, error = self._failing(request, device)
            if error is not None and (not aimed or device.driver in aimed):
                return reasons.selector_error(engine, member.index, request.name, expression, pool.name, device.name,
                                              str(error))
        failing = next((e for e in request.selectors
                        if all(self.selectors.matches(e, d.key) is not True for d in pool.devices)),
                       " && ".join(request.selectors))
        return reasons.selector_mismatch(engine, member.index, request.name, failing, pool.name)


_DOMAIN = re.compile(r"""device\.(?:attributes|capacity)\[\s*["']([^"'\]]+)["']\s*\]|device\.driver\s*==\s*["']([^"']+)["']""")


def _domains(selectors: tuple[str, ...]) -> set[str]:
    """The drivers a request's selectors are written for (`device.attributes["gpu.example.com"]`).

    For explanations only: a selector that errors on a device of another driver (a NIC request
    on a GPU) is not the allocation abort Kubernetes would hit, where a request's class only
    holds devices it was written for. None named: every device counts.
    """
    return {a or b for expression in selectors for a, b in _DOMAIN.findall(expression)}
