"""Runbook edits of a stack file: scale a deployment, drain or undrain a cluster.

Each edit takes the stack file's text and returns the new text, changed only where the value
changes. ruamel.yaml composes the document (every node knows its exact start and end in the text)
and the edit is spliced in at those marks; new fragments are rendered by ruamel's emitter. The rest
of the file is never re-emitted: a full round-trip dump would re-wrap multi-line flow collections
(the `cloud` stack's node pools and engine args), and the only diff must be the changed value.
Every edit is then checked: the new text must load to the old data with exactly that change.

The edits are pure (text in, text out) and raise ConfigError / ModelplaneError; `locked` and
`write_atomically` are the functions here that touch the disk: the CLI holds `locked(path)` from
reading the file to replacing it, so concurrent edits of one file queue up instead of losing one.
"""

from __future__ import annotations

import copy
import difflib
import errno
import io
import os
import re
import shlex
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from .api.errors import (
    CONFIG_NAMESPACE,
    ConfigError,
    ConfigIssue,
    ModelplaneError,
    PathPart,
    StackFileError,
    format_path,
)

DRAIN_KEY = "modelplane.ai/drain"
EFFECTS = ("NoSchedule", "NoExecute")
Effect = Literal["NoSchedule", "NoExecute"]

T = TypeVar("T")


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
    doc = _Document(text)
    namespace, name, node = doc.deployment(target)
    path = ("modelDeployments", namespace, name, "replicas")
    old = doc.plain_at(path)
    if old == replicas and type(old) is int:
        return Edit(text, note=f"{namespace}/{name} already has replicas: {replicas}")
    current = _entry(node, "replicas")
    if current is not None and isinstance(current[1], ScalarNode) and not _is_null(current[1]):
        splices = [_replace_scalar(current[1], replicas)]
    else:
        splices = [doc.add_key(node, "replicas", replicas)]
    new_text = doc.checked(splices, path, replicas)
    return Edit(new_text, (Change(path, old, replicas),), (PulumiCommand("set", path, replicas),))


def drain(text: str, cluster: str, effect: Effect = "NoSchedule", key: str = DRAIN_KEY) -> Edit:
    """Taint `inferenceClusters.<cluster>` with `key:effect`; a taint with that key gets the new effect."""
    if effect not in EFFECTS:
        raise ModelplaneError(f"effect must be one of {', '.join(EFFECTS)} (got {effect!r})")
    doc = _Document(text)
    node = doc.cluster(cluster)
    base = ("inferenceClusters", cluster, "taints")
    taints_entry = _entry(node, "taints")
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
        old_effect = _entry(item, "effect")
        if old_effect is not None and isinstance(old_effect[1], ScalarNode) and not _is_null(old_effect[1]):
            splice = _replace_scalar(old_effect[1], effect)
        else:
            splice = doc.add_key(item, "effect", effect)
        path = base + (i, "effect")
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
    doc = _Document(text)
    node = doc.cluster(cluster)
    base = ("inferenceClusters", cluster, "taints")
    taints_entry = _entry(node, "taints")
    if taints_entry is None:
        return Edit(text, note=f"{cluster} is not drained (it has no taints)")
    _items, plain = doc.taints(base, taints_entry[1])
    matching = [i for i, t in enumerate(plain) if isinstance(t, dict) and t.get("key") == key]
    if not matching:
        others = ", ".join(f"{t.get('key')}:{t.get('effect')}" for t in plain if isinstance(t, dict)) or "none"
        return Edit(text, note=f"{cluster} is not drained (no taint {key}; its taints: {others})")
    if len(matching) == len(plain):
        new_text = doc.checked([doc.remove_key(node, taints_entry)], base, _REMOVED)
        return Edit(new_text, (Change(base, plain, None),), (PulumiCommand("rm", base),))
    new_text, remaining = text, list(plain)
    for i in reversed(matching):  # one at a time, last first: each removal is checked on its own
        doc = _Document(new_text)
        del remaining[i]
        new_text = doc.checked(
            [doc.remove_item(doc.taints(base, _entry(doc.cluster(cluster), "taints")[1])[0], i)], base, list(remaining)
        )
    changes = tuple(Change(base + (i,), plain[i], None) for i in matching)
    commands = tuple(PulumiCommand("rm", base + (i,)) for i in reversed(matching))  # last first: indexes hold
    return Edit(new_text, changes, commands)


