"""Runbook edits of a stack file: scale a deployment, drain or undrain a cluster.

Each edit takes the stack file's text and returns the new text, changed only where the value
changes (spliced in by `yaml_splice`, which checks that the new text loads to the old data with
exactly that change). The edits are pure (text in, text out) and raise ConfigError /
ModelplaneError; the CLI writes the result with `api.locked_write` (a lock from reading the file to
replacing it, and an atomic replace).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ruamel.yaml.nodes import MappingNode, ScalarNode

from .api.errors import ConfigError, ConfigIssue, ModelplaneError, PathPart, format_path
from .yaml_splice import REMOVED, Document, entry, flow, is_null, replace_scalar

DRAIN_KEY = "modelplane.ai/drain"
EFFECTS = ("NoSchedule", "NoExecute")
Effect = Literal["NoSchedule", "NoExecute"]


@dataclass(frozen=True)
class Change:
    """One changed value: its config path (without the `modelplane:` prefix), old and new (None: absent)."""

    path: tuple[PathPart, ...]
    old: Any
    new: Any

    def __str__(self) -> str:
        old = "(none)" if self.old is None else render(self.old)
        new = "(removed)" if self.new is None else render(self.new)
        return f"{format_path(self.path)}: {old} -> {new}"


@dataclass(frozen=True)
class PulumiCommand:
    """The same edit as a `pulumi config set|rm --path` command (the stack flag is added by the caller)."""

    verb: Literal["set", "rm"]
    path: tuple[PathPart, ...]
    value: Any = None

    def words(self) -> list[str]:
        words = [self.verb, "--path", format_path(self.path)]
        return words + ([str(self.value)] if self.verb == "set" else [])


@dataclass(frozen=True)
class Edit:
    text: str  # the new stack file text (the old text when nothing changed)
    changes: tuple[Change, ...] = ()
    commands: tuple[PulumiCommand, ...] = ()
    note: str = ""  # why nothing changed

    @property
    def changed(self) -> bool:
        return bool(self.changes)


# --- the three runbook edits -------------------------------------------------------------------


def scale(text: str, target: str, replicas: int) -> Edit:
    """Set `modelDeployments.<namespace>.<name>.replicas` (target: NAMESPACE/NAME)."""
    doc = Document(text)
    namespace, name, node = doc.deployment(target)
    path = ("modelDeployments", namespace, name, "replicas")
    old = doc.plain_at(path)
    if old == replicas and type(old) is int:
        return Edit(text, note=f"{namespace}/{name} already has replicas: {replicas}")
    current = entry(node, "replicas")
    if current is not None and isinstance(current[1], ScalarNode) and not is_null(current[1]):
        splices = [replace_scalar(current[1], replicas)]
    else:
        splices = [doc.add_key(node, "replicas", replicas)]
    new_text = doc.checked(splices, path, replicas)
    return Edit(new_text, (Change(path, old, replicas),), (PulumiCommand("set", path, replicas),))


def drain(text: str, cluster: str, effect: Effect = "NoSchedule", key: str = DRAIN_KEY) -> Edit:
    """Taint `inferenceClusters.<cluster>` with `key:effect`; a taint with that key gets the new effect."""
    if effect not in EFFECTS:
        raise ModelplaneError(f"effect must be one of {', '.join(EFFECTS)} (got {effect!r})")
    doc = Document(text)
    node = doc.cluster(cluster)
    base = ("inferenceClusters", cluster, "taints")
    taints_entry = entry(node, "taints")
    taint = {"key": key, "effect": effect}
    if taints_entry is None:
        new_text = doc.checked([doc.add_key(node, "taints", [taint])], base, [taint])
        return Edit(
            new_text,
            (Change(base, None, [taint]),),
            (PulumiCommand("set", base + (0, "key"), key), PulumiCommand("set", base + (0, "effect"), effect)),
        )
    items, plain = doc.taints(base, taints_entry[1])
    matching = [i for i, t in enumerate(plain) if isinstance(t, dict) and t.get("key") == key]
    for i in matching:
        if plain[i].get("effect") == effect:
            return Edit(text, note=f"{cluster} is already drained: {format_path(base + (i,))} is {key}:{effect}")
    if matching:
        i = matching[0]
        item = items.value[i]
        if not isinstance(item, MappingNode):
            raise ConfigError(
                [ConfigIssue(base + (i,), "must be a mapping with key and effect; fix it, then run again")]
            )
        old_effect = entry(item, "effect")
        if old_effect is not None and isinstance(old_effect[1], ScalarNode) and not is_null(old_effect[1]):
            splice = replace_scalar(old_effect[1], effect)
        else:
            splice = doc.add_key(item, "effect", effect)
        path: tuple[PathPart, ...] = base + (i, "effect")
        new_text = doc.checked([splice], path, effect)
        return Edit(new_text, (Change(path, plain[i].get("effect"), effect),), (PulumiCommand("set", path, effect),))
    index = len(plain)
    path = base + (index,)
    new_text = doc.checked([doc.append_item(items, taint)], base, plain + [taint])
    return Edit(
        new_text,
        (Change(path, None, taint),),
        (PulumiCommand("set", path + ("key",), key), PulumiCommand("set", path + ("effect",), effect)),
    )


def undrain(text: str, cluster: str, key: str = DRAIN_KEY) -> Edit:
    """Remove every taint with `key` from `inferenceClusters.<cluster>`, and `taints` itself if it empties."""
    doc = Document(text)
    node = doc.cluster(cluster)
    base = ("inferenceClusters", cluster, "taints")
    taints_entry = entry(node, "taints")
    if taints_entry is None:
        return Edit(text, note=f"{cluster} is not drained (it has no taints)")
    _items, plain = doc.taints(base, taints_entry[1])
    matching = [i for i, t in enumerate(plain) if isinstance(t, dict) and t.get("key") == key]
    if not matching:
        others = ", ".join(f"{t.get('key')}:{t.get('effect')}" for t in plain if isinstance(t, dict)) or "none"
        return Edit(text, note=f"{cluster} is not drained (no taint {key}; its taints: {others})")
    if len(matching) == len(plain):
        new_text = doc.checked([doc.remove_key(node, taints_entry)], base, REMOVED)
        return Edit(new_text, (Change(base, plain, None),), (PulumiCommand("rm", base),))
    new_text, remaining = text, list(plain)
    for i in reversed(matching):  # one at a time, last first: each removal is checked on its own
        doc = Document(new_text)
        del remaining[i]
        taints_entry = entry(doc.cluster(cluster), "taints")
        assert taints_entry is not None  # found above; an edit only removes its items
        new_text = doc.checked([doc.remove_item(doc.taints(base, taints_entry[1])[0], i)], base, list(remaining))
    changes = tuple(Change(base + (i,), plain[i], None) for i in matching)
    commands = tuple(PulumiCommand("rm", base + (i,)) for i in reversed(matching))  # last first: indexes hold
    return Edit(new_text, changes, commands)


def render(value: Any) -> str:
    """A value as one line of flow YAML, read back the same by ruamel (YAML 1.2) and PyYAML (1.1)."""
    return flow(value)
