"""Matching a member's device requests against a pool's device kinds (spec §4.3), memoised.

Greedy in declared order, no backtracking: each request takes the first device kind with enough
free count whose selectors all hold; counts are consumed across requests. A selector that errors
on a device of the class a request resolves to disqualifies the pool: Kubernetes evaluates the
request's selectors on every device of that class and aborts allocation on the first error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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


MatchState = Literal["NoMatch", "ClaimsNothing", "Claims"]


@dataclass(frozen=True)
class Resolved:
    """A member's device requests on one pool, resolved: no match (a request finds no device, or a
    selector errors), a match that claims nothing (only Synthetic devices, or no requests), or the
    DRA requests it claims with the devices one pod takes per device kind of the pool."""

    state: MatchState
    requests: tuple[ResolvedRequest, ...] = ()  # the DRA requests (state Claims)
    demand: tuple[int, ...] = ()  # DRA devices one pod takes, per device kind of the pool (Synthetic: 0)

    @property
    def matched(self) -> bool:
        return self.state != "NoMatch"

    @property
    def claims(self) -> bool:
        return self.state == "Claims"


NO_MATCH = Resolved("NoMatch")


class Matcher:
    """Match results per (device class, member requests): a fleet has few distinct pairs.

    `resolve` is the hot path (memoised, no reasons); `why_not` explains a rejection for one pool.
    """

    def __init__(self, selectors: SelectorCache | None = None) -> None:
        self.selectors = selectors or SelectorCache()
        self._memo: dict[tuple, Resolved] = {}

    def resolve(self, pool: Pool, member: Member) -> Resolved:
        key = (pool.class_name, member.requests)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._match(pool, member, explain=False)[0]
        return found

    def why_not(self, pool: Pool, member: Member, engine: str) -> reasons.Reason:
        """Why `member` matches no device of `pool` (asked only of a member that does not match)."""
        return self._match(pool, member, engine, explain=True)[1] or reasons.selector_mismatch(
            engine, member.index, "?", "", pool.name
        )

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

    def _match(
        self, pool: Pool, member: Member, engine: str = "", *, explain: bool
    ) -> tuple[Resolved, reasons.Reason | None]:
        """The resolution, and with `explain` why it does not match (None when it does).

        `resolve` asks without `explain`: most (class, requests) pairs of a fleet with many
        deployment shapes do not match, and only the few a warning names need the reason's text."""
        remaining = [device.count for device in pool.devices]
        demand = [0] * len(pool.devices)
        resolved = []
        for request in member.requests:
            chosen = next(
                (
                    i
                    for i, device in enumerate(pool.devices)
                    if remaining[i] >= request.count and self._verdict(request, device) is True
                ),
                None,
            )
            if chosen is None:
                return NO_MATCH, self._explain(pool, member, request, engine, remaining) if explain else None
            device = pool.devices[chosen]
            if device.claim == "DRA":
                for other in pool.devices:  # Kubernetes evaluates the request on every device of its class
                    if other.claim == "DRA" and other.device_class_name == device.device_class_name:
                        expression, error = self._failing(request, other)
                        if error is not None:
                            return NO_MATCH, reasons.selector_error(
                                engine, member.index, request.name, expression, pool.name, other.name, str(error)
                            ) if explain else None
                resolved.append(
                    ResolvedRequest(request.name, device.device_class_name, request.count, request.selectors)
                )
                demand[chosen] += request.count
            remaining[chosen] -= request.count
        return Resolved("Claims" if resolved else "ClaimsNothing", tuple(resolved), tuple(demand)), None

    def _explain(
        self, pool: Pool, member: Member, request: Request, engine: str, remaining: list[int]
    ) -> reasons.Reason:
        matching = [d for d in pool.devices if self._verdict(request, d) is True]
        if matching:  # the selectors hold, but not on enough free devices of this node
            return reasons.selector_mismatch(
                engine,
                member.index,
                request.name,
                f"count {request.count} (free per node: "
                f"{', '.join(f'{d.name} {r}' for d, r in zip(pool.devices, remaining, strict=False))})",
                pool.name,
            )
        aimed = _domains(request.selectors)
        for device in pool.devices:
            expression, error = self._failing(request, device)
            if error is not None and (not aimed or device.driver in aimed):
                return reasons.selector_error(
                    engine, member.index, request.name, expression, pool.name, device.name, str(error)
                )
        failing = next(
            (e for e in request.selectors if all(self.selectors.matches(e, d.key) is not True for d in pool.devices)),
            " && ".join(request.selectors),
        )
        return reasons.selector_mismatch(engine, member.index, request.name, failing, pool.name)


_DOMAIN = re.compile(
    r"""device\.(?:attributes|capacity)\[\s*["']([^"'\]]+)["']\s*\]|device\.driver\s*==\s*["']([^"']+)["']"""
)


def _domains(selectors: tuple[str, ...]) -> set[str]:
    """The drivers a request's selectors are written for (`device.attributes["gpu.example.com"]`).

    For explanations only: a selector that errors on a device of another driver (a NIC request
    on a GPU) is not the allocation abort Kubernetes would hit, where a request's class only
    holds devices it was written for. None named: every device counts.
    """
    return {a or b for expression in selectors for a, b in _DOMAIN.findall(expression)}
