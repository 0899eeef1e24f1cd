"""`__main__.py` under a reviewer's own plain mocks (no output hooks, no recording monitor), twice."""
from __future__ import annotations

import json
import subprocess
import sys


def run_main(repo, stack: str, previous=None) -> dict:
    args = [sys.executable, str(repo / "tests" / "plain_mocks_main.py"), str(repo), stack]
    if previous is not None:
        args.append(json.dumps(previous))
    done = subprocess.run(args, capture_output=True, text=True, cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_demo_main_registers_everything_and_a_second_run_keeps_every_replica(repo):
    first = run_main(repo, "demo")
    types = first["types"]
    assert types["pulumi:providers:kubernetes"] == 3
    assert types["kubernetes:helm.sh/v3:Release"] == 2 * 9 + 2  # each workload cluster's stack, Envoy Gateway + MetalLB
    assert types["kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"] == 2
    assert types["kubernetes:apps/v1:Deployment"] == 4  # engine + endpoint picker per replica
    assert types["kubernetes:discovery.k8s.io/v1:EndpointSlice"] == 2  # each workload cluster's gateway, by name
    assert types["kubernetes:gateway.envoyproxy.io/v1alpha1:Backend"] == 2  # one per replica
    # Two per replica (by path, by host name), one per service, the front door's own API answers.
    assert types["kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"] == 2 * 2 + 1 + 1
    assert first["replicas"] == ["ml-team/mock-demo-49b71", "ml-team/mock-demo-be445"]
    placement = first["outputs"]["placement"]
    assert [r["cluster"] for r in placement["replicas"]] == ["gpu-eu-west", "gpu-us-east"]

    second = run_main(repo, "demo", previous=placement)
    assert second["replicas"] == first["replicas"]
    assert second["outputs"]["placement"]["replicas"] == placement["replicas"]
    assert second["types"] == types
