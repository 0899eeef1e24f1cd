"""The e2e gang check without a cluster: which LeaderWorkerSets a plan implies (named as the render names them),
and what it reports about a gang's objects as an API server would hold them.

The real controller, scheduler and allocator are exercised by scripts/e2e.sh.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from e2e import gang_checks as gc
from modelplane.scheduling.names import child_name

REPO = Path(__file__).resolve().parents[1]
E2E_STACK = REPO / "tests" / "e2e" / "Pulumi.e2e.yaml"
NS, LWS = "ml-team", child_name("gang-x", "mock")  # the name render gives engine `mock` of replica `gang-x`


def _modelplane(*args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_e2e_stacks_gang_is_the_leaderworkerset_the_render_writes(tmp_path):
    gangs = gc.planned_gangs(json.loads(_modelplane("plan", "--config", str(E2E_STACK), "--output", "json")))
    _modelplane("render", "--config", str(E2E_STACK), "--out", str(tmp_path))
    (path,) = tmp_path.glob("*/*-leaderworkerset-*.yaml")
    rendered = yaml.safe_load(path.read_text())
    (gang,) = gangs
    assert (gang.cluster, gang.namespace, gang.name) == \
        (path.parent.name, rendered["metadata"]["namespace"], rendered["metadata"]["name"])
    assert (gang.copies, gang.leader_pool, gang.worker_pool, gang.workers) == (1, "gang-eu-west", "gang-eu-west", 1)
    assert rendered["spec"]["leaderWorkerTemplate"]["size"] == 1 + gang.workers


class HeldApi:
    """What an API server holds for one gang: the LeaderWorkerSet, its pods, nodes, slices and claims."""

    def __init__(self, lws: dict | None, pods: list[dict], nodes: dict[str, str], claims: dict[str, dict]):
        self.lws, self.pods, self.nodes, self.claims = lws, pods, nodes, claims

    def get(self, path: str) -> dict | None:
        kind, name = path.split("/")[-2:]
        if kind == "leaderworkersets":
            return self.lws
        if kind == "nodes":
            return {"metadata": {"name": name, "labels": {gc.POOL_LABEL: self.nodes[name]}}}
        return self.claims.get(name)

    def list(self, path: str, *, label_selector=None, field_selector=None, metadata_only=False) -> list[dict]:
        if path.endswith("/pods"):
            assert label_selector == f"{gc.SET_NAME_LABEL}={LWS}"
            return self.pods
        node = field_selector.removeprefix("spec.nodeName=")
        return [{"spec": {"driver": "gpu.example.com", "pool": {"name": node}, "devices": [{"name": "gpu-0"}]}}]


def _pod(name: str, worker_index: str, node: str | None) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": {gc.WORKER_INDEX_LABEL: worker_index}},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "devices"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "resourceClaimStatuses": [{"name": "devices", "resourceClaimName": f"{name}-devices"}]}}


def _claim(node: str) -> dict:
    return {"status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.example.com", "pool": node, "device": "gpu-0"}]}}}}


def _held(**change) -> HeldApi:
    lws = {"status": {"conditions": [{"type": "Available", "status": "True"}]}}
    pods = [_pod(f"{LWS}-0", "0", "gang-0"), _pod(f"{LWS}-0-1", "1", "gang-1")]
    nodes = {"gang-0": "gang", "gang-1": "gang", "cpu-0": "system"}
    claims = {f"{LWS}-0-devices": _claim("gang-0"), f"{LWS}-0-1-devices": _claim("gang-1")}
    values = {"lws": lws, "pods": pods, "nodes": nodes, "claims": claims}
    for key, edit in change.items():
        edit(values[key])
    return HeldApi(values["lws"], values["pods"], values["nodes"], values["claims"])


GANG = gc.Gang("eu", NS, "gang-x", LWS, 1, "gang", "gang", 1)


def test_an_available_gang_on_its_pool_with_claims_allocated_passes():
    assert gc.gang_problems(_held(), GANG) == ([], 1, 1)


@pytest.mark.parametrize("change, expected", [
    ({"lws": lambda lws: lws["status"].update(conditions=[{"type": "Available", "status": "False"}])}, "not Available"),
    ({"pods": lambda pods: pods.pop()}, "1 leader and 0 worker pods, planned 1 and 1"),
    ({"pods": lambda pods: pods[1]["spec"].update(nodeName="cpu-0")}, f"{LWS}-0-1: bound to cpu-0 in pool system"),
    ({"pods": lambda pods: pods[0]["spec"].update(nodeName=None)}, f"{LWS}-0: not bound"),
    ({"claims": lambda claims: claims.update({f"{LWS}-0-1-devices": {}})}, f"claim {LWS}-0-1-devices not allocated"),
    ({"claims": lambda claims: claims.update({f"{LWS}-0-devices": _claim("gang-1")})},
     f"{LWS}-0: device gpu-0 of pool gang-1 is not on node gang-0"),
    ({"pods": lambda pods: pods[1]["status"].update(conditions=[])}, f"{LWS}-0-1: not Ready"),
])
def test_each_way_a_gang_falls_short_is_reported(change, expected):
    problems, _, _ = gc.gang_problems(_held(**change), GANG)
    assert any(expected in p for p in problems), problems


def test_the_check_passes_on_a_plan_whose_gangs_all_hold():
    member = {"nodePool": "gang", "pods": 1}
    plan = {"replicas": [{"cluster": "eu", "namespace": NS, "name": "gang-x", "engines": [
        {"name": "mock", "copies": 1, "members": [{"role": "Leader", **member}, {"role": "Worker", **member}]}]}]}
    held = _held()
    name, ok, detail = gc.gangs_on_real_nodes(plan, lambda cluster: held)
    assert ok, detail
    assert detail == "1 LeaderWorkerSets Available; 1 leader and 1 worker pods Ready on eu pools gang/gang"


def test_a_missing_leaderworkerset_or_a_plan_without_gangs_fails_the_check():
    assert gc.gang_problems(HeldApi(None, [], {}, {}), GANG)[0] == [f"{LWS}: no LeaderWorkerSet on eu"]
    name, ok, detail = gc.gangs_on_real_nodes({"replicas": []}, lambda cluster: _held())
    assert (name, ok, detail) == (gc.CHECK, False, "the plan has no gang replica")
