"""Small builders for valid config fragments; tests change one thing and look at the result."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from modelplane.api.stackfile import read_stack_file

REPO = Path(__file__).resolve().parent.parent
STACKS = REPO / "stacks"

GPU_CLASS = {
    "devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                 "capacity": {"memory": {"value": "80Gi"}}}],
}


def cluster(region: str = "eu-west", pool: str = "gpu", class_name: str = "synthetic-gpu", **extra: Any) -> dict:
    body = {"labels": {"modelplane.ai/region": region}, "cluster": {"source": "Kind"},
            "nodePools": [{"name": pool, "className": class_name}]}
    body.update(extra)
    return body


def member(role: str = "Standalone", cel: str | None = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0',
           **extra: Any) -> dict:
    # the model name the engine answers (what the front door puts in a request's `model`); a Worker joins its leader
    args = {"args": ["--served-model-name=mock"]} if role != "Worker" else {}
    body: dict[str, Any] = {"role": role, "template": {"spec": {"containers": [
        {"name": "engine", "image": "python:3.12", **args}]}}}
    if cel is not None:
        body["nodeSelector"] = {"devices": [{"name": "gpu", "selectors": [{"cel": cel}]}]}
    body.update(extra)
    return body


def deployment(replicas: int = 2, members: list | None = None, **spec: Any) -> dict:
    engine = {"name": "main", "members": members or [member()]}
    return {"replicas": replicas, "template": {"spec": {"engines": [engine], **spec}}}


def fleet_config(**overrides: Any) -> dict:
    """A small valid fleet: one class, two Kind clusters, one deployment in ml-team."""
    config = {
        "inferenceClasses": {"synthetic-gpu": copy.deepcopy(GPU_CLASS)},
        "inferenceClusters": {"gpu-eu-west": cluster("eu-west"), "gpu-us-east": cluster("us-east")},
        "modelDeployments": {"ml-team": {"mock-demo": deployment()}},
    }
    config.update(overrides)
    return config


def floats(value: Any) -> Any:
    """A stack output as a stack reference reads it back: every number a float."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def traefik_front_door(gateway: dict, version: str = "40.2.0") -> dict:
    """`gateway` (an inferenceGateway config) served by Traefik, as the reference has it: its load-balancer settings move
    into the `traefik` block. For the tests of the Traefik option; the default front door is Envoy Gateway."""
    block = dict(gateway.pop("envoyGateway", None) or {})
    gateway["backend"] = "Traefik"
    gateway["traefik"] = {"version": version, **block}
    return gateway


def stack_config(name: str) -> dict:
    """The config of a stack under stacks/ (`demo`, `cloud`), as the CLI and the engine read it."""
    return read_stack_file(STACKS / f"Pulumi.{name}.yaml").config
