"""scale, drain and undrain: the edit of the stack file under its lock, checked, written atomically (or shown with --dry-run), then what to run next."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import shlex
import sys
import tempfile
from pathlib import Path

from . import runbook, views
from .api import ConfigError, Fleet, locked_write
from .api.stackfile import StackFile, read_stack_file
from .cli_common import EXIT_OK, load_file, resolve_stack, shown, stack_name, warn
from .scheduling import load_previous, schedule


def cmd_scale(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.scale(text, args.deployment, args.replicas))


def cmd_drain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.drain(text, args.cluster, args.effect, args.key))


def cmd_undrain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.undrain(text, args.cluster, args.key))


def _checked_text(path: Path, text: str) -> tuple[StackFile, Fleet]:
    """`load_file` on `text` as if it were `path`'s content, without touching `path` (for --dry-run)."""
    with tempfile.TemporaryDirectory(prefix="modelplane-dry-run-") as folder:
        copy = Path(folder) / path.name
        copy.write_text(text, encoding="utf-8")
        return load_file(copy)


def _edit_stack(args: argparse.Namespace, make_edit) -> int:
    """Edit the stack file in place: validated like `validate` before it is written, atomically.

    With --dry-run the same checks run on the edited text, which is shown as a diff; nothing is written.
    """
    path = resolve_stack(args)
    edited = _edit_under_lock(args, path, make_edit)
    if edited is None:
        return EXIT_OK
    text, edit, stack_file, fleet, previous = edited
    warn(dataclasses.replace(stack_file, path=path), fleet)
    stack = args.stack or stack_name(path)
    flags = [f"--stack {shlex.quote(stack)}"] + ([] if args.stack else [f"--config-file {shlex.quote(str(path))}"])
    _print_edit(args, path, text, edit, flags)
    _print_plan_and_next(args, path, schedule(fleet, previous), previous, flags)
    return EXIT_OK


def _edit_under_lock(args: argparse.Namespace, path: Path, make_edit):
    """(old text, the edit, the edited stack file and fleet, the previous placement), or None when nothing changes.

    From reading to replacing the lock is held: a concurrent scale/drain/undrain waits, no edit is lost.
    """
    with locked_write.locked(path):
        original = read_stack_file(path)  # a missing file or broken YAML stops here
        previous = load_previous(args.previous)  # so does a bad --previous: nothing is written
        text = locked_write.read_for_edit(path)
        try:
            edit = make_edit(text)
        except ConfigError as error:
            error.stack_file = original
            raise
        if not edit.changed:
            print(f"{shown(path)}: {edit.note}; nothing changed")
            return None
        try:
            if args.dry_run:
                stack_file, fleet = _checked_text(path, edit.text)
            else:
                stack_file, fleet = locked_write.write_atomically(path, edit.text, text, load_file)
        except ConfigError as error:
            error.stack_file = original  # the file is untouched: point at its lines
            error.unchanged = True
            raise
    return text, edit, stack_file, fleet, previous


def _print_edit(args: argparse.Namespace, path: Path, text: str, edit, flags: list[str]) -> None:
    """The change (a diff with --dry-run), and the same edit as `pulumi config` commands."""
    if args.dry_run:
        print(f"dry run: {shown(path)} would change as follows; nothing written")
        sys.stdout.writelines(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                edit.text.splitlines(keepends=True),
                f"{shown(path)}",
                f"{shown(path)} (edited)",
            )
        )
    else:
        print(f"edited {shown(path)}:")
    for change in edit.changes:
        print(f"  {change}")
    print("the same edit with the Pulumi CLI:")
    for command in edit.commands:
        words = command.words()
        print(
            f"  pulumi config {words[0]} {' '.join(flags)} {words[1]} '{words[2]}'"
            + "".join(f" {shlex.quote(w)}" for w in words[3:])
        )


def _print_plan_and_next(args: argparse.Namespace, path: Path, result, previous, flags: list[str]) -> None:
    """What the plan does with the edited stack, then the next command to run."""
    target = args.deployment if args.command == "scale" else args.cluster
    print(
        f"plan against {shown(args.previous)}:"
        if args.previous
        else "plan as a first deployment (no --previous placement given):"
    )
    for line in views.plan_lines(result, previous, args.command, target):
        print(f"  {line}")
    source = f"--stack {shlex.quote(args.stack)}" if args.stack else f"--config {shlex.quote(shown(path))}"
    placement = shlex.quote(shown(args.previous)) if args.previous else "<placement.json>"
    if args.dry_run:
        print("next: the same command without --dry-run writes it")
        return
    print(
        f"next: pulumi up {' '.join(flags)}  "
        f"(to preview the placement offline: modelplane plan {source} --previous {placement})"
    )
