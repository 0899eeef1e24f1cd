"""Read a Pulumi stack file (`stacks/Pulumi.<stack>.yaml`) without the Pulumi CLI.

`secure:` values stay encrypted (only the CLI can decrypt them) and become SecretValue
placeholders; duplicate keys, which YAML would silently collapse, are errors; and every value
remembers its line, so a config error can say which line to fix.

The file is not trusted: it is read only if it is a regular file of at most 16 MiB, as strict
UTF-8 without control characters, and parsed event by event (never recursively) with a bound on
nesting and on the number of values. YAML aliases are refused (a billion-laughs file expands
exponentially, and `pulumi config set` never writes an alias), as are merge keys, keys that are
not text where names are expected, and numbers no field could take.

A file with no `modelplane:` keys under `config:` (empty, comments only, another project's stack
file) is refused too: validating nothing would report it "valid".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from .common import SecretValue, Unreadable, decode_top_level
from .errors import CONFIG_NAMESPACE, ConfigIssue, PathPart, StackFileError, quoted, shown
from .textfile import read_text

PROJECT_FILE = "Pulumi.yaml"

# A fleet of 200 clusters and 2,000 deployments is about 2 MiB of stack file, 70,000 values; the
# bounds leave room for several times that, and refuse what no real stack file holds.
MAX_FILE_BYTES = 16 << 20
MAX_DEPTH = 64  # the deepest stack config (a container's env valueFrom) nests about 20 levels
MAX_INT_DIGITS = 100  # longer integers are refused unread; shorter ones meet each field's own bound
MAX_VALUES = 500_000  # seven times the 70,000 values of a 200-cluster, 2,000-deployment stack file
MAX_FILE_ISSUES = 1000  # duplicate keys and the like; past this the rest are counted, not listed
_SIZE_NOTE = "a stack file for 200 clusters and 2,000 deployments is about 2 MiB"

# libyaml when PyYAML has it (ten times faster); the pure-Python parser otherwise. Both stream events.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_COLLECTION_TAGS = {None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
_SCALAR_TAGS = {
    bool: "tag:yaml.org,2002:bool",
    int: "tag:yaml.org,2002:int",
    float: "tag:yaml.org,2002:float",
    date: "tag:yaml.org,2002:timestamp",
    datetime: "tag:yaml.org,2002:timestamp",
}
_TYPE_WORDS = {
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true or false",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date",
}


@dataclass(frozen=True)
class StackFile:
    path: Path
    config: dict[str, Any]  # `modelplane:` keys, prefix removed
    lines: dict[tuple[PathPart, ...], int] = field(default_factory=dict)
    issues: tuple[ConfigIssue, ...] = ()  # problems YAML itself would hide (duplicate keys)
    environments: tuple[str, ...] = ()  # Pulumi ESC environments the file imports (`environment:`): not read here

    def line_of(self, path: tuple[PathPart, ...]) -> int | None:
        """Line of the deepest existing value on `path` (a missing field points at its parent).

        A value on the same line as its parent is not recorded: the walk up finds that line.
        """
        for end in range(len(path), 0, -1):
            if (line := self.lines.get(tuple(path[:end]))) is not None:
                return line
        return None


def find_project_dir(start: Path) -> Path | None:
    for directory in [start, *start.parents]:
        if (directory / PROJECT_FILE).is_file():
            return directory
    return None


def stack_file_path(stack: str, project_dir: Path) -> Path:
    """`<project>/<stackConfigDir>/Pulumi.<stack>.yaml`, as the Pulumi CLI resolves it."""
    path = project_dir / PROJECT_FILE
    project, _, _ = parse_yaml(read_text(path, "project file", MAX_FILE_BYTES, error=StackFileError), path)
    config_dir = project.get("stackConfigDir") if isinstance(project, dict) else None
    if config_dir is not None and not isinstance(config_dir, str):
        raise StackFileError(f"{path}: stackConfigDir must be a folder name (got {shown(config_dir)})")
    return project_dir / (config_dir or ".") / f"Pulumi.{stack}.yaml"


def read_stack_file(path: Path) -> StackFile:
    text = read_text(path, "stack file", MAX_FILE_BYTES, _SIZE_NOTE, error=StackFileError)
    document, lines, issues = parse_yaml(text, path)
    if not isinstance(document, dict):
        raise _not_a_stack(path, _not_a_mapping(document, text))
    raw_config = document.get("config") or {}
    if not isinstance(raw_config, dict):
        raise StackFileError(f"{path}: 'config:' must be a mapping of keys such as modelplane:inferenceClusters")
    config: dict[str, Any] = {}
    config_lines: dict[tuple[PathPart, ...], int] = {}
    prefix = f"{CONFIG_NAMESPACE}:"
    for key, value in raw_config.items():
        if isinstance(key, str) and key.startswith(prefix):
            config[key[len(prefix) :]] = decode_top_level(value)
    if not config:  # validating nothing would say "valid": an empty file, or another project's stack file
        raise _not_a_stack(path, _no_modelplane_keys(document, raw_config, prefix))
    for loc, line in lines.items():
        if len(loc) >= 2 and loc[0] == "config" and isinstance(loc[1], str) and loc[1].startswith(prefix):
            config_lines[(loc[1][len(prefix) :],) + loc[2:]] = line
    return StackFile(path, config, config_lines, tuple(issues), _environments(document.get("environment")))


def _environments(value: Any) -> tuple[str, ...]:
    """The names under a stack file's `environment:` (a list, or `imports:` in the long form)."""
    if isinstance(value, dict):
        value = value.get("imports")
    if value is None or value == []:
        return ()
    names = value if isinstance(value, list) else [value]
    return tuple(name if isinstance(name, str) else shown(name) for name in names) or ("environment:",)


