"""What every command shares: exit codes, which stack file it reads (--stack, --config, else Pulumi's selected stack), reading it, and its warnings located by line."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from .api import ConfigError, Fleet, ModelplaneError, load_fleet
from .api.errors import SourceFile
from .api.stackfile import StackFile, find_project_dir, read_stack_file, stack_file_path

EXIT_OK, EXIT_INVALID = 0, 2


EXIT_SHORT = 3  # plan --detailed-exitcode: valid, but a deployment is short of replicas (2 stays "bad input")


EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141  # 128 + SIGINT, 128 + SIGPIPE: what a shell reports for them


def stack_short_name(stack: str) -> str:
    """`org/demo` and `org/project/demo` (Pulumi's fully-qualified names) -> `demo`: the stack file's name."""
    return stack.rsplit("/", 1)[-1] if re.fullmatch(r"[^/]+(/[^/]+){1,2}", stack) else stack


def pulumi_workspace_file(project_dir: Path, env=os.environ) -> Path:
    """Where the Pulumi CLI records `pulumi stack select` for this project.

    `$PULUMI_HOME` (else ~/.pulumi) `/workspaces/<project name>-<sha1 of the Pulumi.yaml path>-workspace.json`,
    a JSON object whose `stack` is the selected stack (pulumi's sdk/go/common/workspace: settingsPath).
    """
    project_file = project_dir / "Pulumi.yaml"
    name = _project_name(project_file)
    home = Path(env["PULUMI_HOME"]) if env.get("PULUMI_HOME") else Path(env.get("HOME") or Path.home()) / ".pulumi"
    digest = hashlib.sha1(str(project_file).encode()).hexdigest()
    return home / "workspaces" / f"{name}-{digest}-workspace.json"


def _project_name(project_file: Path) -> str:
    import yaml

    try:
        document = yaml.safe_load(project_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return "modelplane"
    name = document.get("name") if isinstance(document, dict) else None
    return name if isinstance(name, str) and name else "modelplane"


def selected_stack(project_dir: Path, env=os.environ) -> str | None:
    """The stack `pulumi stack select` chose for the project in `project_dir`, if any."""
    candidates = [project_dir]
    logical = os.environ.get("PWD")  # the Pulumi CLI hashes the path as its working directory spells it
    if logical and Path(logical).resolve() == Path.cwd().resolve():
        relative = os.path.relpath(project_dir, Path.cwd())
        candidates.insert(0, Path(os.path.normpath(os.path.join(logical, relative))))
    for directory in candidates:
        try:
            settings = json.loads(pulumi_workspace_file(directory, env).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stack = settings.get("stack") if isinstance(settings, dict) else None
        if isinstance(stack, str) and stack.strip():
            return stack.strip()
    return None


def resolve_stack(args: argparse.Namespace) -> Path:
    """The stack file to read; sets `args.stack` to the selected stack when neither --stack nor --config was given."""
    if args.config is not None:
        return args.config
    project_dir = find_project_dir(Path.cwd())
    if project_dir is None:
        raise ModelplaneError("no Pulumi.yaml here or above; run from the project folder or pass --config FILE")
    if args.stack is None:
        args.stack = selected_stack(project_dir)
        if args.stack is None:
            raise ModelplaneError(
                f"no stack given and none selected: pass -s/--stack NAME or --config FILE, or select "
                f"one with `pulumi stack select NAME` (recorded in "
                f"{pulumi_workspace_file(project_dir)})"
            )
    return stack_file_path(stack_short_name(args.stack), project_dir)


def resolve_stack_file(stack: str | None, config: Path | None) -> Path:
    return resolve_stack(argparse.Namespace(stack=stack, config=config))


def load(args: argparse.Namespace) -> tuple[StackFile, Fleet]:
    return load_file(resolve_stack(args))


def load_file(path: Path) -> tuple[StackFile, Fleet]:
    stack_file = read_stack_file(path)
    issues = list(stack_file.issues)
    fleet = None
    try:
        fleet = load_fleet(stack_file.config, origin="stack-file")
    except ConfigError as error:
        issues += error.issues
    if issues or fleet is None:
        invalid = ConfigError(issues)
        invalid.stack_file = stack_file  # lets the printer add line numbers
        raise invalid
    return stack_file, fleet


def shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def warn(stack_file: StackFile, fleet: Fleet) -> None:
    for warning in fleet.warnings:
        print(f"warning: {located(stack_file, warning)}", file=sys.stderr)
    if stack_file.environments:
        print(
            f"warning: {shown(stack_file.path)} imports Pulumi ESC environments ({', '.join(stack_file.environments)}); "
            "modelplane reads only the file's own config:, so values those environments set are not seen here "
            "(`pulumi up` sees them): to check them, `pulumi config --show-secrets --json` shows the merged config",
            file=sys.stderr,
        )


def located(stack_file: SourceFile | None, issue) -> str:
    line = stack_file.line_of(issue.path) if stack_file else None
    return f"{issue}" + (f"  [{shown(stack_file.path)}:{line}]" if stack_file and line else "")


def stack_name(path: Path) -> str:
    match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    return match.group(1) if match else "<stack>"
