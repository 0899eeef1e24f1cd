"""Turn pydantic's validation errors into ConfigIssues: exact path, plain words, and a fix."""

from __future__ import annotations

import difflib
import functools
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .common import RuleViolation, SecretValue, Unreadable
from .errors import ConfigIssue, PathPart, format_path, shown

# Fields users reach for that the engine container cannot have: modelplane owns them.
_OWNED_BY_MODELPLANE = {
    "ports": "the engine listens on port 8000; modelplane declares the port",
    "resources": "devices are claimed through nodeSelector.devices (DRA), not container resources",
    "readinessProbe": "modelplane probes GET /health on port 8000",
    "livenessProbe": "modelplane probes GET /health on port 8000",
    "startupProbe": "modelplane probes GET /health on port 8000",
    "volumeMounts": "modelplane mounts /dev/shm and the model cache at /mnt/models",
    "volumes": "modelplane mounts /dev/shm and the model cache at /mnt/models",
    "nodeName": "placement is decided by the fleet scheduler",
    "affinity": "placement is decided by the fleet scheduler",
    "nodeSelector": "placement is decided by the fleet scheduler: put device requests in the member's "
    "nodeSelector.devices (modelplane pins the pool itself)",
    "tolerations": "put tolerations in template.spec.tolerations of the deployment (they apply to cluster taints); "
    "pods get the nvidia.com/gpu toleration automatically",
}
# Secret fields, and how to set them without writing them in clear.
_SECRET_FIELDS = {
    "kubeconfig": "set it encrypted with `pulumi config set --secret --path '<this path>' \"$(cat kubeconfig)\"`",
    "token": "set it encrypted with `pulumi config set --secret --path '<this path>' <token>`",
}
_SECRET_VALUES = {"kubeconfig": '"$(cat kubeconfig)"', "token": "<token>"}
# Under a field with one of these names (or whose name contains one of the words), a value may be a
# secret, or part of one set a level too high: no message ever shows such a value, only its kind.
_SECRET_KEYS = {"auth", "existing"}
_SECRET_WORDS = (
    "token",
    "kubeconfig",
    "password",
    "secret",
    "apikey",
    "api_key",
    "credential",
    "privatekey",
    "private_key",
)
_WORDLIKE = re.compile(r"[A-Za-z]{1,32}(?:[-_][A-Za-z]{1,32}){0,4}")  # a field name, never a token
# Reference-system fields with a different shape here.
_RENAMED = {
    "credentials": "cloud credentials come from the Pulumi provider's own config (aws:profile, gcp:project, "
    "azure-native:subscriptionId); remove this block",
    "secretRef": "put the kubeconfig itself in stack config as a secret: "
    "`pulumi config set --secret --path '<this block>.kubeconfig' \"$(cat kubeconfig)\"`",
    "authSecret": "put the token itself in stack config as a secret: "
    "`pulumi config set --secret --path '<this block>.token' hf_...`",
    "identitySecretRef": "not needed: the kubeconfig's own auth (e.g. an exec plugin) is used",
}


def is_secret_position(rel: Sequence[PathPart]) -> bool:
    """Is a value at `rel` (field names inside one object) possibly a secret, or part of one?"""
    for part in rel:
        if isinstance(part, str):
            low = part.lower()
            if low in _SECRET_KEYS or any(word in low for word in _SECRET_WORDS):
                return True
    return False


