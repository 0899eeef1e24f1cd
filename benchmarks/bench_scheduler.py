"""How long a whole-fleet plan takes, and how it grows with each dimension.

Run: venv/bin/python benchmarks/bench_scheduler.py [--quick] [--packing WholeNode|DeviceGranular]
     [--shapes uniform|varied]

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


# --shapes varied: more distinct deployment shapes, as an outside fleet has them (issue 27).
VARIED_SELECTORS = [
    'device.attributes["gpu.nvidia.com"].architecture in ["{arch}", "{arch2}"]',
    'device.driver == "gpu.nvidia.com" && device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("{mem2}"))',
    'device.attributes["gpu.nvidia.com"].architecture.startsWith("{prefix}")',
    '!(device.attributes["gpu.nvidia.com"].architecture == "{arch}") || '
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{mem2}")) >= 0',
]
ARCHS = ["Hopper", "Ampere", "Ada Lovelace"]


def _varied_request(rng: random.Random, name: str = "gpu") -> dict:
    """A device request from a wide space (any memory threshold in GiB, several CEL forms, counts), aimed at
    one GPU class so that some class satisfies it, as a team writes it for the hardware it means."""
    _, memory, arch, cc, count = rng.choice(GPUS)
    gib = int(memory[:-2]) // 1024
    selectors = [{"cel": SELECTORS[0].format(mem=f"{rng.randint(8, gib)}Gi")}]
    if rng.random() < 0.4:
        selectors.append({"cel": SELECTORS[1].format(arch=arch)})
    if rng.random() < 0.3:
        major, minor = (int(n) for n in cc.split(".")[:2])
        lower = f"{major}.{rng.randint(0, minor)}.0" if minor and rng.random() < 0.5 else f"{major - 1}.{rng.randint(0, 9)}.0"
        selectors.append({"cel": SELECTORS[2].format(cc=lower)})
    if rng.random() < 0.4:
        selectors.append({"cel": rng.choice(VARIED_SELECTORS).format(
            arch=arch, arch2=rng.choice(ARCHS), mem2=f"{rng.randint(4, gib - 1)}Gi", prefix=arch[:rng.randint(1, 3)])})
    return {"name": name, "count": rng.choice([n for n in (1, 1, 1, 2, 2, 4, 8) if n <= count]), "selectors": selectors}


def _varied_engine(rng: random.Random, name: str, container: dict, phase: str | None = None) -> dict:
    """Standalone (copies 1-3), or a Leader+Worker gang (worker nodes 1-4), its own requests per role."""
    engine: dict = {"name": name}
    if rng.random() < 0.15:
        engine["members"] = [
            {"role": "Leader", "nodeSelector": {"devices": [_varied_request(rng)]}, "template": container},
            {"role": "Worker", "worker": {"nodes": rng.randint(1, 2)},
             "nodeSelector": {"devices": [_varied_request(rng)]}, "template": container}]
    else:
        engine["members"] = [{"nodeSelector": {"devices": [_varied_request(rng)]}, "template": container}]
        if rng.random() < 0.15:
            engine["copies"] = 2
    if phase is not None:
        engine["phase"] = phase
    return engine


def _varied_deployment(rng: random.Random, d: int) -> dict:
    container = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                                          "args": [f"--model=example/model-{d:05d}"]}]}}
    spec: dict
    if rng.random() < 0.1:
        spec = {"serving": {"mode": "PrefillDecode"},
                "engines": [_varied_engine(rng, "prefill", container, "Prefill"),
                            _varied_engine(rng, "decode", container, "Decode")]}
    else:
        spec = {"engines": [_varied_engine(rng, "engine", container)]}
    labels: dict = {}
    if rng.random() < 0.3:
        labels["modelplane.ai/region"] = f"region-{rng.randrange(8)}"
    if rng.random() < 0.15:
        labels["site"] = rng.choice(["rack", "colo"])
    if labels:
        spec["clusterSelector"] = {"matchLabels": labels}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": f"team-{rng.randrange(4)}",
                                "effect": rng.choice(["NoSchedule", "NoExecute"])}]
    deployment: dict = {"replicas": rng.randint(1, 4), "template": {"spec": spec}}
    if rng.random() < 0.2:
        tiers = [{"clusterSelector": {"matchLabels": {"capacity": c}}}
                 for c in rng.sample(["reserved", "spot", "ondemand"], rng.randint(1, 2))]
        deployment["placement"] = {"preferences": tiers + [{}], "failback": rng.choice(["Never", "WhenRoom"])}
        if deployment["placement"]["failback"] == "WhenRoom":
            deployment["placement"]["maxMovesPerPlan"] = rng.randint(1, 2)
    return deployment


def _vary_clusters(clusters: dict, seed: int) -> None:
    """Labels for the varied deployments' selectors and tiers, and some dedicated (tainted) clusters."""
    rng = random.Random(seed + 1)
    for spec in clusters.values():
        spec["labels"]["capacity"] = rng.choice(["reserved", "spot", "ondemand"])
        spec["labels"]["site"] = rng.choice(["rack", "colo", "cloud"])
        if rng.random() < 0.1:
            spec["taints"] = [{"key": "dedicated", "value": f"team-{rng.randrange(4)}", "effect": "NoSchedule"}]


def synthetic_fleet(clusters: int, deployments: int, seed: int = 7, packing: str | None = None,
                    shapes: str = "uniform") -> dict:
    """`shapes`: "uniform" (the benchmark's fleet, few distinct shapes) or "varied" (nearly every
    deployment its own shape: requests, CEL selectors, counts, gangs, engines, roles, preferences)."""
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
    if shapes == "varied":
        _vary_clusters(fleet_clusters, seed)
        for d in range(deployments):
            fleet_deployments.setdefault(f"team-{d % 20:02d}", {})[f"model-{d:05d}"] = _varied_deployment(rng, d)
        deployments = 0
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


def measure(clusters: int, deployments: int, packing: str | None = None, shapes: str = "uniform") -> None:
    config = synthetic_fleet(clusters, deployments, packing=packing, shapes=shapes)
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
    parser.add_argument("--shapes", choices=["uniform", "varied"], default="uniform",
                        help="varied: nearly every deployment its own shape (default: uniform, few distinct shapes)")
    args = parser.parse_args()
    print(f"packing: {args.packing or 'default'}, shapes: {args.shapes}")
    measure(50, 500, args.packing, args.shapes)
    measure(200, 2000, args.packing, args.shapes)
    if args.quick:
        return
    print("growth with clusters (deployments fixed at 1000):")
    for clusters in (25, 50, 100, 200, 400):
        measure(clusters, 1000, args.packing, args.shapes)
    print("growth with deployments (clusters fixed at 100):")
    for deployments in (250, 500, 1000, 2000, 4000):
        measure(100, deployments, args.packing, args.shapes)


if __name__ == "__main__":
    main()
