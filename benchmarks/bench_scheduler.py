"""How long a whole-fleet plan takes, and how it grows with each dimension.

Run: venv/bin/python benchmarks/bench_scheduler.py [--quick] [--packing WholeNode|DeviceGranular]

A synthetic fleet: clusters with 4 pools each (drawn from 6 GPU classes), deployments with 3
replicas each and realistic selectors (memory thresholds, architectures, versions, some
Leader+Worker gangs). Prints the time to validate the config, the time to schedule, and the CEL
evaluations performed against the questions asked.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import time

from modelplane.api import load_fleet
from modelplane.devices import SelectorCache
from modelplane.scheduling import schedule

GPUS = [("h100", "81559Mi", "Hopper", "9.0.0", 8), ("h200", "143771Mi", "Hopper", "9.0.0", 8),
        ("a100", "81920Mi", "Ampere", "8.0.0", 8), ("l4", "23034Mi", "Ada Lovelace", "8.9.0", 1),
        ("l40s", "46068Mi", "Ada Lovelace", "8.9.0", 4), ("a10g", "23028Mi", "Ampere", "8.6.0", 1)]
SELECTORS = [
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{mem}")) >= 0',
    'device.attributes["gpu.nvidia.com"].architecture == "{arch}"',
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("{cc}"))',
]


def synthetic_fleet(clusters: int, deployments: int, seed: int = 7, packing: str | None = None) -> dict:
    rng = random.Random(seed)
    classes = {}
    for name, memory, arch, cc, count in GPUS:
        classes[name] = {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                      "count": count, "attributes": {"architecture": {"string": arch},
                                                                     "cudaComputeCapability": {"version": cc}},
                                      "capacity": {"memory": {"value": memory}}}]}
    fleet_clusters = {}
    for c in range(clusters):
        pools = [{"name": f"pool-{p}", "className": rng.choice(GPUS)[0], "nodeCount": rng.randint(2, 12)}
                 for p in range(4)]
        fleet_clusters[f"cluster-{c:04d}"] = {"labels": {"modelplane.ai/region": f"region-{c % 8}"},
                                              "cluster": {"source": "Kind"}, "nodePools": pools}
    fleet_deployments: dict = {}
    for d in range(deployments):
        mem = rng.choice(["16Gi", "20Gi", "40Gi", "70Gi", "120Gi"])
        selectors = [{"cel": SELECTORS[0].format(mem=mem)}]
        if rng.random() < 0.3:
            selectors.append({"cel": SELECTORS[1].format(arch=rng.choice(["Hopper", "Ampere", "Ada Lovelace"]))})
        if rng.random() < 0.2:
            selectors.append({"cel": SELECTORS[2].format(cc=rng.choice(["8.0.0", "8.5.0"]))})
        request = {"name": "gpu", "count": rng.choice([1, 1, 1, 2]), "selectors": selectors}
        container = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                                              "args": [f"--model=example/model-{d:05d}"]}]}}  # the name it answers
        if rng.random() < 0.15:
            members = [{"role": "Leader", "nodeSelector": {"devices": [request]}, "template": container},
                       {"role": "Worker", "worker": {"nodes": rng.randint(1, 2)}, "nodeSelector": {"devices": [request]},
                        "template": container}]
        else:
            members = [{"nodeSelector": {"devices": [request]}, "template": container}]
        spec: dict = {"engines": [{"name": "engine", "members": members}]}
        if rng.random() < 0.3:
            spec["clusterSelector"] = {"matchLabels": {"modelplane.ai/region": f"region-{rng.randrange(8)}"}}
        fleet_deployments.setdefault(f"team-{d % 20:02d}", {})[f"model-{d:05d}"] = {"replicas": 3, "template": {"spec": spec}}
    fleet = {"inferenceClasses": classes, "inferenceClusters": fleet_clusters, "modelDeployments": fleet_deployments}
    if packing is not None:
        fleet["scheduling"] = {"packing": packing}
    return fleet


def _median(run, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def measure(clusters: int, deployments: int, packing: str | None = None) -> None:
    config = synthetic_fleet(clusters, deployments, packing=packing)
    start = time.perf_counter()
    fleet = load_fleet(config)
    loaded = time.perf_counter() - start
    selectors = SelectorCache()
    result = schedule(fleet, selectors=selectors)
    planned = _median(lambda: schedule(fleet))
    document = result.document()
    replanned = schedule(fleet, document)
    again = _median(lambda: schedule(fleet, document))
    placed = len(result.replicas())
    short = sum(plan.short for plan in result.deployments.values())
    assert [r.name for r in replanned.replicas()] == [r.name for r in result.replicas()]
    print(f"{clusters:>4} clusters x {deployments:>5} deployments: validate {loaded:6.2f} s, schedule {planned:6.3f} s, "
          f"re-plan from its own placement {again:6.3f} s (median of 3); {placed} replicas placed, {short} deployments short; "
          f"CEL evaluations {selectors.evaluations} for {selectors.lookups:,} questions; "
          f"placement sha256 {hashlib.sha256(result.to_json().encode()).hexdigest()[:16]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="only the two headline fleets")
    parser.add_argument("--packing", choices=["DeviceGranular", "WholeNode"],
                        help="modelplane:scheduling.packing (default: unset, the fleet's default)")
    args = parser.parse_args()
    print(f"packing: {args.packing or 'default'}")
    measure(50, 500, args.packing)
    measure(200, 2000, args.packing)
    if args.quick:
        return
    print("growth with clusters (deployments fixed at 1000):")
    for clusters in (25, 50, 100, 200, 400):
        measure(clusters, 1000, args.packing)
    print("growth with deployments (clusters fixed at 100):")
    for deployments in (250, 500, 1000, 2000, 4000):
        measure(100, deployments, args.packing)


if __name__ == "__main__":
    main()