def _not_a_stack(path: Path, why: str) -> StackFileError:
    return StackFileError(f"{path} has no modelplane configuration ({why}); see docs/config.md")


def _not_a_mapping(document: Any, text: str) -> str:
    if document is None:
        meaningful = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        return (
            "the file is empty"
            if not text.strip()
            else ("the file holds only comments" if not meaningful else "the YAML document is empty")
        )
    kind = (
        "a list"
        if isinstance(document, list)
        else "an encrypted value"
        if isinstance(document, SecretValue)
        else "text"
        if isinstance(document, str)
        else _TYPE_WORDS.get(_SCALAR_TAGS.get(type(document), ""), "a value")
    )
    return f"the file is {kind}, not a mapping with a 'config:' section"


def _no_modelplane_keys(document: dict, raw_config: dict, prefix: str) -> str:
    why = f"no '{prefix}' keys under 'config:'"
    misplaced = [key for key in document if isinstance(key, str) and key.startswith(prefix)]
    if misplaced:
        return f"{why}; {quoted(misplaced[0])} is at the top level: indent it under 'config:'"
    if raw_config:
        keys = [_short(key) for key in raw_config]
        return f"{why}, only {', '.join(keys[:3])}" + (f" and {len(keys) - 3:,} more" if len(keys) > 3 else "")
    return why if "config" in document else f"{why}: the file has no 'config:' section"


def parse_yaml(text: str, path: Path) -> tuple[Any, dict[tuple, int], list[ConfigIssue]]:
    """One YAML document -> (plain data, line of each value, issues under `config: modelplane:...`).

    Raises StackFileError for what makes the file unusable (bad YAML, an alias, too deep, ...).
    """
    loader = _Loader(text)
    try:
        return _Builder(loader, path).build()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or getattr(error, "reason", None) or "unreadable"
        raise StackFileError(f"{path} is not valid YAML{where}: {_one_line(problem)}") from None
    finally:
        loader.dispose()


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= 200 else text[:200] + "..."


_NO_KEY = object()


class _AllCharacters:
    def __contains__(self, char: object) -> bool:
        return True


_ALL_CHARACTERS = _AllCharacters()


