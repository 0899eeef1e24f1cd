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
import json
import sys
from typing import Any

from pulumi import automation as auto

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=["preview", "up", "destroy", "refresh"])
    parser.add_argument("project")
    parser.add_argument("--expect-no-changes", action="store_true")
    args = parser.parse_args(argv)

    stack = auto.select_stack(STACK, project_name="modelplane", program=_program,
                              opts=auto.LocalWorkspaceOptions(work_dir=args.project))
    recorded: list[dict[str, Any]] = []

    def on_event(event: auto.EngineEvent) -> None:
        item = _event(event)
        if item is not None:
            recorded.append(item)

    out: dict[str, Any] = {"op": args.op, "ok": True}
    try:
        if args.op == "preview":
            result = stack.preview(on_event=on_event, expect_no_changes=args.expect_no_changes)
            out["changes"] = dict(result.change_summary)
            out["stdout"] = result.stdout
        elif args.op == "up":
            result = stack.up(on_event=on_event, expect_no_changes=args.expect_no_changes)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
        elif args.op == "destroy":
            result = stack.destroy(on_event=on_event)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
        else:
            result = stack.refresh(on_event=on_event)
            out["changes"] = dict(result.summary.resource_changes or {})
            out["stdout"] = result.stdout
    except auto.CommandError as error:
        out.update(ok=False, error=str(error))
    out["events"] = recorded
    json.dump(out, sys.stdout)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
