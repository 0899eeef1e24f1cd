"""DRA device selectors with Kubernetes' semantics (pure): the device model, CEL, quantity, semver."""
from .device import device_key, device_value
from .errors import SelectorCompileError, SelectorError, SelectorEvaluationError
from .quantity import Quantity, QuantityError
from .selectors import (CompiledSelector, SelectorCache, compile_selector, evaluate, selector_problem,
                        validate_selector)
from .semver import Semver, SemverError

__all__ = [
    "CompiledSelector", "Quantity", "QuantityError", "SelectorCache", "SelectorCompileError", "SelectorError",
    "SelectorEvaluationError", "Semver", "SemverError", "compile_selector", "device_key", "device_value", "evaluate",
    "selector_problem", "validate_selector",
]
