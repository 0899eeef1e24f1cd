"""Run the project's Pulumi program with the real engine: `python -m tests.e2e.engine OP PROJECT_DIR [--expect-no-changes]`.

Why the Automation API and not `pulumi up` with the Python language host: the language host
(`github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3`) is an untagged nested module
that the Go module proxy does not serve (`@v/list` answers "This module version is not available"),
and nothing else here carries it. The Automation API hosts the language runtime itself, so the real
CLI (engine), the real provider and the project's own program (`modelplane.infra.program.run`, what
`__main__.py` calls) run exactly as under `pulumi up`; only the process that hosts the program differs.
Each operation runs in a fresh process (this one), as each `pulumi up` does.

Prints one JSON document: the change summary, the engine events (op, urn, type per step, and every
diagnostic) and, on failure, the error.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from .pulumi_cli import ENGINE, _descendants

STACK = "e2e"


def _program() -> None:
    from modelplane.infra.program import run
    run()


def _event(event: auto.EngineEvent) -> dict[str, Any] | None:
    for kind, field in (("pre", "resource_pre_event"), ("done", "res_outputs_event"), ("failed", "res_op_failed_event")):
        body = getattr(event, field, None)
        if body is not None:
            metadata = body.metadata
            op = getattr(metadata.op, "value", metadata.op)
            return {"seq": event.sequence, "kind": kind, "op": op, "urn": metadata.urn, "type": metadata.type}
    diagnostic = event.diagnostic_event
    if diagnostic is not None:
        return {"seq": event.sequence, "kind": "diagnostic", "severity": diagnostic.severity,
                "urn": diagnostic.urn or "", "message": diagnostic.message}
    return None


def _kill_the_engine() -> int | None:
    """SIGKILL this process's `pulumi` child (the engine the Automation API started) and its plugins: a crash of the
    machine or the job, not a cancel (no process gets to save or clean up)."""
    engine = next((pid for pid, name, *_ in _descendants(os.getpid()) if name == ENGINE), None)
    if engine is None:
        return None
    for pid, *_ in _descendants(engine):  # the engine first, then its providers
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return engine


TERMINAL_SIZE = (48, 160)  # rows, columns: a maximised terminal window on a laptop
# `pulumi` as a user's terminal runs it: the Automation API always adds --non-interactive and pipes the output, so the
# engine would never draw the interactive progress display (a row per resource, redrawn as steps go by).
TERMINAL_SHIM = """#!/bin/bash
args=()
for arg in "$@"; do [[ $arg == --non-interactive ]] || args+=("$arg"); done
case ${args[0]} in
  up|preview|destroy|refresh) exec @PYTHON@ @TERMINAL@ @ROWS@ @COLUMNS@ "$REAL_PULUMI" "${args[@]}" ;;
  *) exec "$REAL_PULUMI" "$@" ;;  # stack output, history...: as the Automation API asked
esac
"""


def _in_a_terminal(stack: auto.Stack) -> None:
    """Run the stack's `pulumi` operations in a terminal of TERMINAL_SIZE (tests/e2e/terminal.py)."""
    command = stack.workspace.pulumi_command
    real = shutil.which(command.command) or command.command
    folder = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"terminal-{os.getpid()}")  # the run's private TMPDIR
    os.makedirs(folder, exist_ok=True)
    shim = os.path.join(folder, "pulumi")
    with open(shim, "w") as out:
        out.write(TERMINAL_SHIM.replace("@PYTHON@", shlex.quote(sys.executable))
                  .replace("@TERMINAL@", shlex.quote(str(Path(__file__).with_name("terminal.py"))))
                  .replace("@ROWS@", str(TERMINAL_SIZE[0])).replace("@COLUMNS@", str(TERMINAL_SIZE[1])))
    os.chmod(shim, 0o755)
    os.environ["REAL_PULUMI"] = real
    command.command = shim


SELECTIONS = {"target": "MODELPLANE_E2E_TARGET", "exclude": "MODELPLANE_E2E_EXCLUDE"}


def selection(environ: Mapping[str, str] = os.environ) -> dict[str, list[str]]:
    """`pulumi up/preview --target/--exclude`, from MODELPLANE_E2E_TARGET / MODELPLANE_E2E_EXCLUDE: each a JSON list of
    URNs or globs (`*`, `**`). Measures what the engine does with resources outside the operation (docs/e2e.md)."""
    out: dict[str, list[str]] = {}
    for option, variable in SELECTIONS.items():
        text = environ.get(variable)
        if not text:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{variable}: not JSON ({error}); give a list of URNs or globs") from None
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise SystemExit(f"{variable}: give a JSON list of URNs or globs, e.g. '[\"urn:pulumi:e2e::modelplane::**\"]'")
        out[option] = value
    return out


VIA_MODELPLANE_UP = "MODELPLANE_E2E_MODELPLANE_UP"


