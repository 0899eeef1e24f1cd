"""Measure the real engine on a 10-cluster x 50-deployment fleet: `python -m tests.e2e.scale --work DIR ...`.

The fleet is the scheduler benchmark's generator (benchmarks/bench_scheduler.py) with every cluster
`source: Existing` on a local control plane, a front door (as the e2e stack has) and a ModelService
per deployment, and the generator's NVIDIA driver renamed to the dra-example-driver's
`gpu.example.com` (its stand-in chart creates that DeviceClass; every selector is renamed with it).
Its multi-node replicas are LeaderWorkerSets, which the LeaderWorkerSet controller beside each
cluster (tests/e2e/lws_controller.py) makes Available, as in the scenario.
Prints preview / up / no-op up / destroy wall times, resources per second and peak memory.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

from .scenario import REPO, TEMPLATE, Scenario

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_scheduler import synthetic_fleet  # noqa: E402


def scale_stack(clusters: int, deployments: int) -> dict:
    fleet = json.loads(json.dumps(synthetic_fleet(clusters, deployments)).replace("gpu.nvidia.com", "gpu.example.com"))
    front_door = yaml.safe_load(TEMPLATE.read_text())["config"]["modelplane:inferenceGateway"]
    for cluster in fleet["inferenceClusters"].values():
        cluster["cluster"] = {"source": "Existing", "existing": {"kubeconfig": {"secure": "v1:set-by-the-e2e-harness"}}}
    services = {ns: {name: {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]}
                     for name in deployments_of} for ns, deployments_of in fleet["modelDeployments"].items()}
    return {"config": {f"modelplane:{key}": value for key, value in fleet.items()}
            | {"modelplane:inferenceGateway": front_door, "modelplane:modelServices": services}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--crds", type=Path, required=True)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--deployments", type=int, default=50)
    args = parser.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    template = work / "Pulumi.scale.yaml"
    template.write_text(yaml.safe_dump(scale_stack(args.clusters, args.deployments), sort_keys=False))
    scenario = Scenario(work, args.bin.resolve(), args.venv.resolve(), args.crds.resolve(), template)
    report = scenario.report
    try:
        scenario.start()
        plan = scenario.plan()
        scheduled = sum(d["scheduled"] for d in plan["deployments"])
        report.note(f"{args.clusters} clusters x {args.deployments} deployments: {scheduled} replicas scheduled")
        preview = scenario.engine("pulumi preview", "preview")
        report.check("preview succeeds", preview.result.get("ok"))
        up = scenario.engine("pulumi up", "up", timeout=3600)
        report.check("up succeeds", up.result.get("ok"))
        if up.result.get("ok"):
            scenario.second_up_changes_nothing()
        started = time.monotonic()
        destroy = scenario.engine("pulumi destroy", "destroy", timeout=3600)
        report.check("destroy succeeds", destroy.result.get("ok"))
        report.note(f"destroy took {time.monotonic() - started:.0f} s")
    finally:
        memory = scenario.control_planes.peak_memory() if scenario.control_planes.endpoints else {}
        if memory:
            report.note(f"control planes: {len(memory)} processes, peak RSS {sum(memory.values()) / 2**30:.1f} GiB in all")
        scenario.close()
    print(report.summary(), flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
