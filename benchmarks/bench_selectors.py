"""Device-selector speed: compile time, evaluation time, and how much memoisation saves.

Run: venv/bin/python benchmarks/bench_selectors.py [--clusters 200 --deployments 2000]

A whole-fleet plan asks "does selector S match device kind D?" for every deployment x cluster x
pool x device. Device classes are kinds, so the distinct (expression, device kind) pairs are few;
this prints how many questions a naive planner would evaluate against how many the cache does.
"""
from __future__ import annotations

import argparse
import statistics
import time

from modelplane.cel import compile_selector
from modelplane.devices import SelectorCache, device_key, device_value

SELECTORS = [
    'device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("70Gi")) >= 0 && '
    'device.attributes["gpu.nvidia.com"].architecture == "Hopper" && '
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))',
    'device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h100")',
    'device.attributes.exists(d, d == "gpu.nvidia.com")',
]


def gpu(name: str, memory: str, arch: str, cc: str) -> dict:
    return {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
            "attributes": {"productName": {"string": name}, "architecture": {"string": arch},
                           "cudaComputeCapability": {"version": cc}},
            "capacity": {"memory": {"value": memory}}}


KINDS = [gpu("NVIDIA H100 80GB HBM3", "81559Mi", "Hopper", "9.0.0"), gpu("NVIDIA L4", "23034Mi", "Ada Lovelace", "8.9.0"),
         gpu("NVIDIA A100 80GB", "81920Mi", "Ampere", "8.0.0"), gpu("NVIDIA H200", "143771Mi", "Hopper", "9.0.0")]


def per_call(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--deployments", type=int, default=2000)
    parser.add_argument("--pools", type=int, default=4)
    args = parser.parse_args()

    compile_selector("true")  # build the parser once, outside the timings
    print("compile (parse + type check + closures), first time per expression:")
    for expression in SELECTORS:
        compile_selector.cache_clear()
        seconds = per_call(lambda e=expression: (compile_selector.cache_clear(), compile_selector(e)), 50)
        print(f"  {seconds * 1e3:7.3f} ms  {expression[:90]}")
    print("evaluate one (expression, device) pair, program and device value cached:")
    device = device_value(KINDS[0])
    for expression in SELECTORS:
        program = compile_selector(expression)
        seconds = per_call(lambda p=program: p.matches(device), 2000)
        print(f"  {seconds * 1e6:7.1f} us  {expression[:90]}")

    cache = SelectorCache()
    kind_keys = [device_key(kind) for kind in KINDS]  # once per device kind, as a planner does per pool
    start = time.perf_counter()
    for d in range(args.deployments):
        expression = SELECTORS[d % len(SELECTORS)]
        for c in range(args.clusters):
            for p in range(args.pools):
                cache.matches(expression, kind_keys[(c + p) % len(KINDS)])
    elapsed = time.perf_counter() - start
    print(f"fleet {args.clusters} clusters x {args.pools} pools x {args.deployments} deployments:")
    print(f"  questions asked {cache.lookups:,}; CEL evaluations performed {cache.evaluations} "
          f"(distinct expression x device-kind pairs); {elapsed:.2f} s in all, "
          f"{elapsed / cache.lookups * 1e6:.2f} us per question")
    naive = statistics.mean(per_call(lambda p=compile_selector(e): p.matches(device), 200) for e in SELECTORS)
    print(f"  without the cache: ~{naive * cache.lookups:.0f} s of evaluation ({naive * 1e6:.0f} us x {cache.lookups:,})")


if __name__ == "__main__":
    main()