def _as_modelplane_up(project: str, selected: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """With MODELPLANE_E2E_MODELPLANE_UP=1: what `modelplane up` does before it runs `pulumi up` (modelplane/cli_up.py),
    the same `up` then run by the Automation API. `decide_seconds` is its part of what the user waits for."""
    from modelplane.cli_up import decide_for_stack, pulumi_binary, start_update

    started = time.monotonic()
    decision = decide_for_stack(pulumi_binary(), STACK, Path(project))
    flags = start_update(decision, None)
    out.update(decide_seconds=time.monotonic() - started, skipped=sorted(decision.skip), notes=decision.notes)
    return {**selected, "message": flags["message"][0], "exclude": [*selected.get("exclude", []), *flags["exclude"]]}


def _sample_this_process(prefix: str | None, op: str) -> subprocess.Popen | None:
    """With MODELPLANE_E2E_PROGRAM_PROFILE=PREFIX, py-spy (if on PATH) samples this process, the program's host, into
    PREFIX.<op>.<pid>.txt (collapsed stacks, every thread; `py-spy record --format raw`)."""
    py_spy = shutil.which("py-spy") if prefix else None
    if py_spy is None:
        return None
    return subprocess.Popen([py_spy, "record", "--pid", str(os.getpid()), "--format", "raw", "--threads", "--idle",
                             "--rate", "200", "--output", f"{prefix}.{op}.{os.getpid()}.txt"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=["preview", "up", "destroy", "refresh"])
    parser.add_argument("project")
    parser.add_argument("--expect-no-changes", action="store_true")
    parser.add_argument("--kill-engine-after", type=int, metavar="N",
                        help="SIGKILL the engine once N resource steps have completed (a crash in the middle of an up)")
    parser.add_argument("--no-events", action="store_true",
                        help="no engine event stream: what a user's `pulumi up` does not have (the harness parses each event)")
    parser.add_argument("--kill-matching", default="", metavar="TEXT",
                        help="count only the steps whose URN contains TEXT toward --kill-engine-after")
    parser.add_argument("--kill-outside", default="", metavar="TEXT",
                        help="and kill only while no step whose URN contains TEXT is in flight (e.g. no Helm operation, "
                             "which a kill leaves pending on the cluster: docs/runbook.md)")
    args = parser.parse_args(argv)

    stack = auto.select_stack(STACK, project_name="modelplane", program=_program,
                              opts=auto.LocalWorkspaceOptions(work_dir=args.project))
    if os.environ.get("MODELPLANE_E2E_TERMINAL"):
        _in_a_terminal(stack)
    profile = os.environ.get("MODELPLANE_E2E_ENGINE_PROFILE")
    command_seconds: list[float] = []
    run_cli = stack._run_pulumi_cmd_sync

    def timed_cli(cli_args: list[str], *rest: Any) -> Any:
        """The `pulumi <op>` command itself, timed: what a user waits for. The Automation API runs `pulumi stack output`
        and `pulumi stack history` after an `up` (another read of the whole state), which a user's `pulumi up` does not."""
        if profile:  # the engine's own CPU profile (`pulumi --profiling PREFIX` writes PREFIX.<pid>.cpu); go tool pprof reads it
            cli_args = [*cli_args, "--profiling", f"{profile}.{args.op}"]
        started = time.monotonic()
        try:
            return run_cli(cli_args, *rest)
        finally:
            command_seconds.append(time.monotonic() - started)

    stack._run_pulumi_cmd_sync = timed_cli  # type: ignore[method-assign]
    selected: dict[str, Any] = selection()  # a malformed one stops the run before anything starts
    out: dict[str, Any] = {"op": args.op, "ok": True}
    if os.environ.get(VIA_MODELPLANE_UP) and args.op in ("preview", "up"):
        selected = _as_modelplane_up(args.project, selected, out)
    sampler = _sample_this_process(os.environ.get("MODELPLANE_E2E_PROGRAM_PROFILE"), args.op)
    recorded: list[dict[str, Any]] = []
    completed = 0

    in_flight: set[str] = set()  # URNs of the steps --kill-outside names that started and did not end

    def on_event(event: auto.EngineEvent) -> None:
        nonlocal completed
        item = _event(event)
        if item is None:
            return
        recorded.append(item)
        if item["kind"] not in ("pre", "done", "failed") or item["op"] in ("same", "read"):
            return
        if args.kill_outside and args.kill_outside in item["urn"]:
            (in_flight.add if item["kind"] == "pre" else in_flight.discard)(item["urn"])
        if item["kind"] == "done" and args.kill_matching in item["urn"]:
            completed += 1
        if (item["kind"] != "pre" and args.kill_engine_after and completed >= args.kill_engine_after
                and not in_flight and "killed" not in out):
            out["killed"] = {"pid": _kill_the_engine(), "after_steps": completed, "at_event": item["seq"]}
    try:
        if args.op == "preview":
            result = stack.preview(on_event=None if args.no_events else on_event, expect_no_changes=args.expect_no_changes,
                                   **selected)
            out["changes"] = dict(result.change_summary)
            out["stdout"] = result.stdout
        elif args.op == "up":
            result = stack.up(on_event=None if args.no_events else on_event, expect_no_changes=args.expect_no_changes,
                              **selected)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
        elif args.op == "destroy":
            result = stack.destroy(on_event=None if args.no_events else on_event)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
        else:
            result = stack.refresh(on_event=on_event)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
    except auto.CommandError as error:
        out.update(ok=False, error=str(error))
    finally:
        if sampler is not None:  # py-spy writes its profile when interrupted
            sampler.send_signal(signal.SIGINT)
            sampler.wait(timeout=60)
    out["events"] = recorded
    out["command_seconds"] = command_seconds[0] if command_seconds else None
    json.dump(out, sys.stdout)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
