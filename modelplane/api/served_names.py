"""The model name each engine answers, and the one name the front door sends each ModelService's engines.

A request names a ModelService (`<namespace>/<service>` or its alias); an engine answers only the
names it serves (vLLM's `--served-model-name`, else its `--model`), and 404s the rest. So the front
door rewrites the body's `model` to the name the service's engines answer, and `validate` refuses a
service whose engines' name cannot be read from their command and args, or whose engines answer
different names (one rewrite per service cannot reach both).
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import takewhile

from . import references
from .errors import ConfigIssue, shown
from .fleet import Fleet, NamespacedName
from .model_deployment import Container, ModelDeployment

CACHE_MOUNT = "/mnt/models"  # where a ModelCache's volume is mounted in the engine container
SERVED_NAME_FLAGS = ("--served-model-name",)  # vLLM: one or more names (answers all, reports the first); SGLang: one
MODEL_FLAGS = ("--model", "--model-path")  # vLLM's --model; SGLang's --model-path (--model is its alias)
SERVING_ROLES = ("Standalone", "Leader")  # the member whose pod serves HTTP (a Worker only joins the leader)
SHELLS = ("sh", "bash", "dash", "ash", "zsh")  # `sh -c '<script>'`: the engine's command line is the script


def serving_args(container: Container, uses_cache: bool) -> list[str]:
    """The serving container's args as rendered: with a ModelCache and neither a command nor a model flag
    of the user's, the engine is pointed at the cache's mount (`--model=/mnt/models`)."""
    args = list(container.args or [])
    if uses_cache and not container.command and _flag_values(args, MODEL_FLAGS) is None:
        args.append(f"--model={CACHE_MOUNT}")
    return args


def engine_model_name(command: Sequence[str] | None, args: Sequence[str] | None) -> str | None:
    """The model name an engine started with this command and args answers, or None when it cannot be read.

    `--served-model-name X [Y ...]` -> X (the name vLLM reports); else `vllm serve X` -> X (vLLM's
    positional model wins over --model); else `--model X` / `--model-path X` -> X. The last of a repeated
    flag counts, as argparse has it. A shell's `-c` script is read as the command line it runs. A name
    with `$` is unknown: the kubelet or the shell would put something else in its place.
    """
    tokens = _command_line([*(command or []), *(args or [])])
    served = _flag_values(tokens, SERVED_NAME_FLAGS)
    if served is not None:
        return _literal(served[0] if served else None)
    positional = _vllm_serve_model(tokens)
    if positional:
        return _literal(positional)
    model = _flag_values(tokens, MODEL_FLAGS)
    return _literal(model[0] if model else None)


def _literal(name: str | None) -> str | None:
    return name if name and "$" not in name else None


def _command_line(tokens: list[str]) -> list[str]:
    if not tokens or tokens[0].rsplit("/", 1)[-1] not in SHELLS:
        return tokens
    for i, token in enumerate(tokens[1:-1], 1):
        if token.startswith("-") and not token.startswith("--") and "c" in token:
            try:
                return shlex.split(tokens[i + 1], comments=True)
            except ValueError:  # unbalanced quotes: the shell would refuse it too
                return []
    return tokens


def _flag_values(tokens: Sequence[str], flags: Iterable[str]) -> list[str] | None:
    """The values of the last of `flags` in `tokens` (`--flag=v` or `--flag v [w ...]`), None when absent."""
    found = None
    for i, token in enumerate(tokens):
        flag, equals, value = token.partition("=")
        if flag in flags:
            found = [value] if equals else list(takewhile(lambda t: not t.startswith("-"), tokens[i + 1 :]))
    return found


def _vllm_serve_model(tokens: Sequence[str]) -> str | None:
    for i in range(len(tokens) - 2):
        if tokens[i].rsplit("/", 1)[-1] == "vllm" and tokens[i + 1] == "serve" and not tokens[i + 2].startswith("-"):
            return tokens[i + 2]
    return None


@dataclass(frozen=True)
class EngineName:
    """What one engine of a deployment answers; `name` None when it cannot be read."""

    deployment: NamespacedName
    engine: int  # index in spec.engines
    member: int  # index of the serving member
    name: str | None

    def config_path(self) -> tuple:
        return (
            "modelDeployments",
            self.deployment.namespace,
            self.deployment.name,
            "template",
            "spec",
            "engines",
            self.engine,
            "members",
            self.member,
            "template",
            "spec",
            "containers",
            0,
            "args",
        )


def deployment_engine_names(key: NamespacedName, deployment: ModelDeployment) -> list[EngineName]:
    """Every engine of the deployment serves requests (each engine's pods join the replica's InferencePool)."""
    uses_cache = deployment.spec.model_cache_ref is not None
    names = []
    for e, engine in enumerate(deployment.spec.engines):
        m, member = next((m, member) for m, member in enumerate(engine.members) if member.role in SERVING_ROLES)
        container = member.template.spec.engine
        names.append(EngineName(key, e, m, engine_model_name(container.command, serving_args(container, uses_cache))))
    return names


def _reached_engines(
    fleet: Fleet, skip_namespaces: AbstractSet[object] = frozenset()
) -> Iterator[tuple[NamespacedName, list[EngineName]]]:
    """Per ModelService reaching at least one ModelDeployment: the engines of the deployments it reaches."""
    clusters = set(fleet.inference_clusters)
    by_namespace: dict[str, dict[str, ModelDeployment]] = defaultdict(dict)
    for key, deployment in fleet.model_deployments.items():
        by_namespace[key.namespace][key.name] = deployment
    cached: dict[NamespacedName, list[EngineName]] = {}
    for key, service in sorted(fleet.model_services.items()):
        if key.namespace in skip_namespaces:
            continue
        deployments = by_namespace.get(key.namespace, {})
        reached: set[str] = set()
        for endpoint in service.endpoints:
            wanted = endpoint.selector.match_labels or {}
            named = wanted.get(references.DEPLOYMENT_LABEL)
            candidates = [named] if named in deployments else [] if named is not None else deployments
            reached.update(
                name
                for name in candidates
                if references._possible_endpoint_labels_match(deployments[name], name, clusters, wanted)
            )
        if reached:
            engines = []
            for name in sorted(reached):
                ref = NamespacedName(key.namespace, name)
                if ref not in cached:
                    cached[ref] = deployment_engine_names(ref, deployments[name])
                engines += cached[ref]
            yield key, engines


def service_engine_names(fleet: Fleet) -> dict[NamespacedName, str]:
    """Per ModelService that reaches a ModelDeployment's replicas: the one model name those engines answer,
    which the front door puts in the body's `model`. A service whose engines' name is unknown or not one
    is left out (`validate` refuses such a config: see `served_name_problems`)."""
    result: dict[NamespacedName, str] = {}
    for key, engines in _reached_engines(fleet):
        names = {engine.name for engine in engines}
        if len(names) == 1 and (name := names.pop()) is not None:
            result[key] = name
    return result


def served_name_problems(fleet: Fleet, broken: AbstractSet[tuple[str, object]] = frozenset()) -> list[ConfigIssue]:
    """Errors: a routed engine whose name cannot be read; a service whose engines answer different names.

    A namespace with a deployment that failed validation on its own is skipped (fix that first)."""
    unsure = {getattr(name, "namespace", name) for kind, name in broken if kind == "modelDeployments"}
    if references.ANY in unsure:
        return []
    unknown: dict[EngineName, list[NamespacedName]] = defaultdict(list)
    errors = []
    for key, engines in _reached_engines(fleet, unsure):
        for engine in engines:
            if engine.name is None:
                unknown[engine].append(key)
        first_with: dict[str, EngineName] = {}
        for engine in engines:
            if engine.name is not None:
                first_with.setdefault(engine.name, engine)
        if len(first_with) > 1:
            answers = ", ".join(f"{_engine_shown(fleet, e)} answers {shown(name)}" for name, e in first_with.items())
            errors.append(
                ConfigIssue(
                    ("modelServices", key.namespace, key.name),
                    f"routes to engines that answer different model names ({answers}); the front "
                    "door rewrites a request's `model` to one name per service: start these engines "
                    "with one --served-model-name (vLLM and SGLang take it besides --model)",
                )
            )
    for engine, services in sorted(unknown.items(), key=lambda item: item[0].config_path()):
        service = fleet.model_services[services[0]]
        suggestion = service.alias or services[0].name
        routed = ", ".join(map(str, services))
        errors.append(
            ConfigIssue(
                engine.config_path(),
                f"the front door sends this engine the requests for "
                f"ModelService {routed}, but the model name it answers cannot be read from its "
                "command and args (no --served-model-name, --model or `vllm serve <model>` with a "
                f"literal name); add --served-model-name={suggestion} to the engine's command line "
                "(the name it answers; the front door rewrites each request's `model` to it)",
            )
        )
    return errors


def _engine_shown(fleet: Fleet, engine: EngineName) -> str:
    engines = fleet.model_deployments[engine.deployment].spec.engines
    which = f" (engine {shown(engines[engine.engine].name)})" if len(engines) > 1 else ""
    return f"ModelDeployment {engine.deployment}{which}"
