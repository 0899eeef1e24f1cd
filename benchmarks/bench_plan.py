"""What a user waits for: `modelplane validate`, `plan` and `explain` as whole processes, at fleet scale.

Run: venv/bin/python benchmarks/bench_plan.py [--quick] [--runs N] [--sizes 100x1000,200x2000]
     [--packing WholeNode|DeviceGranular] [--shapes uniform|varied]

The fleets are the scheduler benchmark's generator (bench_scheduler.synthetic_fleet; `--shapes varied`
gives nearly every deployment its own shape) written as stack files, as `pulumi config set` would leave them. Each command is a fresh process (imports,
reading the stack file, validating, scheduling, printing, warnings), timed as the median of N runs
with its peak memory; `plan` is timed as a user runs it (the table, and a warning with the
summary of `explain` for every short deployment), and again with `--output json`. The placement's sha256 (`plan --output json`) is printed so a change can be
shown to leave every placement byte-identical.

Targets (issue 15): plan at 200 x 2,000 under 2 s, at 400 x 4,000 under 4.5 s, and 400 x 4,000 at
most 4.6 x the 100 x 1,000 time.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scheduler import synthetic_fleet  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SIZES = [(50, 500), (100, 1000), (200, 2000), (400, 4000)]
TARGETS = {(200, 2000): 2.0, (400, 4000): 4.5}
GROWTH = ((100, 1000), (400, 4000), 4.6)  # the larger at most this many times the smaller
# As on a user's machine, Python caches bytecode.
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def write_stack_file(clusters: int, deployments: int, folder: Path, packing: str | None = None,
                     shapes: str = "uniform") -> Path:
    fleet = synthetic_fleet(clusters, deployments, packing=packing, shapes=shapes)
    document = {"config": {f"modelplane:{key}": value for key, value in fleet.items()}}
    path = folder / f"Pulumi.fleet-{clusters}x{deployments}{'' if shapes == 'uniform' else '-' + shapes}.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    # The JSON round trip unshares repeated objects: the dumper would write them as aliases,
    # which no stack file holds (and the reader refuses).
    path.write_text(yaml.dump(json.loads(json.dumps(document)), Dumper=dumper, sort_keys=False))
    return path


def run(args: list[str]) -> tuple[float, float, bytes]:
    """Wall seconds, peak RSS in MB and stdout of one `modelplane ...` process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "modelplane", *args], cwd=REPO, env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"modelplane {' '.join(args)} exited {process.returncode}")
    return wall, usage.ru_maxrss / 1024, out


def timed(args: list[str], runs: int) -> tuple[float, float, bytes]:
    results = [run(args) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results), results[0][2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="plan only, one run each")
    parser.add_argument("--sizes", help="e.g. 100x1000,400x4000 (default: 50x500 up to 400x4000)")
    parser.add_argument("--packing", choices=["DeviceGranular", "WholeNode"],
                        help="modelplane:scheduling.packing in the stack files (default: unset, the fleet's default)")
    parser.add_argument("--shapes", choices=["uniform", "varied"], default="uniform",
                        help="varied: nearly every deployment its own shape (bench_scheduler.synthetic_fleet)")
    args = parser.parse_args()
    print(f"packing: {args.packing or 'default'}, shapes: {args.shapes}")
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes.split(",")] if args.sizes else SIZES
    runs = 1 if args.quick else args.runs
    run(["--help"])  # warm-up: writes the bytecode caches
    plan_times = {}
    with tempfile.TemporaryDirectory() as folder:
        for clusters, deployments in sizes:
            path = write_stack_file(clusters, deployments, Path(folder), args.packing, args.shapes)
            size = f"{clusters:>4} x {deployments:>5}"
            wall, rss, _ = timed(["plan", "--config", str(path)], runs)
            plan_times[(clusters, deployments)] = wall
            json_wall, _, out = timed(["plan", "--config", str(path), "--output", "json"], runs)
            document = json.loads(out)
            short = [d for d in document["deployments"] if d["scheduled"] < d["replicas"]]
            print(f"{size}: plan {wall:5.2f} s, {rss:4.0f} MB peak ({path.stat().st_size / 2**20:.1f} MiB stack file, "
                  f"{len(document['replicas'])} replicas, {len(short)} deployments short); --output json "
                  f"{json_wall:5.2f} s, placement sha256 {hashlib.sha256(out).hexdigest()[:16]}", flush=True)
            if args.quick:
                continue
            wall, rss, _ = timed(["validate", "--config", str(path)], runs)
            print(f"{size}: validate {wall:5.2f} s, {rss:4.0f} MB peak", flush=True)
            if short:
                names = [f"{d['namespace']}/{d['name']}" for d in short[:20]]
                wall, rss, _ = timed(["explain", *names, "--config", str(path)], runs)
                print(f"{size}: explain of {len(names)} short deployments {wall:5.2f} s, {rss:4.0f} MB peak", flush=True)
    for size, limit in TARGETS.items():
        if size in plan_times:
            verdict = "met" if plan_times[size] < limit else "NOT met"
            print(f"target: plan at {size[0]} x {size[1]} under {limit} s: {plan_times[size]:.2f} s, {verdict}")
    small, large, factor = GROWTH
    if small in plan_times and large in plan_times:
        ratio = plan_times[large] / plan_times[small]
        print(f"target: plan at {large[0]} x {large[1]} at most {factor} x the {small[0]} x {small[1]} time: "
              f"{ratio:.2f} x, {'met' if ratio <= factor else 'NOT met'}")


if __name__ == "__main__":
    main()
