"""Stack config (plain data, keyed by name) -> a validated Fleet, or a ConfigError listing every problem.

The same function serves the Pulumi program (values from `pulumi.Config`, secrets decrypted) and
the CLI (values from a stack file, secrets still encrypted), so both reject the same input.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from . import syntax
from .child_names import endpoint_name_clashes
from .common import SecretValue, Unreadable, decode_top_level
from .errors import ConfigError, ConfigIssue, PathPart, shown, text_hidden
from .fleet import Fleet, NamespacedName
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .issues import issues_from_validation
from .mirror import Mirror
from .model_cache import ModelCache
from .model_deployment import ModelDeployment, deployment_name_problem
from .model_service import ModelEndpoint, ModelService
from .references import ANY, check_references
from .scheduling import SchedulingConfig
from .served_names import served_name_problems
from .serving_stack import ServingStackConfig

Origin = Literal["stack-file", "pulumi"]

_RESERVED_NAMESPACES = {"modelplane-system", "kube-system", "kube-public", "kube-node-lease"}

# Past this many errors validation stops: a broken file of 300,000 objects would otherwise take
# minutes to list errors nobody reads. Fixing the first ones and validating again shows the rest.
MAX_ISSUES = 1000


@dataclass(frozen=True)
class KindSpec:
    """One top-level config key: its model, whether it is namespaced, and what names it takes."""

    model: type[BaseModel]
    scope: Literal["cluster", "namespaced", "single"]
    name_problem: Callable[[str], str | None] | None = None


def _namespace_problem(name: str) -> str | None:
    if name in _RESERVED_NAMESPACES:
        return f"namespace '{name}' is reserved for the system; use a team namespace such as 'ml-team'"
    return syntax.dns_label_problem(name)


KINDS: dict[str, KindSpec] = {
    "inferenceClasses": KindSpec(InferenceClass, "cluster", syntax.dns_subdomain_problem),
    "inferenceClusters": KindSpec(InferenceCluster, "cluster", syntax.dns_label_problem),
    "inferenceGateway": KindSpec(InferenceGateway, "single"),
    "modelDeployments": KindSpec(ModelDeployment, "namespaced", deployment_name_problem),
    "modelServices": KindSpec(ModelService, "namespaced", syntax.dns_label_problem),
    "modelCaches": KindSpec(ModelCache, "namespaced", syntax.dns_label_problem),
    "modelEndpoints": KindSpec(ModelEndpoint, "namespaced", syntax.dns_1035_label_problem),
    "servingStack": KindSpec(ServingStackConfig, "single"),
    "mirror": KindSpec(Mirror, "single"),
    "scheduling": KindSpec(SchedulingConfig, "single"),
}

_FLEET_FIELDS = {
    "inferenceClasses": "inference_classes",
    "inferenceClusters": "inference_clusters",
    "inferenceGateway": "inference_gateway",
    "modelDeployments": "model_deployments",
    "modelServices": "model_services",
    "modelCaches": "model_caches",
    "modelEndpoints": "model_endpoints",
    "servingStack": "serving_stack",
    "mirror": "mirror",
    "scheduling": "scheduling",
}


def load_fleet(config: Mapping[str, Any], origin: Origin = "stack-file", secret_keys: Collection[str] = ()) -> Fleet:
    """Validate `config` (keys without the `modelplane:` prefix) into a Fleet.

    Raises ConfigError with every issue found; each entity is validated on its own, so one bad
    deployment does not hide the problems of another. Each device selector gets the API server's
    checks (`modelplane.cel.selector_problem`: syntax, compilation, size, estimated cost).

    `secret_keys` are the keys Pulumi marks secret (some leaf was set with `--secret`); their values
    arrive decrypted, with no mark on which leaf was the secret, so messages about them show no text.
    """
    issues: list[ConfigIssue] = []
    parsed: dict[str, Any] = {}
    broken: set[tuple[str, Any]] = set()  # (key, name) of objects that failed on their own
    for key in config:
        if key not in KINDS:
            close = difflib.get_close_matches(key, KINDS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(KINDS)}"
            issues.append(ConfigIssue((key,), f"unknown config key{hint}"))
    for key, spec in KINDS.items():
        value = decode_top_level(config.get(key))
        if value is None:
            parsed[key] = None if spec.scope == "single" else {}
            continue
        before = len(issues)
        with text_hidden(key in secret_keys):
            parsed[key] = _parse_kind(key, spec, value, issues, broken)
        if len(issues) > before and not parsed[key]:
            broken.add((key, ANY))  # the whole key is unusable: don't report what refers into it
        if len(issues) >= MAX_ISSUES:
            issues.append(
                ConfigIssue(
                    (key,),
                    f"validation stopped after {MAX_ISSUES:,} errors; the rest of the "
                    "config was not checked: fix these and validate again",
                )
            )
            raise ConfigError(issues)
    fleet = Fleet(**{_FLEET_FIELDS[k]: v for k, v in parsed.items()})
    errors, warnings = check_references(fleet, broken)
    issues += errors + served_name_problems(fleet, broken)
    issues += endpoint_name_clashes(fleet.model_endpoints)
    if fleet.mirror is not None:
        warnings += fleet.mirror.warnings()
    if origin == "stack-file":
        warnings += _plaintext_secrets(config)
    if issues:
        raise ConfigError(issues)
    return Fleet(**{**fleet.__dict__, "warnings": tuple(sorted(set(warnings), key=ConfigIssue.sort_key))})


def _parse_kind(key: str, spec: KindSpec, value: Any, issues: list[ConfigIssue], broken: set[tuple[str, Any]]) -> Any:
    if isinstance(value, Unreadable):
        issues.append(ConfigIssue((key,), value.reason))
        return None if spec.scope == "single" else {}
    if isinstance(value, SecretValue):
        issues.append(
            ConfigIssue(
                (key,),
                "is encrypted as a whole; encrypt only the secret leaves "
                "(`pulumi config set --secret --path 'modelplane:<key>.<...>.kubeconfig'`)",
            )
        )
        return None if spec.scope == "single" else {}
    if spec.scope == "single":
        return _validate(spec.model, value, (key,), issues)
    if not isinstance(value, Mapping):
        what = "namespace to name to object" if spec.scope == "namespaced" else "name to object"
        issues.append(ConfigIssue((key,), f"must be a mapping of {what} (got {type(value).__name__})"))
        return {}
    result: dict[Any, Any] = {}
    for outer, inner in value.items():
        if len(issues) >= MAX_ISSUES:
            break
        if not _key_is_text(outer, (key,), issues):
            broken.add((key, ANY) if spec.scope == "namespaced" else (key, str(outer)))
            continue
        if spec.scope == "cluster":
            _parse_entity(spec, spec.name_problem, (key, outer), outer, inner, result, issues, broken)
            continue
        if not _name_ok(_namespace_problem, outer, (key, outer), issues):
            broken.add((key, ANY))
        elif isinstance(inner, Mapping):
            for name, body in inner.items():
                if len(issues) >= MAX_ISSUES:
                    break
                if not _key_is_text(name, (key, outer), issues):
                    broken.add((key, ANY))
                    continue
                _parse_entity(
                    spec,
                    spec.name_problem,
                    (key, outer, name),
                    NamespacedName(outer, name),
                    body,
                    result,
                    issues,
                    broken,
                )
        elif inner is not None:
            issues.append(
                ConfigIssue(
                    (key, outer),
                    f"must be a mapping of name to object (got {type(inner).__name__}); "
                    f"objects are grouped by namespace: {key}.<namespace>.<name>",
                )
            )
            broken.add((key, ANY))
    return result


def _parse_entity(
    spec: KindSpec,
    name_problem: Callable[[str], str | None] | None,
    path: tuple[str, ...],
    identity: Any,
    body: Any,
    result: dict,
    issues: list[ConfigIssue],
    broken: set[tuple[str, Any]],
) -> None:
    """Validate one object into `result[identity]`, or record it as broken."""
    if (
        _name_ok(name_problem, path[-1], path, issues)
        and (obj := _validate(spec.model, body, path, issues)) is not None
    ):
        result[identity] = obj
        return
    broken.add((path[0], identity))


def _key_is_text(name: Any, parent: tuple[PathPart, ...], issues: list[ConfigIssue]) -> bool:
    """Names are text. A number (or true, null...) as a key would be turned into text silently, and
    `123` and `"123"` would then be one namespace with one of its objects dropped."""
    if isinstance(name, str):
        return True
    text = shown(name) if isinstance(name, (bool, int, float, type(None))) else type(name).__name__
    issues.append(
        ConfigIssue(
            parent + (text,),
            f'key must be a string (got {text}); quote it in YAML ("{text}"), '
            "or the key would silently become text and may clash with another",
        )
    )
    return False


def _name_ok(problem: Callable[[str], str | None] | None, name: str, path: tuple, issues: list[ConfigIssue]) -> bool:
    message = problem(name) if problem else None
    if message:
        issues.append(ConfigIssue(path, f"invalid name {shown(name)}: {message}"))
    return message is None


def _validate(model: type[BaseModel], body: Any, path: tuple[PathPart, ...], issues: list[ConfigIssue]) -> Any:
    if body is None:
        issues.append(ConfigIssue(path, "is empty; it needs its fields (see docs/config.md)"))
        return None
    if isinstance(body, Mapping) and "spec" in body and ({"apiVersion", "kind", "metadata"} & set(body)):
        issues.append(
            ConfigIssue(
                path,
                "looks like a Kubernetes manifest; in stack config write only what is under its "
                "`spec:` here (an InferenceCluster's metadata.labels go in `labels:`, a "
                "ModelEndpoint's too)",
            )
        )
        return None
    try:
        return model.model_validate(body)
    except ValidationError as error:
        issues.extend(issues_from_validation(error, path, model))
        return None


def _plaintext_secrets(config: Mapping[str, Any]) -> list[ConfigIssue]:
    """Secret-typed fields written in plain text in a stack file (they would be committed unencrypted)."""
    found = []
    secret_fields = {"kubeconfig", "token"}
    todo: list[tuple[Any, tuple[PathPart, ...]]] = [(config, ())]
    while todo:  # iterative: config handed in by a program may nest deeper than Python recurses
        value, path = todo.pop()
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k in ("labels", "matchLabels", "annotations"):
                    continue
                if k in secret_fields and isinstance(v, str):
                    found.append(
                        ConfigIssue(
                            path + (k,),
                            "is stored in plain text in the stack file; encrypt it: "
                            "`pulumi config set --secret --path '<this path>' <value>`",
                        )
                    )
                todo.append((v, path + (k,)))
        elif isinstance(value, list):
            todo.extend((v, path + (i,)) for i, v in enumerate(value))
    return found