def render(value: Any) -> str:
    """A value as one line of flow YAML, read back the same by ruamel (YAML 1.2) and PyYAML (1.1)."""
    return _flow(value)


# --- writing -----------------------------------------------------------------------------------

LOCK_TIMEOUT = 30.0  # seconds an edit waits for another modelplane command editing the same folder's stack files


def read_text(path: Path) -> str:
    """The file's exact text (line endings kept), for editing."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except UnicodeDecodeError as error:
        raise StackFileError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise StackFileError(f"cannot read stack file {path}: {error.strerror}") from None


@contextmanager
def locked(path: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the edit lock of stack file `path` for read -> check -> write; wait at most `timeout` seconds for it.

    Two `scale`/`drain`/`undrain` commands on one file would otherwise both read the old text and
    the second rename would drop the first edit. The lock is `flock` on the folder holding the file
    (after symlinks), not on the file: `write_atomically` renames a new file over it, so a lock on
    the file's inode would stay on the replaced file while the next command locks the new one. The
    folder's inode survives every edit, and locking it leaves nothing behind: a sidecar
    `.Pulumi.<stack>.yaml.lock` could never be deleted (removing it races with a command waiting on
    it) and would show up in `git status` next to the stacks. The price, serializing edits of every
    stack file in that folder, is nothing: an edit holds the lock for well under a second. Where a
    folder cannot be locked (NFS emulates flock with write locks, which need a file opened for
    writing) the sidecar file is the fallback. flock locks go away with the process, so a killed
    command never leaves a stale lock. Only modelplane takes the lock: an editor or `pulumi config
    set` writing meanwhile is still caught by `write_atomically`'s compare.
    """
    timeout = LOCK_TIMEOUT if timeout is None else timeout
    if fcntl is None:  # no flock (Windows): the compare in write_atomically is all there is
        yield
        return
    target = Path(os.path.realpath(path))
    try:
        fd = os.open(target.parent, os.O_RDONLY)
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except OSError as error:
        raise StackFileError(f"cannot open the folder of stack file {path}: {error.strerror}") from None
    try:
        try:
            _wait_for_lock(fd, path, timeout)
        except OSError as error:
            if isinstance(error, BlockingIOError) or error.errno not in (
                errno.EBADF,
                errno.ENOLCK,
                errno.EOPNOTSUPP,
                errno.EINVAL,
            ):
                raise
            os.close(fd)
            fd = -1
            lock_file = target.parent / f".{target.name}.lock"
            try:
                fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
                _wait_for_lock(fd, path, timeout)
            except OSError as lock_error:
                raise ModelplaneError(
                    f"cannot lock {path} for editing ({lock_file}: {lock_error.strerror}); nothing "
                    "changed: make its folder writable, or edit with `pulumi config set`"
                ) from None
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock


