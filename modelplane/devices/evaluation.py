"""Device selectors against devices: evaluate once per (expression, device kind), memoise the answers.

`evaluate(expression, device)` is the whole contract: True or False exactly where Kubernetes'
DRA allocator would say so, SelectorCompileError where the API server would refuse the
expression, SelectorEvaluationError where allocation would abort with a CEL runtime error.
Compiling and the API server's checks are `modelplane.cel.selectors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api.inference_class import DeviceSpec
from ..cel.checker import NO_GATES
from ..cel.errors import SelectorCompileError, SelectorEvaluationError
from ..cel.selectors import compile_selector
from .device import device_key, device_value, device_value_for_key


def evaluate(expression: str, device: Mapping[str, Any] | DeviceSpec, *, gates: frozenset[str] = NO_GATES) -> bool:
    """Does `device` (an InferenceClass devices[] entry, as in config) satisfy `expression`?"""
    return compile_selector(expression, frozenset(gates)).matches(device_value(device))


class SelectorCache:
    """Answers per (expression, device kind), for the scheduler: a fleet has few distinct pairs.

    An answer is True, False, or the SelectorEvaluationError it raised; `evaluations` counts the
    real evaluations, `lookups` every question asked. Pass a `device_key()` computed once per
    device kind instead of the device itself on hot paths.
    """

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], bool | SelectorEvaluationError] = {}
        self.evaluations = 0
        self.lookups = 0

    def matches(self, expression: str, device: str | Mapping[str, Any] | DeviceSpec) -> bool | SelectorEvaluationError:
        self.lookups += 1
        key = (expression, device if isinstance(device, str) else device_key(device))
        answer = self._answers.get(key)
        if answer is None:
            self.evaluations += 1
            try:
                answer = compile_selector(expression).matches(device_value_for_key(key[1]))
            except SelectorEvaluationError as error:
                answer = error
            except SelectorCompileError as error:  # validation refuses these; if one gets here, allocation aborts
                answer = SelectorEvaluationError(f"CEL compile error: {error}")
            self._answers[key] = answer
        return answer