def issues_from_validation(
    error: ValidationError, prefix: Sequence[PathPart], model: type[BaseModel]
) -> list[ConfigIssue]:
    """One ConfigIssue per pydantic error. No message echoes a value from a secret position.

    (pydantic's own text, `[input_value=...]`, is never used: it prints the value in full.)
    """
    found: list[ConfigIssue] = []
    for detail in error.errors(include_url=False, include_input=True):
        if isinstance(detail.get("input"), Unreadable):
            continue  # the stack-file reader refused this value and said why
        rel = tuple(detail["loc"])
        if "[key]" in rel:  # pydantic's marker for a bad mapping key: point at the key, say so
            at = rel.index("[key]")
            rel = rel[: at - 1] + (str(rel[at - 1]),)  # a mapping key, even if YAML read it as a number
            hide = is_secret_position(rel[:-1])
            if hide and not _WORDLIKE.fullmatch(str(rel[-1])):
                rel = rel[:-1]
            found.append(ConfigIssue(tuple(prefix) + rel, f"key {_describe(detail, model, rel, tuple(prefix), hide)}"))
            continue
        loc = tuple(prefix) + rel
        context = detail.get("ctx") or {}
        violation = context.get("error")
        if isinstance(violation, RuleViolation):
            found += [ConfigIssue(loc + tuple(sub), message) for sub, message in violation.problems]
            continue
        hide = is_secret_position(rel)
        if detail["type"] == "extra_forbidden" and hide and not _WORDLIKE.fullmatch(str(rel[-1])):
            # a key under a secret field may itself be secret (a token pasted as a key): point at its parent
            found.append(
                ConfigIssue(
                    loc[:-1],
                    "has an unknown field (its name is not shown: it is under a secret "
                    f"field); known fields: {', '.join(_known_fields(model, rel[:-1]))}",
                )
            )
            continue
        found.append(ConfigIssue(loc, _describe(detail, model, rel, tuple(prefix), hide)))
    return found


def _describe(detail: ErrorDetails, model: type[BaseModel], rel: tuple, prefix: tuple = (), hide: bool = False) -> str:
    """Long: one branch per pydantic error kind, each with its own wording; read top to bottom."""
    kind, context, value = detail["type"], detail.get("ctx") or {}, detail.get("input")
    if isinstance(value, SecretValue) and kind != "value_error":
        return "is encrypted (secure:), but this field is not a secret; store it in plain text"
    target_secrets = _secret_leaves(_resolve(model, rel)) if not isinstance(value, (dict, list)) else []
    hide = hide or bool(target_secrets)  # text where an object holding a secret belongs may be that secret

    def got(v: Any) -> str:
        return _kind_word(v) + (" (not shown: it may be a secret)" if isinstance(v, str) else "") if hide else shown(v)

    if kind == "missing":
        field = rel[-1] if rel else None
        if field in _SECRET_FIELDS:
            return f"is required: {_SECRET_FIELDS[field]}"
        return "is required"
    if kind == "extra_forbidden":
        field = str(rel[-1]) if rel else "?"
        hint = _OWNED_BY_MODELPLANE.get(field) or _RENAMED.get(field)
        if hint:
            return f"unknown field {shown(field)}: {hint}"
        known = _known_fields(model, rel[:-1])
        close = difflib.get_close_matches(field, known, n=1)
        if close:
            return f"unknown field {shown(field)}; did you mean '{close[0]}'?"
        return f"unknown field {shown(field)}" + (f"; known fields: {', '.join(known)}" if known else "")
    if kind == "literal_error":
        expected = str(context.get("expected"))
        options = f"one of {expected}" if " or " in expected else expected
        return f"must be {options} (got {got(value)})"
    if kind in ("greater_than_equal", "greater_than"):
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"must be {word} {_bound(context.get('ge', context.get('gt')))} (got {got(value)})"
    if kind in ("less_than_equal", "less_than"):
        word = "at most" if kind == "less_than_equal" else "less than"
        return f"must be {word} {_bound(context.get('le', context.get('lt')))} (got {got(value)})"
    if kind == "string_too_short":
        n = context.get("min_length", 1)
        return "must not be empty" if n == 1 else f"must be at least {n} characters"
    if kind == "string_too_long":
        return f"must be at most {context.get('max_length')} characters (got {len(value) if isinstance(value, str) else '?'})"
    if kind == "too_short":
        n = context.get("min_length", 1)
        return f"must have at least {n} item{'s' if n != 1 else ''} (got {context.get('actual_length', 0)})"
    if kind == "too_long":
        n = context.get("max_length")
        actual = context.get("actual_length")
        if actual is None:  # pydantic leaves it out for mappings
            actual = len(value) if isinstance(value, (dict, list)) else "more"
        return f"must have at most {n} item{'s' if n != 1 else ''} (got {actual})"
    if kind == "string_pattern_mismatch":
        return f"{got(value)} does not match the required pattern {context.get('pattern')}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be a whole number (got {got(value)})"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false (got {got(value)})"
    if kind == "string_type":
        return f"must be a string (got {got(value)}); quote it in YAML"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        if target_secrets and isinstance(value, str):
            return _secret_one_level_too_high(prefix + rel, target_secrets)
        return f"must be a mapping of fields (got {_type_word(value, hide)})"
    if kind == "list_type":
        return f"must be a list (got {_type_word(value, hide)})"
    if kind == "value_error":
        return _capped(str(context.get("error", detail["msg"])))
    return _capped(detail["msg"])


