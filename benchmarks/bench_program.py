"""Wall time of the whole Pulumi program under mocks, and what importing it costs.

Run: venv/bin/python benchmarks/bench_program.py [--runs N]

Each measurement is a fresh subprocess (Pulumi's mocks and config are process-global):
* `import`: importing the program (no cloud SDK), then the three cloud backends and their SDKs;
* `program`: config -> validate -> plan -> every component registered, for `demo` and `cloud`,
  with mocks that echo inputs (no engine, no provider plugins), median of N runs.
The target is under 2 s for `demo`. A warm-up run first writes the bytecode caches, as any second
run on a user's machine has them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

IMPORT_PROBE = """
import sys, time
start = time.perf_counter()
import modelplane.infra.program
program = time.perf_counter() - start
clouds = [m for m in ("pulumi_aws", "pulumi_eks", "pulumi_gcp", "pulumi_azure_native") if m in sys.modules]
start = time.perf_counter()
import modelplane.infra.backends.eks, modelplane.infra.backends.gke, modelplane.infra.backends.aks
# The SDKs load their submodules on first attribute access: touch what the backends use.
import pulumi_aws as aws, pulumi_eks as eks, pulumi_gcp as gcp
from pulumi_azure_native import containerservice, network, resources
(aws.ec2.Vpc, aws.iam.Role, aws.efs.FileSystem, aws.eks.Addon, eks.Cluster, gcp.container.Cluster,
 gcp.compute.Network, gcp.projects.Service, containerservice.ManagedCluster, network.VirtualNetwork,
 resources.ResourceGroup)
sdks = time.perf_counter() - start
print(program, sdks, ",".join(clouds))
"""

PROGRAM_PROBE = """
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, {tests!r})
import pulumi
from pulumi.runtime.sync_await import _sync_await
from pulumi.runtime.stack import run_pulumi_func
from conftest import OUTPUT_HOOKS  # the suite's stand-ins for what providers compute
from modelplane.api.stackfile import read_stack_file

class Echo(pulumi.runtime.Mocks):
    count = 0
    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {{"name": args.name, "outputs": {{}}, "secretOutputNames": []}}
        Echo.count += 1
        hook = OUTPUT_HOOKS.get(args.typ)
        return args.name + "-id", {{**args.inputs, **(hook(dict(args.inputs)) if hook else {{}})}}
    def call(self, args):
        hook = OUTPUT_HOOKS.get(args.token)
        return hook(dict(args.args)) if hook else {{}}

pulumi.runtime.set_mocks(Echo(), project="modelplane", stack={stack!r}, preview=False, organization="organization")
config = read_stack_file(__import__("pathlib").Path({stack_file!r})).config
pulumi.runtime.set_all_config({{"modelplane:" + k: json.dumps(v) for k, v in config.items()}})
from modelplane.infra import program
_sync_await(run_pulumi_func(lambda: program.run()))
print(time.perf_counter() - start, Echo.count)
"""


# As on a user's machine, Python caches bytecode (some sandboxes set PYTHONDONTWRITEBYTECODE,
# which makes every run recompile modelplane's own modules).
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def probe(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True, env=ENV)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    probe(IMPORT_PROBE)  # warm-up: writes the bytecode caches
    imports = [probe(IMPORT_PROBE) for _ in range(args.runs)]
    program = statistics.median(float(i[0]) for i in imports)
    sdks = statistics.median(float(i[1]) for i in imports)
    loaded = imports[0][2] if len(imports[0]) > 2 else ""
    print(f"import modelplane.infra.program: {program:.2f} s (cloud SDKs loaded: {loaded or 'none'})")
    print(f"import the EKS, GKE and AKS backends (their cloud SDKs): {sdks:.2f} s more")
    for stack in ("demo", "cloud"):
        code = PROGRAM_PROBE.format(tests=str(REPO / "tests"), stack=stack,
                                    stack_file=str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
        runs = [probe(code) for _ in range(args.runs)]
        wall = statistics.median(float(r[0]) for r in runs)
        print(f"program under mocks, stack {stack}: {wall:.2f} s wall (imports included), "
              f"{runs[0][1]} resources registered")


if __name__ == "__main__":
    main()
