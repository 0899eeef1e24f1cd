"""Read a Pulumi stack file (`stacks/Pulumi.<stack>.yaml`) without the Pulumi CLI.

`secure:` values stay encrypted (only the CLI can decrypt them) and become SecretValue
placeholders; duplicate keys, which YAML would silently collapse, are errors; and every value
remembers its line, so a config error can say which line to fix.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .common import SecretValue, decode_top_level
from .errors import CONFIG_NAMESPACE, ConfigIssue, PathPart, StackFileError

PROJECT_FILE = "Pulumi.yaml"


@dataclass(frozen=True)
class StackFile:
    path: Path
    config: dict[str, Any]  # `modelplane:` keys, prefix removed
    lines: dict[tuple[PathPart, ...], int] = field(default_factory=dict)
    issues: tuple[ConfigIssue, ...] = ()  # problems YAML itself would hide (duplicate keys)

    def line_of(self, path: tuple[PathPart, ...]) -> int | None:
        """Line of the deepest existing value on `path` (a missing field points at its parent)."""
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
    project = yaml.safe_load((project_dir / PROJECT_FILE).read_text()) or {}
    config_dir = project.get("stackConfigDir") or "."
    return project_dir / config_dir / f"Pulumi.{stack}.yaml"


def read_stack_file(path: Path) -> StackFile:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except OSError as error:
        raise StackFileError(f"cannot read stack file {path}: {error.strerror}") from None
    loader = yaml.SafeLoader(text)
    issues: list[ConfigIssue] = []
    lines: dict[tuple[PathPart, ...], int] = {}
    try:
        node = loader.get_single_node()
        document = _build(loader, node, (), lines, issues) if node is not None else {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise StackFileError(f"{path} is not valid YAML{where}: {getattr(error, 'problem', error)}") from None
    finally:
        loader.dispose()
    if not isinstance(document, dict):
        raise StackFileError(f"{path} must be a mapping with a 'config:' section")
    raw_config = document.get("config") or {}
    if not isinstance(raw_config, dict):
        raise StackFileError(f"{path}: 'config:' must be a mapping of keys such as modelplane:inferenceClusters")
    config: dict[str, Any] = {}
    config_lines: dict[tuple[PathPart, ...], int] = {}
    prefix = f"{CONFIG_NAMESPACE}:"
    for key, value in raw_config.items():
        if isinstance(key, str) and key.startswith(prefix):
            config[key[len(prefix):]] = decode_top_level(value)
    for loc, line in lines.items():
        if len(loc) >= 2 and loc[0] == "config" and isinstance(loc[1], str) and loc[1].startswith(prefix):
            config_lines[(loc[1][len(prefix):],) + loc[2:]] = line
    return StackFile(path, config, config_lines, tuple(issues))


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: tuple, lines: dict, issues: list[ConfigIssue]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                key = str(key)
            if key in result:
                config_path = _config_path(path + (key,))
                where = f" (line {key_node.start_mark.line + 1})"
                if config_path:
                    issues.append(ConfigIssue(config_path, f"is defined twice{where}; YAML keeps only the last, so merge "
                                                           "the two or rename one"))
            result[key] = _build(loader, value_node, path + (key,), lines, issues)
        if set(result) == {"secure"} and isinstance(result["secure"], str):
            return SecretValue(ciphertext=result["secure"])
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, path + (i,), lines, issues) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def _config_path(path: tuple) -> tuple | None:
    prefix = f"{CONFIG_NAMESPACE}:"
    if len(path) >= 2 and path[0] == "config" and isinstance(path[1], str) and path[1].startswith(prefix):
        return (path[1][len(prefix):],) + path[2:]
    return None
