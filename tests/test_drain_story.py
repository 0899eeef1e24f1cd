"""The seed's drain story, run as a user would: edit the stack file, `modelplane plan --previous`.

2 replicas over eu-west and us-east; scale to 1; NoExecute-drain eu-west (the replica moves to
us-east); scale to 2 while drained (Scheduled 1 of 2, condition False); undrain (the second replica
comes back to eu-west under the name it had before, us-east untouched).
"""
from __future__ import annotations

import json
import subprocess
import sys

import yaml

DEPLOYMENT = ("modelplane:modelDeployments", "ml-team", "mock-demo")


class Stack:
    def __init__(self, repo, tmp_path):
        self.repo, self.tmp = repo, tmp_path
        self.file = tmp_path / "Pulumi.story.yaml"
        self.file.write_text((repo / "stacks" / "Pulumi.demo.yaml").read_text())
        self.step = 0

    def edit(self, change) -> None:
        document = yaml.safe_load(self.file.read_text())
        change(document["config"])
        self.file.write_text(yaml.safe_dump(document, sort_keys=False))

    def plan(self, previous=None) -> tuple[dict, str]:
        args = [sys.executable, "-m", "modelplane", "plan", "--config", str(self.file), "--output", "json"]
        if previous is not None:
            args += ["--previous", str(previous)]
        result = subprocess.run(args, cwd=self.repo, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        self.step += 1
        out = self.tmp / f"placement-{self.step}.json"
        out.write_text(result.stdout)
        return json.loads(result.stdout), str(out)


def placed(document: dict) -> list[tuple[str, str, int]]:
    return sorted((r["name"], r["cluster"], r["index"]) for r in document["replicas"])


def condition(document: dict) -> dict:
    return document["deployments"][0]["conditions"][0]


def set_replicas(n):
    return lambda config: config["modelplane:modelDeployments"]["ml-team"]["mock-demo"].update(replicas=n)


def drain(config):
    config["modelplane:inferenceClusters"]["gpu-eu-west"]["taints"] = [{"key": "modelplane.ai/drain", "effect": "NoExecute"}]


def undrain(config):
    config["modelplane:inferenceClusters"]["gpu-eu-west"].pop("taints")


def test_drain_story(repo, tmp_path):
    stack = Stack(repo, tmp_path)
    first, prev = stack.plan()
    assert placed(first) == [("mock-demo-49b71", "gpu-us-east", 0), ("mock-demo-be445", "gpu-eu-west", 0)]
    assert condition(first) == {"type": "ReplicasScheduled", "status": "True", "reason": "ReplicasCreated",
                                "message": "Scheduled 2 of 2 replicas"}

    stack.edit(set_replicas(1))
    scaled, prev = stack.plan(prev)
    assert placed(scaled) == [("mock-demo-be445", "gpu-eu-west", 0)]  # the later cluster name goes first

    stack.edit(drain)
    drained, prev = stack.plan(prev)
    assert placed(drained) == [("mock-demo-49b71", "gpu-us-east", 0)]  # moved; its name follows its placement

    stack.edit(set_replicas(2))
    short, prev = stack.plan(prev)
    assert placed(short) == [("mock-demo-49b71", "gpu-us-east", 0)]
    assert condition(short) == {"type": "ReplicasScheduled", "status": "False", "reason": "InsufficientCapacity",
                                "message": "Scheduled 1 of 2 replicas"}

    stack.edit(undrain)
    refilled, prev = stack.plan(prev)
    assert placed(refilled) == [("mock-demo-49b71", "gpu-us-east", 0), ("mock-demo-be445", "gpu-eu-west", 0)]
    assert condition(refilled)["status"] == "True"


def test_short_plan_warns_with_the_reason(repo, tmp_path):
    stack = Stack(repo, tmp_path)
    stack.edit(drain)
    stack.edit(set_replicas(2))
    result = subprocess.run([sys.executable, "-m", "modelplane", "plan", "--config", str(stack.file)],
                            cwd=repo, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "ml-team/mock-demo: Scheduled 1 of 2 replicas (ReplicasScheduled=False InsufficientCapacity)" in result.stdout
    assert ("warning: ml-team/mock-demo: Scheduled 1 of 2 replicas; 0/2 clusters are available: "
            "1 insufficient capacity (needs 1 gpu, 0 free), 1 untolerated taint modelplane.ai/drain (NoExecute)"
            ) in result.stderr


def test_json_round_trips_through_previous(repo, tmp_path):
    stack = Stack(repo, tmp_path)
    first, prev = stack.plan()
    second, _ = stack.plan(prev)
    assert second == first