def _wait_for_lock(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ModelplaneError(
                    f"another modelplane command is editing {path} (waited {timeout:g}s for it); "
                    "nothing changed: run this command again once it has finished"
                ) from None
            time.sleep(0.02)


def check_writable(path: Path) -> os.stat_result:
    """The stat of the file `path` resolves to; a ModelplaneError when an edit could not (or must not) replace it.

    An edit writes a new file next to the old one and renames it over: that needs a writable folder,
    and would succeed on a read-only file (and as root, everywhere), so a file without any write bit,
    or one this user may not write (another owner, an immutable file, a read-only mount) is refused
    here rather than replaced behind its mode.
    """
    target = Path(os.path.realpath(path))
    try:
        info = os.stat(target)
        folder = os.stat(target.parent)
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except OSError as error:
        raise StackFileError(f"cannot read stack file {path}: {error.strerror}") from None
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o222:
        raise ModelplaneError(
            f"{path} is read-only (mode {mode:04o}); nothing written: make it writable "
            f"(chmod u+w {shlex.quote(str(target))}) and run the command again, or edit it by hand"
        )
    if not os.access(target, os.W_OK):
        raise ModelplaneError(
            f"{path} is not writable by this user (owner uid {info.st_uid}, mode {mode:04o}; or it "
            "is immutable, or on a read-only file system); nothing written: run the command as a "
            "user who may write it, or fix its permissions"
        )
    if not stat.S_IMODE(folder.st_mode) & 0o222 or not os.access(target.parent, os.W_OK | os.X_OK):
        raise ModelplaneError(
            f"the folder {target.parent} is read-only; nothing written to {path}: the edit writes a "
            "new file there and renames it over the old one, so make the folder writable (for "
            f"example chmod u+w {shlex.quote(str(target.parent))}) and run the command again"
        )
    return info


def write_atomically(path: Path, text: str, old_text: str, check: Callable[[Path], T]) -> T:
    """Write `text` to a temporary file next to `path`, `check` it, then `os.replace` it over `path`.

    If `check` raises (for example a ConfigError), writing fails (a full disk, an interrupt) or
    `path` no longer holds `old_text`, the temporary file is removed and `path` is byte for byte
    untouched. The new file keeps the old one's owner, group and mode; a symlink keeps pointing at
    the edited file. Call it inside `locked(path)`, which keeps other modelplane edits out.
    """
    target = Path(os.path.realpath(path))
    info = check_writable(path)
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise ModelplaneError(f"cannot write next to {path}: {error.strerror}; nothing changed") from None
    replaced = False
    try:
        try:
            try:
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data) :]
                _keep_owner_and_mode(fd, info, path)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise ModelplaneError(f"cannot write {path}: {error.strerror or error}; nothing changed") from None
        result = check(Path(temp))
        if read_text(target) != old_text:
            raise ModelplaneError(f"{path} changed while it was being edited; nothing written, run the command again")
        try:
            os.replace(temp, target)
        except OSError as error:
            raise ModelplaneError(f"cannot replace {path}: {error.strerror or error}; nothing changed") from None
        replaced = True
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        if not replaced:
            with suppress(OSError):
                os.unlink(temp)
        raise
    _sync_folder(target.parent)
    return result


