"""Everything a behaviour-neutral change must leave byte-identical, written to one folder per tree.

Run: venv/bin/python benchmarks/snapshot_outputs.py --tree DIR --out SNAPSHOT_DIR
then `diff -r SNAPSHOT_DIR_BEFORE SNAPSHOT_DIR_AFTER`.

DIR is a checkout of the project (e.g. `git worktree add /tmp/before <commit>`); every command runs
as a fresh process with `PYTHONPATH=DIR`, so one venv serves both trees. Written per stack (`demo`,
`cloud`, and the scheduler benchmark's synthetic fleets as stack files, as benchmarks/bench_plan.py
writes them):
* `registrations-STACK.json`: every resource the Pulumi program registers under the test suite's
  recording mocks (type, name, inputs, parent, provider, dependencies, secrets and options), by URN
  (dependencies sorted: the SDK collects them in a set);
* `plan-STACK.txt` / `plan-STACK.json`: `modelplane plan` (table, `-o json`): stdout, stderr, exit code;
* `render-STACK.txt`: every file `modelplane render --out` writes, with its path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

STACKS = ["demo", "cloud"]
PROGRAM_FLEETS = ["10x50"]  # bench_program's fleets (the e2e front door, Existing clusters)
PLAN_FLEETS = [(10, 50), (50, 500), (100, 1000)]  # bench_plan's (as stack files)
RENDER_FLEETS = [(10, 50)]

# Runs the program once under the suite's recording monitor and prints every registration as JSON.
RECORD = """
import dataclasses, json, sys
sys.path[:0] = [{tests!r}, {benchmarks!r}]
import pulumi
from pulumi.runtime.sync_await import _sync_await
from pulumi.runtime.stack import run_pulumi_func
try:
    from pulumi_recording import MOCKS, MONITOR  # after issue 28
except ImportError:
    from conftest import MOCKS, MONITOR
from bench_program import stack_config
from modelplane.infra import program

pulumi.runtime.set_mocks(MOCKS, project="modelplane", stack="record", preview=False, monitor=MONITOR,
                         organization="organization")
config, secret_keys = stack_config({stack!r})
pulumi.runtime.set_all_config({{"modelplane:" + k: json.dumps(v) for k, v in config.items()}},
                              ["modelplane:" + k for k in secret_keys])
_sync_await(run_pulumi_func(lambda: program.run()))
records = {{r.urn: dataclasses.asdict(r) for r in MONITOR.registrations}}
for record in records.values():  # sets in the SDK (their order follows str hashes, random per process)
    record["dependencies"].sort()
    for urns in record["property_dependencies"].values():
        urns.sort()
print(json.dumps(records, indent=1, sort_keys=True, default=sorted))
"""


def run(tree: Path, args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    tree, out = args.tree.resolve(), args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(tree)}
    sys.path[:0] = [str(tree), str(tree / "benchmarks")]
    from bench_plan import write_stack_file  # the tree's own generator

    for stack in STACKS + PROGRAM_FLEETS:
        code = RECORD.format(tests=str(tree / "tests"), benchmarks=str(tree / "benchmarks"), stack=stack)
        (out / f"registrations-{stack}.json").write_text(run(tree, ["-c", code], env))
    with tempfile.TemporaryDirectory() as scratch:
        sources = {stack: ["--stack", stack] for stack in STACKS}
        for clusters, deployments in PLAN_FLEETS:
            path = write_stack_file(clusters, deployments, Path(scratch))
            sources[f"{clusters}x{deployments}"] = ["--config", str(path)]
        for name, source in sources.items():
            text = run(tree, ["-m", "modelplane", "plan", *source], env).replace(scratch, "SCRATCH")
            (out / f"plan-{name}.txt").write_text(text)
            text = run(tree, ["-m", "modelplane", "plan", *source, "-o", "json"], env).replace(scratch, "SCRATCH")
            (out / f"plan-{name}.json").write_text(text)
        render = STACKS + [f"{c}x{d}" for c, d in RENDER_FLEETS]
        for name in render:
            folder = Path(scratch) / f"render-{name}"
            text = run(tree, ["-m", "modelplane", "render", *sources[name], "--out", str(folder)], env)
            files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
            text += "".join(f"=== {p.relative_to(folder)}\n{p.read_text()}" for p in files)
            (out / f"render-{name}.txt").write_text(text.replace(scratch, "SCRATCH"))
    print(f"{len(list(out.iterdir()))} files in {out}")


if __name__ == "__main__":
    main()