class _Frame:
    """An open mapping or sequence while the event stream is read."""

    __slots__ = ("is_map", "key", "key_lines", "line", "path", "value")

    def __init__(self, is_map: bool, path: tuple, line: int):
        self.is_map, self.path, self.line = is_map, path, line
        self.value: dict | list = {} if is_map else []
        self.key: Any = _NO_KEY
        self.key_lines: dict[Any, int] = {}  # line of each key, for "defined twice (first at line N)"


class _Builder:
    """Plain data from YAML events, iteratively: no recursion, so nesting cannot exhaust the stack."""

    def __init__(self, loader: Any, path: Path):
        self.loader, self.path = loader, path
        self.lines: dict[tuple, int] = {}
        self.issues: list[ConfigIssue] = []
        self.unlisted = 0  # issues past MAX_FILE_ISSUES
        self.values = 0
        resolvers = loader.yaml_implicit_resolvers
        # first characters of plain scalars that may resolve to something other than text
        self.resolver_starts = set(resolvers) if None not in resolvers else _ALL_CHARACTERS

    def issue(self, where: tuple, message: str) -> None:
        if len(self.issues) < MAX_FILE_ISSUES:
            self.issues.append(ConfigIssue(where, message))
        else:
            self.unlisted += 1

    def fail(self, line: int, message: str) -> StackFileError:
        return StackFileError(f"{self.path}:{line}: {message}")

    def build(self) -> tuple[Any, dict[tuple, int], list[ConfigIssue]]:
        loader = self.loader
        loader.get_event()  # StreamStart
        if loader.check_event(yaml.StreamEndEvent):
            return None, self.lines, self.issues
        loader.get_event()  # DocumentStart
        document = self._node()
        loader.get_event()  # DocumentEnd
        if not loader.check_event(yaml.StreamEndEvent):
            line = loader.peek_event().start_mark.line + 1
            raise self.fail(line, "a second YAML document starts here ('---'); a stack file is one document")
        if self.unlisted:
            self.issues.append(
                ConfigIssue(
                    self.issues[-1].path[:1],
                    f"and {self.unlisted:,} more problems of this kind in the file, not listed",
                )
            )
        return document, self.lines, self.issues

    def _node(self) -> Any:
        """Read one node (with everything inside it) from the event stream.

        The hot loop of reading a large file: plain local names, one type test per event.
        """
        stack: list[_Frame] = []
        get_event, lines = self.loader.get_event, self.lines
        scalar, mapping_start, ends = (
            yaml.ScalarEvent,
            yaml.MappingStartEvent,
            (yaml.MappingEndEvent, yaml.SequenceEndEvent),
        )
        alias, values = yaml.AliasEvent, self.values
        while True:
            event = get_event()
            kind = type(event)
            if kind in ends:
                frame = stack.pop()
                value = self._finish(frame)
                if not stack:
                    return value
                _attach(stack[-1], value)
                continue
            parent = stack[-1] if stack else None
            if parent is not None and parent.is_map and parent.key is _NO_KEY:
                self._key(parent, event)
                continue
            line = event.start_mark.line + 1
            if kind is alias:
                raise self.fail(
                    line,
                    f"YAML aliases (*{_short(event.anchor)}) are not supported in stack files: "
                    "`pulumi config set` never writes them, and they can expand without bound; "
                    "write the value out in full",
                )
            values += 1
            if values > MAX_VALUES:
                raise self.fail(
                    line,
                    f"more than {MAX_VALUES:,} values; a stack file for 200 clusters and 2,000 "
                    "deployments holds about 70,000",
                )
            if parent is None:
                path: tuple = ()
                lines[path] = line
            else:
                path = parent.path + ((parent.key,) if parent.is_map else (len(parent.value),))
                if line != parent.line:  # same line as the parent: line_of finds it by walking up
                    lines[path] = line
            if kind is scalar:
                value = self._scalar(event, path)
                if parent is None:
                    return value
                _attach(parent, value)
                continue
            if len(stack) >= MAX_DEPTH:
                raise self.fail(line, f"values nest more than {MAX_DEPTH} levels deep; stack config nests about 20")
            if event.tag not in _PLAIN_COLLECTION_TAGS:
                raise self.fail(line, f"the YAML tag {quoted(event.tag)} is not supported in stack files; remove it")
            stack.append(_Frame(kind is mapping_start, path, line))

    def _key(self, frame: _Frame, event: Any) -> None:
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            raise self.fail(
                line,
                f"YAML aliases (*{_short(event.anchor)}) are not supported in stack files: "
                "`pulumi config set` never writes them; write the key out",
            )
        if not isinstance(event, yaml.ScalarEvent):
            raise self.fail(line, "a mapping key is itself a list or a mapping; keys are names (text)")
        tag = self._tag(event)
        if tag == _MERGE_TAG:
            raise self.fail(
                line,
                "YAML merge keys (<<) are not supported in stack files: `pulumi config set` "
                "never writes them; write the keys out",
            )
        key: Any = event.value
        if tag != _STR_TAG:
            where = _config_path(frame.path + (key,))
            if where is not None:
                self.issue(
                    where,
                    f'key must be a string (got {_short(key)}); quote it in YAML ("{_short(key)}"): '
                    f"unquoted, YAML reads it as {_TYPE_WORDS.get(tag, 'something other than text')}",
                )
        if key in frame.key_lines:
            first = frame.key_lines[key]
            where = _config_path(frame.path + (key,))
            if where is None:
                raise self.fail(
                    line,
                    f"key {quoted(key)} is defined twice (first at line {first}); YAML would "
                    "keep only the last, so merge the two",
                )
            self.issue(
                where, f"is defined twice (line {line}); YAML keeps only the last, so merge the two or rename one"
            )
        frame.key_lines[key] = line
        frame.key = key

    def _finish(self, frame: _Frame) -> Any:
        value = frame.value
        if isinstance(value, dict) and len(value) == 1 and "secure" in value:  # a mapping frame's value
            ciphertext = value["secure"]
            return SecretValue(ciphertext=ciphertext if isinstance(ciphertext, str) else "")
        return value

    def _tag(self, event: Any) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            value = event.value
            if not event.implicit[0] or (value and value[0] not in self.resolver_starts):
                return _STR_TAG  # quoted, or plain text no implicit type (number, bool, null...) starts with
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        return tag

    def _scalar(self, event: Any, path: tuple) -> Any:
        tag = self._tag(event)
        if tag == _STR_TAG:
            return event.value  # what the str constructor returns, without its bookkeeping
        if tag == _INT_TAG:
            digits = event.value.replace("_", "").lstrip("+-")
            if len(digits) > MAX_INT_DIGITS:  # converting it could fail (past 4300 digits) or take long
                where = _config_path(path)
                if where is not None:
                    self.issue(
                        where,
                        f"the number ({len(digits):,} digits) is too large for any field (the largest "
                        "take 64-bit integers, 19 digits)",
                    )
                return Unreadable("a number too large for any field")
        return self._construct(event, tag)

    def _construct(self, event: Any, tag: str) -> Any:
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as error:  # e.g. a date YAML recognizes but the calendar has not
            raise self.fail(
                event.start_mark.line + 1,
                f"{quoted(event.value)} cannot be read as "
                f"{_TYPE_WORDS.get(tag, tag)} ({error}); quote it if it is text",
            ) from error
        finally:  # the constructor caches every node; drop it, or memory grows with the file
            self.loader.constructed_objects.pop(node, None)


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= 40 else text[:40] + "..."


def _config_path(path: tuple) -> tuple | None:
    prefix = f"{CONFIG_NAMESPACE}:"
    if len(path) >= 2 and path[0] == "config" and isinstance(path[1], str) and path[1].startswith(prefix):
        return (path[1][len(prefix) :],) + path[2:]
    return None


def _attach(parent, value) -> None:
    """Put a finished value into its parent mapping (under the pending key) or list."""
    if parent.is_map:
        parent.value[parent.key] = value
        parent.key = _NO_KEY
    else:
        parent.value.append(value)