def _keep_owner_and_mode(fd: int, info: os.stat_result, path: Path) -> None:
    """Give the new file the old one's owner, group and mode (chown first: it may clear set-id bits)."""
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (info.st_uid, info.st_gid):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except PermissionError:
            raise ModelplaneError(
                f"cannot keep the owner and group of {path} (uid {info.st_uid}, gid {info.st_gid}) "
                "on the edited file; nothing changed: run the command as its owner (or root), or "
                "edit it by hand"
            ) from None
    os.fchmod(fd, stat.S_IMODE(info.st_mode))


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; best effort (not every file system can fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- the document: navigation, splices, and the check --------------------------------------------

_REMOVED = object()  # the expected value of a removed key


@dataclass(frozen=True)
class _Splice:
    start: int
    end: int
    text: str


class _Document:
    def __init__(self, text: str):
        self.text = text
        self.newline = "\r\n" if "\r\n" in text else "\n"
        try:
            self.root = YAML().compose(text)
        except RuamelError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise StackFileError(
                f"the stack file is not valid YAML{where}: {getattr(error, 'problem', error)}"
            ) from None
        self.data = _plain(text)
        self.config = None
        if isinstance(self.root, MappingNode) and (found := _entry(self.root, "config")) is not None:
            self.config = found[1] if isinstance(found[1], MappingNode) else None

    # navigation

    def section(self, kind: str) -> MappingNode | None:
        found = _entry(self.config, f"{CONFIG_NAMESPACE}:{kind}") if self.config is not None else None
        if found is None or _is_null(found[1]):
            return None
        if not isinstance(found[1], MappingNode):
            raise ConfigError(
                [
                    ConfigIssue(
                        (kind,), "must be a mapping keyed by name; fix it (see `modelplane validate`), then run again"
                    )
                ]
            )
        return found[1]

    def deployment(self, target: str) -> tuple[str, str, MappingNode]:
        section = self.section("modelDeployments")
        known = {ns: _keys(names) for ns, names in _pairs(section)} if section is not None else {}
        everything = sorted(f"{ns}/{name}" for ns, names in known.items() for name in names)
        namespace, slash, name = target.partition("/")
        if not slash or not namespace or not name or "/" in name:
            close = [full for full in everything if full.split("/", 1)[1] == target]
            close = close or difflib.get_close_matches(target, everything, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; ModelDeployments: {', '.join(everything) or 'none'}"
            raise ModelplaneError(f"write the deployment as NAMESPACE/NAME (got {target!r}){hint}")
        if section is None:
            raise ConfigError([ConfigIssue(("modelDeployments",), "this stack has no ModelDeployments")])
        namespaces = dict(_pairs(section))
        if namespace not in namespaces:
            raise ConfigError(
                [
                    ConfigIssue(
                        ("modelDeployments", namespace),
                        f"no ModelDeployments in namespace {namespace}"
                        + _did_you_mean(namespace, sorted(known), "namespaces"),
                    )
                ]
            )
        names = dict(_pairs(namespaces[namespace]))
        if name not in names:
            raise ConfigError(
                [
                    ConfigIssue(
                        ("modelDeployments", namespace, name),
                        f"no ModelDeployment {namespace}/{name}"
                        + _did_you_mean(name, known[namespace], f"ModelDeployments in {namespace}"),
                    )
                ]
            )
        node = names[name]
        if not isinstance(node, MappingNode):
            raise ConfigError(
                [
                    ConfigIssue(
                        ("modelDeployments", namespace, name),
                        "must be a mapping of fields; fix it (see `modelplane validate`), then run again",
                    )
                ]
            )
        return namespace, name, node

    def cluster(self, name: str) -> MappingNode:
        section = self.section("inferenceClusters")
        clusters = dict(_pairs(section)) if section is not None else {}
        if name not in clusters:
            raise ConfigError(
                [
                    ConfigIssue(
                        ("inferenceClusters", name),
                        f"no InferenceCluster {name}" + _did_you_mean(name, sorted(clusters), "InferenceClusters"),
                    )
                ]
            )
        node = clusters[name]
        if not isinstance(node, MappingNode):
            raise ConfigError(
                [
                    ConfigIssue(
                        ("inferenceClusters", name),
                        "must be a mapping of fields; fix it (see `modelplane validate`), then run again",
                    )
                ]
            )
        return node

    def taints(self, path: tuple, node: Node) -> tuple[SequenceNode, list]:
        plain = self.plain_at(path)
        if not isinstance(node, SequenceNode) or not isinstance(plain, list) or len(plain) != len(node.value):
            raise ConfigError(
                [ConfigIssue(path, "must be a list of {key, effect} taints; fix it (or remove it), then run again")]
            )
        return node, plain

    def plain_at(self, path: tuple) -> Any:
        value = self.data.get("config") if isinstance(self.data, dict) else None
        for part in (f"{CONFIG_NAMESPACE}:{path[0]}",) + tuple(path[1:]):
            if isinstance(part, int):
                value = value[part] if isinstance(value, list) and part < len(value) else None
            elif isinstance(value, dict):
                value = next((v for k, v in value.items() if str(k) == part), None)
            else:
                return None
        return value

    # splices

    def add_key(self, mapping: MappingNode, key: str, value: Any) -> _Splice:
        if mapping.flow_style:
            last = mapping.value[-1][1] if mapping.value else None
            return self._flow_insert(mapping, last, f"{_flow(key)}: {_flow(value)}")
        indent = mapping.value[0][0].start_mark.column
        if isinstance(value, list):
            offset = next((o for o in (_sequence_offset(mapping), _sequence_offset(self.root)) if o is not None), 2)
            lines = [" " * indent + f"{_flow(key)}:"]
            lines += [" " * (indent + offset) + f"- {_flow(item)}" for item in value]
        else:
            lines = [" " * indent + f"{_flow(key)}: {_flow(value)}"]
        return self._insert_lines(_content_end(mapping), lines)

    def append_item(self, sequence: SequenceNode, value: Any) -> _Splice:
        if sequence.flow_style:
            return self._flow_insert(sequence, sequence.value[-1] if sequence.value else None, _flow(value))
        column = sequence.start_mark.column
        return self._insert_lines(_content_end(sequence), [" " * column + f"- {_flow(value)}"])

    def remove_key(self, mapping: MappingNode, entry: tuple[Node, Node]) -> _Splice:
        key, value = entry
        if mapping.flow_style:
            return self._flow_remove(
                mapping.value, mapping.value.index(entry), lambda pair: pair[0], lambda pair: pair[1]
            )
        return self._remove_lines(key.start_mark.index, _content_end(value), r"[ \t]*")

    def remove_item(self, sequence: SequenceNode, index: int) -> _Splice:
        if sequence.flow_style:
            return self._flow_remove(sequence.value, index, lambda item: item, lambda item: item)
        item = sequence.value[index]
        return self._remove_lines(item.start_mark.index, _content_end(item), r"[ \t]*-[ \t]*")

    def _insert_lines(self, after: int, lines: list[str]) -> _Splice:
        at = _line_end(self.text, after)
        block = self.newline.join(lines)
        if at == len(self.text) and not self.text.endswith("\n"):
            return _Splice(at, at, self.newline + block)  # keep the file without a final newline
        return _Splice(at, at, block + self.newline)

    def _remove_lines(self, start: int, content_end: int, prefix: str) -> _Splice:
        line_start = self.text.rfind("\n", 0, start) + 1
        if not re.fullmatch(prefix, self.text[line_start:start]):
            raise _unsafe()
        end = _line_end(self.text, content_end)
        if end == len(self.text) and not self.text.endswith("\n") and line_start > 0:
            line_start -= len(self.newline) if self.text[:line_start].endswith(self.newline) else 1
        return _Splice(line_start, end, "")

    def _flow_insert(self, collection: Node, last: Node | None, fragment: str) -> _Splice:
        if last is None:  # empty: right after the opening bracket
            at = collection.start_mark.index + 1
            return _Splice(at, at, fragment)
        at = _content_end(last)
        return _Splice(at, at, f", {fragment}")

    def _flow_remove(self, entries: list, index: int, first: Callable, last: Callable) -> _Splice:
        if len(entries) == 1:
            return _Splice(first(entries[0]).start_mark.index, _content_end(last(entries[0])), "")
        if index > 0:  # from the end of the previous entry: drops the separating comma
            return _Splice(_content_end(last(entries[index - 1])), _content_end(last(entries[index])), "")
        return _Splice(first(entries[0]).start_mark.index, first(entries[1]).start_mark.index, "")

    # the check

    def checked(self, splices: list[_Splice], path: tuple, value: Any) -> str:
        """Apply the splices; the new text must load to the old data with only `path` set to `value`."""
        text = self.text
        for splice in sorted(splices, key=lambda s: s.start, reverse=True):
            text = text[: splice.start] + splice.text + text[splice.end :]
        expected = copy.deepcopy(self.data)
        parent = expected["config"]
        parts = (f"{CONFIG_NAMESPACE}:{path[0]}",) + tuple(path[1:])
        for part in parts[:-1]:
            parent = parent[part] if isinstance(part, int) else parent[next(k for k in parent if str(k) == part)]
        leaf = parts[-1]
        if isinstance(leaf, str):
            leaf = next((k for k in parent if str(k) == leaf), leaf)
        if value is _REMOVED:
            del parent[leaf]
        elif isinstance(leaf, int) and leaf == len(parent):
            parent.append(value)
        else:
            parent[leaf] = value
        try:
            actual = _plain(text)
            YAML().compose(text)
        except (yaml.YAMLError, RuamelError, StackFileError):
            raise _unsafe() from None
        if actual != expected:
            raise _unsafe()
        return text


# --- helpers -----------------------------------------------------------------------------------


def _unsafe() -> ModelplaneError:
    return ModelplaneError(
        "this stack file is laid out in a way the edit cannot change without touching other lines; "
        "nothing written: make the change by hand or with the `pulumi config` command"
    )


def _plain(text: str) -> Any:
    """The data as the CLI's own reader (PyYAML) sees it."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise StackFileError(f"the stack file is not valid YAML: {error}") from None


def _entry(mapping: Node | None, key: str) -> tuple[Node, Node] | None:
    """The last (key node, value node) pair named `key` (YAML keeps the last of duplicates)."""
    if not isinstance(mapping, MappingNode):
        return None
    found = None
    for pair in mapping.value:
        if isinstance(pair[0], ScalarNode) and pair[0].value == key:
            found = pair
    return found


def _pairs(mapping: Node | None) -> list[tuple[str, Node]]:
    if not isinstance(mapping, MappingNode):
        return []
    return [(k.value, v) for k, v in mapping.value if isinstance(k, ScalarNode) and k.value != "<<"]


def _keys(mapping: Node) -> list[str]:
    return sorted(k for k, _ in _pairs(mapping))


def _did_you_mean(name: str, known: list[str], what: str) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return (f"; did you mean {close[0]}?" if close else "") + f" ({what}: {', '.join(known) or 'none'})"


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.style is None and node.value in ("", "~", "null", "Null", "NULL")


def _content_end(node: Node) -> int:
    """Just past the node's last character (a block collection's end mark is at the next token)."""
    if isinstance(node, ScalarNode) or node.flow_style or not node.value:
        return node.end_mark.index
    if isinstance(node, MappingNode):
        key, value = node.value[-1]
        return key.end_mark.index if _is_null(value) and value.value == "" else _content_end(value)
    return _content_end(node.value[-1])


def _line_end(text: str, index: int) -> int:
    """The start of the line after the one `index` is on (`index` itself if it starts a line)."""
    if index > 0 and text[index - 1] == "\n":
        return index
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _sequence_offset(node: Node) -> int | None:
    """How far this file indents a block sequence's dash past its key (0 for `key:\\n- item`)."""
    stack = [node]
    while stack:
        current = stack.pop(0)
        if isinstance(current, MappingNode):
            for key, value in current.value:
                if (
                    isinstance(value, SequenceNode)
                    and not value.flow_style
                    and value.value
                    and value.start_mark.line > key.start_mark.line
                ):
                    return value.start_mark.column - key.start_mark.column
                stack.append(value)
        elif isinstance(current, SequenceNode):
            stack.extend(current.value)
    return None


def _replace_scalar(node: ScalarNode, value: Any) -> _Splice:
    style = node.style if node.style in ('"', "'") else None
    return _Splice(node.start_mark.index, node.end_mark.index, _flow(value, style))


def _flow(value: Any, style: str | None = None) -> str:
    """One line of flow YAML rendered by ruamel; a string PyYAML would read differently is quoted."""
    if isinstance(value, str) and style == '"':
        value = DoubleQuotedScalarString(value)
    elif isinstance(value, str) and style == "'":
        value = SingleQuotedScalarString(value)
    elif isinstance(value, str):
        plain = _dump(value)
        try:
            same = yaml.safe_load(plain) == value
        except yaml.YAMLError:
            same = False
        if not same:  # e.g. `yes` or `on`: a string in YAML 1.2, a bool to PyYAML
            value = DoubleQuotedScalarString(value)
    elif isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _dump(value)


def _dump(value: Any) -> str:
    emitter = YAML()
    emitter.default_flow_style = True
    emitter.width = 1 << 16
    out = io.StringIO()
    emitter.dump(value, out)
    text = out.getvalue()
    if text.endswith("\n...\n"):  # the end-of-document marker after a bare plain scalar
        text = text[: -len("\n...\n")]
    return text.rstrip("\n")