def _secret_one_level_too_high(loc: tuple, leaves: list[tuple[str, ...]]) -> str:
    """Text where an object holding a secret belongs: most likely the secret itself, a level too high."""
    leaf = leaves[0]
    at = format_path(loc + leaf)
    value = _SECRET_VALUES.get(leaf[-1], "<value>")
    return (
        f"must be a mapping of fields, not text (the text is not shown: it may be a secret); if it is the "
        f"{leaf[-1]}, set it at {at}, encrypted: `pulumi config set --secret --path '{at}' {value}`"
    )


def _bound(value: Any) -> str:
    return shown(value) if isinstance(value, (int, float)) else str(value)


def _capped(message: str) -> str:
    """A validator's message, bounded (its values are already shown short, or hidden)."""
    return message if len(message) <= 4000 else message[:4000] + "..."


def _kind_word(value: Any) -> str:
    """What a value is, without showing it."""
    if value is None:
        return "nothing"
    return {str: "text", list: "a list", dict: "a mapping", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def _type_word(value: Any, hide: bool = False) -> str:
    if isinstance(value, str):
        return "text (not shown: it may be a secret)" if hide else f"the text {shown(value)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number" if hide else f"the number {shown(value)}"
    return shown(value) if isinstance(value, bool) and not hide else _kind_word(value)


def _secret_leaves(target: Any) -> list[tuple[str, ...]]:
    """Relative paths (field aliases) of the SecretValue fields inside a model, shallowest first."""
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        return []
    return list(_model_secret_leaves(target, 0))


@functools.cache
def _model_secret_leaves(target: type[BaseModel], depth: int) -> tuple[tuple[str, ...], ...]:
    if depth > 6:
        return ()
    direct, nested = [], []
    for name, info in target.model_fields.items():
        field = info.alias or name
        annotation = _unwrap(info.annotation)
        if annotation is SecretValue:
            direct.append((field,))
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested += [(field,) + leaf for leaf in _model_secret_leaves(annotation, depth + 1)]
    return tuple(direct + nested)


def _known_fields(model: type[BaseModel], rel: tuple) -> list[str]:
    target = _resolve(model, rel)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return [info.alias or name for name, info in target.model_fields.items()]
    return []


def _resolve(annotation: Any, rel: tuple) -> Any:
    """Follow a loc path (field aliases, list indexes, dict keys) through type annotations."""
    current = annotation
    for part in rel:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {info.alias or name: info for name, info in current.model_fields.items()}
            if part not in fields:
                return None
            current = fields[part].annotation
            continue
        origin = typing.get_origin(current)
        args = typing.get_args(current)
        if origin is list and args:
            current = args[0]
        elif origin is dict and len(args) == 2:
            current = args[1]
        else:
            return None
    return _unwrap(current)


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation
