"""The YAML splice engine behind the runbook edits: a stack file's text changed at exact marks.

ruamel.yaml composes the document (every node knows its exact start and end in the text) and an
edit is spliced in at those marks; new fragments are rendered by ruamel's emitter. The rest of the
file is never re-emitted: a full round-trip dump would re-wrap multi-line flow collections (the
`cloud` stack's node pools and engine args), and the only diff must be the changed value.
`Document.checked` then proves it: the new text must load to the old data with exactly that change.
"""

from __future__ import annotations

import copy
import difflib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from .api.errors import CONFIG_NAMESPACE, ConfigError, ConfigIssue, ModelplaneError, StackFileError

REMOVED = object()  # the expected value of a removed key


@dataclass(frozen=True)
class Splice:
    start: int
    end: int
    text: str


class Document:
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
        if isinstance(self.root, MappingNode) and (found := entry(self.root, "config")) is not None:
            self.config = found[1] if isinstance(found[1], MappingNode) else None

    # navigation

    def section(self, kind: str) -> MappingNode | None:
        found = entry(self.config, f"{CONFIG_NAMESPACE}:{kind}") if self.config is not None else None
        if found is None or is_null(found[1]):
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

    def add_key(self, mapping: MappingNode, key: str, value: Any) -> Splice:
        if mapping.flow_style:
            last = mapping.value[-1][1] if mapping.value else None
            return self._flow_insert(mapping, last, f"{flow(key)}: {flow(value)}")
        indent = mapping.value[0][0].start_mark.column
        if isinstance(value, list):
            offset = next((o for o in (_sequence_offset(mapping), _sequence_offset(self.root)) if o is not None), 2)
            lines = [" " * indent + f"{flow(key)}:"]
            lines += [" " * (indent + offset) + f"- {flow(item)}" for item in value]
        else:
            lines = [" " * indent + f"{flow(key)}: {flow(value)}"]
        return self._insert_lines(_content_end(mapping), lines)

    def append_item(self, sequence: SequenceNode, value: Any) -> Splice:
        if sequence.flow_style:
            return self._flow_insert(sequence, sequence.value[-1] if sequence.value else None, flow(value))
        column = sequence.start_mark.column
        return self._insert_lines(_content_end(sequence), [" " * column + f"- {flow(value)}"])

    def remove_key(self, mapping: MappingNode, entry: tuple[Node, Node]) -> Splice:
        key, value = entry
        if mapping.flow_style:
            return self._flow_remove(
                mapping.value, mapping.value.index(entry), lambda pair: pair[0], lambda pair: pair[1]
            )
        return self._remove_lines(key.start_mark.index, _content_end(value), r"[ \t]*")

    def remove_item(self, sequence: SequenceNode, index: int) -> Splice:
        if sequence.flow_style:
            return self._flow_remove(sequence.value, index, lambda item: item, lambda item: item)
        item = sequence.value[index]
        return self._remove_lines(item.start_mark.index, _content_end(item), r"[ \t]*-[ \t]*")

    def _insert_lines(self, after: int, lines: list[str]) -> Splice:
        at = _line_end(self.text, after)
        block = self.newline.join(lines)
        if at == len(self.text) and not self.text.endswith("\n"):
            return Splice(at, at, self.newline + block)  # keep the file without a final newline
        return Splice(at, at, block + self.newline)

    def _remove_lines(self, start: int, content_end: int, prefix: str) -> Splice:
        line_start = self.text.rfind("\n", 0, start) + 1
        if not re.fullmatch(prefix, self.text[line_start:start]):
            raise _unsafe()
        end = _line_end(self.text, content_end)
        if end == len(self.text) and not self.text.endswith("\n") and line_start > 0:
            line_start -= len(self.newline) if self.text[:line_start].endswith(self.newline) else 1
        return Splice(line_start, end, "")

    def _flow_insert(self, collection: Node, last: Node | None, fragment: str) -> Splice:
        if last is None:  # empty: right after the opening bracket
            at = collection.start_mark.index + 1
            return Splice(at, at, fragment)
        at = _content_end(last)
        return Splice(at, at, f", {fragment}")

    def _flow_remove(self, entries: list, index: int, first: Callable, last: Callable) -> Splice:
        if len(entries) == 1:
            return Splice(first(entries[0]).start_mark.index, _content_end(last(entries[0])), "")
        if index > 0:  # from the end of the previous entry: drops the separating comma
            return Splice(_content_end(last(entries[index - 1])), _content_end(last(entries[index])), "")
        return Splice(first(entries[0]).start_mark.index, first(entries[1]).start_mark.index, "")

    # the check

    def checked(self, splices: list[Splice], path: tuple, value: Any) -> str:
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
        if value is REMOVED:
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


def entry(mapping: Node | None, key: str) -> tuple[Node, Node] | None:
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


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.style is None and node.value in ("", "~", "null", "Null", "NULL")


def _content_end(node: Node) -> int:
    """Just past the node's last character (a block collection's end mark is at the next token)."""
    if not isinstance(node, CollectionNode) or node.flow_style or not node.value:  # a scalar, or a flow collection
        return node.end_mark.index
    if isinstance(node, MappingNode):
        key, value = node.value[-1]
        return key.end_mark.index if is_null(value) and value.value == "" else _content_end(value)
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


def replace_scalar(node: ScalarNode, value: Any) -> Splice:
    style = node.style if node.style in ('"', "'") else None
    return Splice(node.start_mark.index, node.end_mark.index, flow(value, style))


def flow(value: Any, style: str | None = None) -> str:
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
        return "{" + ", ".join(f"{flow(k)}: {flow(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
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
