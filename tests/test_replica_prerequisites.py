"""What a replica's object waits for on its cluster: only the release or CRD manifest its kind needs
(render.fleet.replica_waits_for). Every dependency is a URN in that object's state and engine work on every `up`."""
from __future__ import annotations

import dataclasses

import pytest

from builders import stack_config
from modelplane.api import load_fleet
from modelplane.render import serving_stack as ss
from modelplane.render.fleet import replica_waits_for, workload_stack

CLAIMING_POD = {"spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}], "containers": []}}
PLAIN_POD = {"spec": {"containers": []}}


def _object(api_version: str, kind: str, spec: dict | None = None) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ml-team"},
            "spec": spec or {}}


CASES = [
    # (object, what it waits for on the demo's kind cluster, which runs the example DRA driver)
    (_object("v1", "ServiceAccount"), ()),
    (_object("rbac.authorization.k8s.io/v1", "Role"), ()),
    (_object("v1", "ConfigMap"), ()),
    (_object("resource.k8s.io/v1", "ResourceClaimTemplate"), ()),
    (_object("inference.networking.k8s.io/v1", "InferencePool"), (ss.INFERENCE_EXTENSION_CRDS,)),
    (_object("gateway.networking.k8s.io/v1", "HTTPRoute"), (ss.ENVOY_GATEWAY,)),
    (_object("apps/v1", "Deployment", {"template": PLAIN_POD}), ()),  # the endpoint picker claims nothing
    (_object("apps/v1", "Deployment", {"template": CLAIMING_POD}), (ss.EXAMPLE_DRA_DRIVER,)),
    (_object("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
             {"leaderWorkerTemplate": {"leaderTemplate": PLAIN_POD, "workerTemplate": CLAIMING_POD}}),
     (ss.LEADER_WORKER_SET, ss.EXAMPLE_DRA_DRIVER)),
    (_object("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"leaderWorkerTemplate": {"workerTemplate": PLAIN_POD}}),
     (ss.LEADER_WORKER_SET,)),
]


@pytest.fixture(scope="module")
def demo_stack():
    fleet = load_fleet(stack_config("demo"))
    return workload_stack(fleet, sorted(fleet.inference_clusters)[0])


@pytest.mark.parametrize(("obj", "expected"), CASES, ids=lambda v: v["kind"] if isinstance(v, dict) else None)
def test_each_object_waits_for_what_its_kind_needs(demo_stack, obj, expected):
    assert replica_waits_for(demo_stack, obj) == expected


def test_a_component_the_cluster_has_preinstalled_is_not_waited_for(demo_stack):
    """Not installed by modelplane (e.g. Envoy Gateway preinstalled): nothing of the stack to wait for."""
    without = dataclasses.replace(demo_stack, releases=[r for r in demo_stack.releases if r.name != ss.ENVOY_GATEWAY])
    assert replica_waits_for(without, _object("gateway.networking.k8s.io/v1", "HTTPRoute")) == ()
