"""Which workload clusters `modelplane up` leaves out of the update, decided before the engine starts.

An `up` that changes nothing still sends every resource through the program, the engine and the providers:
at 10 clusters x 50 deployments, 2,368 resources and about 20 s on 2 cores (docs/e2e.md). A cluster whose
fingerprint (render/fingerprint.py: everything the program registers there) equals the one the last update
recorded has nothing to change, so the program does not register it and the engine is told to keep its
resources as they are (`pulumi up --exclude`: an excluded resource the program does not register is kept, with
what it depends on). The program checks every fingerprint again before it registers anything (infra/skip.py).

A recorded fingerprint is trusted only when the state is exactly what that update left:

- the stack's last operation is an update made by `modelplane up`, and it succeeded (the update's message
  carries the nonce the program recorded beside the fingerprints); a failed update, a plain `pulumi up`
  (`--target` or `--exclude` included), a refresh or an import makes the next `modelplane up` a full one;
- nothing wrote the state after that update ended (a killed `up` that saved steps, `pulumi state delete`),
  and no operation is pending.

And a cluster is left out only when its resources in state are exactly what the exclusions name: every
resource managed through its provider, and nothing of another cluster's (a namespace that bears a cluster's
name would otherwise be caught by its name pattern).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

OUTPUT = "clusterFingerprints"  # the stack output: {"update": nonce, "clusters": {cluster: fingerprint}} (secret)
MESSAGE_MARK = re.compile(r"\[modelplane up ([0-9a-f]{12})\]")
# The engine saves the state an instant before it records the update's end; more than this after it, something else wrote.
SAVE_SLACK = timedelta(seconds=2)
PROVIDER_TYPE = "pulumi:providers:kubernetes"
COMPONENT = "modelplane:index:"
# How the names of a cluster's resources start: `<cluster>/...` (objects, releases, manifests, namespaces, cache
# volumes) and `<cluster>:...` (what yaml/v2's ConfigFile names the CRDs of a manifest).
NAME_SEPARATORS = ("/", ":")


ENV = "MODELPLANE_UP"  # what `modelplane up` tells the program it hosts (infra/skip.py)


@dataclass(frozen=True)
class UpRun:
    """What `modelplane up` passes the program: the update's nonce, the clusters it left out with their
    fingerprints, and the update whose recorded fingerprints it trusted."""

    update: str
    skip: dict[str, str] = field(default_factory=dict)
    trusted: str = ""

    def to_env(self) -> str:
        return json.dumps({"update": self.update, "skip": self.skip, "trusted": self.trusted})


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's mark of a secret value in exported state


def revealed(value: Any) -> Any:
    """A value of `pulumi stack export --show-secrets` with each secret replaced by its decoded plaintext."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            plaintext = value.get("plaintext")
            return revealed(json.loads(plaintext)) if isinstance(plaintext, str) else None
        return {key: revealed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [revealed(item) for item in value]
    return value


def root_outputs(state: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's outputs in `pulumi stack export --show-secrets`, secrets decoded."""
    resources = (state.get("deployment") or {}).get("resources") or []
    root = next((r for r in resources if r.get("type") == "pulumi:pulumi:Stack"), None)
    outputs = revealed((root or {}).get("outputs") or {})
    return outputs if isinstance(outputs, dict) else {}


def update_message(nonce: str, message: str | None = None) -> str:
    """The update's message: the user's, if any, then the mark `modelplane up` finds again in the history."""
    mark = f"[modelplane up {nonce}]"
    return f"{message} {mark}" if message else mark


@dataclass(frozen=True)
class Decision:
    skip: dict[str, str] = field(default_factory=dict)  # cluster -> fingerprint
    exclude: list[str] = field(default_factory=list)  # URNs and URN globs for `pulumi up --exclude`
    notes: list[str] = field(default_factory=list)  # why a cluster is not left out, for the user
    trusted: str = ""  # the update whose recorded fingerprints were trusted (its nonce)

    def summary(self, command: str = "up") -> str:
        if not self.skip:
            return f"modelplane {command}: every cluster is in this update"
        left_out = ", ".join(sorted(self.skip))
        return f"modelplane {command}: {len(self.skip)} unchanged clusters left out of this update: {left_out}"


def decide(
    fingerprints: Mapping[str, str],
    replicas: Mapping[str, Sequence[str]],
    last_update: Mapping[str, Any] | None,
    state: Mapping[str, Any],
) -> Decision:
    """`fingerprints`: this run's, per skippable cluster; `replicas`: per cluster, its `<namespace>/<replica>`
    names in this plan; `last_update`: the newest entry of `pulumi stack history --json`; `state`: `pulumi stack
    export --show-secrets`."""
    deployment = state.get("deployment") or {}
    resources = deployment.get("resources") or []
    recorded_update = root_outputs(state).get(OUTPUT)
    why_not = _why_not_trusted(last_update, deployment, resources, recorded_update)
    if why_not or not isinstance(recorded_update, dict):
        return Decision(notes=[why_not])
    root = next(r for r in resources if r.get("type") == "pulumi:pulumi:Stack")
    recorded = recorded_update.get("clusters") or {}
    prefix = root["urn"].split("::pulumi:pulumi:Stack::")[0] + "::"
    unchanged = {
        cluster: cluster_patterns(prefix, cluster, replicas.get(cluster, ()))
        for cluster, fingerprint in sorted(fingerprints.items())
        if recorded.get(cluster) == fingerprint  # a changed (or new) one is in the update, as always
    }
    problems = _exclusion_problems(unchanged, prefix, resources)
    skip = {cluster: fingerprints[cluster] for cluster in unchanged if not problems[cluster]}
    exclude = [pattern for cluster in skip for pattern in unchanged[cluster]]
    notes = [problem for problem in problems.values() if problem]
    return Decision(skip, exclude, notes, trusted=recorded_update["update"])


def _why_not_trusted(
    last_update: Mapping[str, Any] | None, deployment: Mapping[str, Any], resources: list, recorded: Any
) -> str:
    """Why the recorded fingerprints cannot be trusted ('' when they can)."""
    if last_update is None:
        return "no update yet: every cluster is in this update"
    mark = MESSAGE_MARK.search(str(last_update.get("message") or ""))
    if last_update.get("kind") != "update" or mark is None:
        return (
            f"the last operation ({last_update.get('kind')}) was not made by `modelplane up`: every cluster is in "
            "this update"
        )
    if last_update.get("result") != "succeeded":
        return f"the last update {last_update.get('result')}: every cluster is in this update"
    if deployment.get("pending_operations") or any(r.get("delete") for r in resources):
        return "the state has pending operations (an interrupted update): every cluster is in this update"
    saved, ended = _time(deployment.get("manifest", {}).get("time")), _time(last_update.get("endTime"))
    if saved is None or ended is None or saved > ended + SAVE_SLACK:
        return "the state was written after the last update: every cluster is in this update"
    if not isinstance(recorded, dict) or recorded.get("update") != mark.group(1):
        return "the stack's fingerprints are not the last update's: every cluster is in this update"
    return ""


def _time(value: Any) -> datetime | None:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value).astimezone()
    if not isinstance(value, str):
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00"))  # Go writes nanoseconds
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.astimezone()


def cluster_patterns(prefix: str, cluster: str, replicas: Sequence[str]) -> list[str]:
    """What `--exclude` names for a cluster: every resource named `<cluster>/...` (its objects, releases,
    manifests, namespaces and cache volumes) or `<cluster>:...` (the CRDs of its manifests), its component,
    provider and serving stack, and its replicas' components. `prefix` is `urn:pulumi:<stack>::<project>::`."""
    cluster_type = f"{COMPONENT}InferenceCluster"
    return [
        *(f"{prefix}**::{cluster}{separator}**" for separator in NAME_SEPARATORS),
        f"{prefix}{cluster_type}::{cluster}",
        f"{prefix}{cluster_type}${PROVIDER_TYPE}::{cluster}",
        f"{prefix}{cluster_type}${COMPONENT}ServingStack::{cluster}",
        *(f"{prefix}{COMPONENT}ModelReplica::{name}" for name in sorted(replicas)),
    ]


def glob_matcher(pattern: str) -> re.Pattern[str]:
    """The engine's reading of a `--exclude` glob (pkg/resource/deploy: `**` anything, `*` anything but ':')."""
    segments = ("[^:]*".join(re.escape(part) for part in segment.split("*")) for segment in pattern.split("**"))
    return re.compile("^" + ".*".join(segments) + "$")


def _exclusion_problems(candidates: Mapping[str, list[str]], prefix: str, resources: list) -> dict[str, str]:
    """Per candidate cluster, '' when its patterns name exactly its resources in state, else why it stays in.

    A cluster's resources: its provider, what is managed through it, its components (the literal URNs among its
    patterns) and their children. One pass over the state, whatever the number of clusters."""
    by_urn = {r.get("urn", ""): r for r in resources}
    provider_prefix = f"{prefix}{COMPONENT}InferenceCluster${PROVIDER_TYPE}::"
    literal_owner = {p: cluster for cluster, patterns in candidates.items() for p in patterns if "*" not in p}
    # the name globs, each with the text a URN must hold to match it (most do not: no regular expression for them)
    name_globs = {
        cluster: [(f"::{cluster}{sep}", glob_matcher(p)) for sep, p in zip(NAME_SEPARATORS, patterns, strict=False)]
        for cluster, patterns in candidates.items()
    }
    owners: dict[str, str | None] = {}

    def owner(urn: str) -> str | None:
        """The cluster a resource belongs to (None: none, or the front door)."""
        if urn not in owners:
            owners[urn] = None  # a cycle in a broken state belongs to no cluster
            resource = by_urn.get(urn) or {}
            provider, parent = str(resource.get("provider") or ""), str(resource.get("parent") or "")
            if urn.startswith(provider_prefix):
                owners[urn] = urn[len(provider_prefix) :]
            elif urn in literal_owner:
                owners[urn] = literal_owner[urn]
            elif provider.startswith(provider_prefix):
                owners[urn] = provider[len(provider_prefix) :].split("::", 1)[0]
            elif parent:
                owners[urn] = owner(parent)
        return owners[urn]

    problems = dict.fromkeys(candidates, "")
    for urn in by_urn:
        belongs = owner(urn)
        matched = {literal_owner[urn]} if urn in literal_owner else set()
        matched |= {c for c, globs in name_globs.items() if any(head in urn and g.match(urn) for head, g in globs)}
        if belongs is not None and belongs in candidates and belongs not in matched and not problems[belongs]:
            problems[belongs] = f"{belongs}: {urn} is not named after the cluster, so the cluster stays in this update"
        for cluster in matched - {belongs}:
            problems[cluster] = problems[cluster] or (
                f"{cluster}: {urn} is named like the cluster's resources but is not one, so the cluster stays in "
                "this update"
            )
    return problems
