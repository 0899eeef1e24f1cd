"""The two ways a device selector can fail, as Kubernetes distinguishes them."""

from __future__ import annotations


class SelectorError(Exception):
    """Base class: something is wrong with a selector expression."""


class SelectorCompileError(SelectorError):
    """The expression does not compile: syntax, unknown function or field, wrong result type, too costly.

    The API server would refuse the ResourceClaim, so it is a config error.
    """


class SelectorEvaluationError(SelectorError):
    """Evaluating against a device failed (missing attribute, wrong type, non-bool result, cost limit).

    In Kubernetes this aborts allocation for the whole pod (it stays Pending and is retried), so a
    replica must never be placed where its selector errors.
    """


class CelRuntimeError(Exception):
    """An error value inside evaluation; `&&`, `||` and macros may still absorb it."""
