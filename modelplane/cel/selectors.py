"""Device selector expressions: compile once per process, and the API server's checks for config.

The environment is Kubernetes 1.34 with its default feature gates, for the API server and the
scheduler alike: what an alpha gate adds (`device.allowMultipleAllocations`, `includes()`) is a
compile error naming the gate (checker.GATED_FIELDS, checker.GATED_FUNCTIONS). Only
`compile_selector` (and `modelplane.devices.evaluate`) take `gates`, for Kubernetes' own gate-on
test cases; nothing that reads config passes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from . import checker, tree
from .checker import NO_GATES
from .errors import CelRuntimeError, SelectorCompileError, SelectorEvaluationError
from .interpreter import BUDGET, Budget, CostLimitExceeded, DeviceValue, compile_node
from .syntax import cel_syntax_problem
from .values import type_name

MAX_EXPRESSION_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
MAX_ESTIMATED_COST = 1_000_000  # CELSelectorExpressionMaxCost


@dataclass(frozen=True)
class CompiledSelector:
    expression: str
    estimated_cost: int
    program: Callable[[dict], object] = field(repr=False, compare=False)
    functions: frozenset[str] = frozenset()

    def matches(self, device: DeviceValue) -> bool:
        """True or False; SelectorEvaluationError on a runtime error or a non-bool result."""
        try:
            result = self.program({"device": device, BUDGET: Budget()})
        except CelRuntimeError as error:
            raise SelectorEvaluationError(f"CEL runtime error: {error}") from None
        except CostLimitExceeded as error:
            raise SelectorEvaluationError(f"CEL runtime error: {error}") from None
        except RecursionError:
            raise SelectorEvaluationError("CEL runtime error: expression nests too deeply") from None
        if type(result) is not bool:
            raise SelectorEvaluationError(f"CEL result of type {type_name(result)} could not be converted to bool")
        return result


@lru_cache(maxsize=4096)
def compile_selector(expression: str, gates: frozenset[str] = NO_GATES) -> CompiledSelector:
    """Parse and type-check once per process (like the scheduler's compile cache: no cost limit).

    `gates`: alpha feature gates to treat as on; none (Kubernetes' defaults) unless a test asks.
    """
    try:  # parse_cel bounds the nesting; the RecursionError guard is a second line of defence
        parsed = tree.parse(expression)
        checked = checker.check(parsed.root, gates)
        return CompiledSelector(expression, checked.cost, compile_node(parsed.root), parsed.functions)
    except RecursionError:
        raise SelectorCompileError("expression nests too deeply") from None


def validate_selector(expression: str) -> CompiledSelector:
    """What the API server checks for a new ResourceClaim: compiles (default feature gates: no
    allowMultipleAllocations, no includes()), at most 10 Ki, cost within the limit."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorCompileError(f"expression is {len(expression)} characters; the limit is {MAX_EXPRESSION_LENGTH}")
    compiled = compile_selector(expression)
    if compiled.estimated_cost > MAX_ESTIMATED_COST:
        raise SelectorCompileError(
            f"too complex: estimated cost {compiled.estimated_cost} exceeds the limit of "
            f"{MAX_ESTIMATED_COST} (nested macros over large lists?)"
        )
    return compiled


def selector_problem(expression: str) -> str | None:
    """None if the API server would accept the expression, else why not, for a config error.

    Compiled first: an expression that compiles parsed, so its syntax is only looked at again
    (a second parse) for one that did not."""
    try:
        validate_selector(expression)
    except SelectorCompileError as error:
        if (syntax := cel_syntax_problem(expression)) is not None:
            return syntax  # with the parser's position and what it expected
        return f"CEL compile error: {error}\n      {expression.strip()}"
    return None
