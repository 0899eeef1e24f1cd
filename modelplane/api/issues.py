"""Turn pydantic's validation errors into ConfigIssues: exact path, plain words, and a fix."""
from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Sequence

from pydantic import BaseModel, ValidationError

from .common import RuleViolation, SecretValue
from .errors import ConfigIssue, PathPart

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


def issues_from_validation(error: ValidationError, prefix: Sequence[PathPart], model: type[BaseModel]) -> list[ConfigIssue]:
    found: list[ConfigIssue] = []
    for detail in error.errors(include_url=False):
        rel = tuple(detail["loc"])
        if "[key]" in rel:  # pydantic's marker for a bad mapping key: point at the key, say so
            at = rel.index("[key]")
            rel = rel[:at - 1] + (str(rel[at - 1]),)  # a mapping key, even if YAML read it as a number
            found.append(ConfigIssue(tuple(prefix) + rel, f"key {_describe(detail, model, rel)}"))
            continue
        loc = tuple(prefix) + rel
        context = detail.get("ctx") or {}
        violation = context.get("error")
        if isinstance(violation, RuleViolation):
            found += [ConfigIssue(loc + tuple(sub), message) for sub, message in violation.problems]
            continue
        found.append(ConfigIssue(loc, _describe(detail, model, rel)))
    return found


def _describe(detail: dict[str, Any], model: type[BaseModel], rel: tuple) -> str:
    kind, context, value = detail["type"], detail.get("ctx") or {}, detail.get("input")
    if isinstance(value, SecretValue) and kind != "value_error":
        return "is encrypted (secure:), but this field is not a secret; store it in plain text"
    if kind == "missing":
        field = rel[-1] if rel else None
        if field in _SECRET_FIELDS:
            return f"is required: {_SECRET_FIELDS[field]}"
        return "is required"
    if kind == "extra_forbidden":
        field = str(rel[-1]) if rel else "?"
        hint = _OWNED_BY_MODELPLANE.get(field) or _RENAMED.get(field)
        if hint:
            return f"unknown field '{field}': {hint}"
        known = _known_fields(model, rel[:-1])
        close = difflib.get_close_matches(field, known, n=1)
        if close:
            return f"unknown field '{field}'; did you mean '{close[0]}'?"
        return f"unknown field '{field}'" + (f"; known fields: {', '.join(known)}" if known else "")
    if kind == "literal_error":
        expected = str(context.get("expected"))
        options = f"one of {expected}" if " or " in expected else expected
        return f"must be {options} (got {value!r})"
    if kind in ("greater_than_equal", "greater_than"):
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"must be {word} {context.get('ge', context.get('gt'))} (got {value!r})"
    if kind in ("less_than_equal", "less_than"):
        word = "at most" if kind == "less_than_equal" else "less than"
        return f"must be {word} {context.get('le', context.get('lt'))} (got {value!r})"
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
        return f"must have at most {n} item{'s' if n != 1 else ''} (got {context.get('actual_length')})"
    if kind == "string_pattern_mismatch":
        return f"{value!r} does not match the required pattern {context.get('pattern')}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be a whole number (got {_yaml(value)})"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false (got {_yaml(value)})"
    if kind == "string_type":
        return f"must be a string (got {value!r}); quote it in YAML"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of fields (got {_type_word(value)})"
    if kind == "list_type":
        return f"must be a list (got {_type_word(value)})"
    if kind == "value_error":
        return str(context.get("error", detail["msg"]))
    return detail["msg"]


def _yaml(value: Any) -> str:
    """A scalar as the user wrote it in YAML (true, not True)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return repr(value)


def _type_word(value: Any) -> str:
    if value is None:
        return "nothing"
    return {str: f"the text {value!r}", list: "a list", dict: "a mapping", bool: str(value).lower(),
            int: f"the number {value}", float: f"the number {value}"}.get(type(value), type(value).__name__)


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
