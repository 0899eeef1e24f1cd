"""The CEL engine for DRA device selectors, with Kubernetes' semantics (pure, the bottom layer).

syntax (the parser) -> tree (the AST, macros expanded) -> checker (types, cost, feature gates) ->
interpreter (closures over an activation), with library (the functions), types, values, regex,
quantity and semver beside them; selectors compiles an expression and checks it as the API server
does. Imports nothing else from modelplane: `modelplane.devices` builds the `device` value from
the api types and evaluates selectors against it.
"""

from .errors import SelectorCompileError, SelectorEvaluationError
from .selectors import compile_selector, selector_problem, validate_selector

__all__ = [
    "SelectorCompileError",
    "SelectorEvaluationError",
    "compile_selector",
    "selector_problem",
    "validate_selector",
]
