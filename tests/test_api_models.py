"""The API models: reference defaults, typed accessors and the rules users rely on."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from builders import GPU_CLASS, demo_deployment, demo_member
from modelplane.api import InferenceClass, InferenceCluster, ModelDeployment, ServingStack
from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE
from modelplane.api.model_deployment import Toleration
from modelplane.api.serving_stack import ServingStackConfig


def test_class_defaults_follow_the_reference():
    cls = InferenceClass.model_validate({"devices": [{"name": "nic", "claim": "Synthetic", "driver": "nic.example.com"}]})
    device = cls.devices[0]
    assert (device.count, device.claim, device.device_class_name) == (1, "Synthetic", None)
    assert not cls.claimable
    gpu = InferenceClass.model_validate(GPU_CLASS).devices[0]
    assert gpu.claim == "DRA" and gpu.capacity["memory"].value == "80Gi"


def test_attribute_values_are_typed():
    cls = InferenceClass.model_validate({"devices": [{
        "name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
        "attributes": {"architecture": {"string": "Hopper"}, "cc": {"version": "9.0.0"},
                       "mig": {"bool": False}, "index": {"int": 0}}}]})
    attrs = cls.devices[0].attributes
    assert [(k, a.kind, a.value) for k, a in attrs.items()] == [
        ("architecture", "string", "Hopper"), ("cc", "version", "9.0.0"), ("mig", "bool", False), ("index", "int", 0)]


def test_round_trip_keeps_reference_field_names():
    body = {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                         "attributes": {"on": {"bool": True}}}]}
    assert InferenceClass.model_validate(body).to_config() == {
        "devices": [{"name": "gpu", "claim": "DRA", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
                     "count": 1, "attributes": {"on": {"bool": True}}, "capacity": {}}]}


def test_kind_cluster_defaults_pin_a_node_image_by_digest():
    cluster = InferenceCluster.model_validate({"cluster": {"source": "Kind"}})
    assert cluster.cluster.kind.node_image == DEFAULT_KIND_NODE_IMAGE
    assert "@sha256:" in DEFAULT_KIND_NODE_IMAGE
    assert cluster.node_pools == [] and cluster.taints == []


def test_cloud_defaults_follow_the_reference():
    eks = InferenceCluster.model_validate({"cluster": {"source": "EKS", "eks": {"region": "us-east-1"}}}).cluster.eks
    assert eks.kubernetes_version == "1.36" and eks.networking.vpc_cidr == "10.0.0.0/16"
    assert len(eks.networking.subnet_cidrs) == 3


def test_deployment_defaults():
    d = ModelDeployment.model_validate(demo_deployment(replicas=3))
    engine = d.spec.engines[0]
    assert (d.replicas, engine.copies, engine.members[0].role, d.spec.serving_mode) == (3, 1, "Standalone", "Unified")
    assert engine.members[0].node_selector.devices[0].count == 1


def test_worker_pods_default_to_one_without_a_worker_block():
    d = ModelDeployment.model_validate(demo_deployment(members=[demo_member("Leader"), demo_member("Worker", cel=None)]))
    leader, worker = d.spec.engines[0].members
    assert (leader.pods, worker.pods) == (1, 1)
    d = ModelDeployment.model_validate(demo_deployment(members=[demo_member("Leader"), demo_member("Worker", worker={"nodes": 3})]))
    assert d.spec.engines[0].members[1].pods == 3


@pytest.mark.parametrize("toleration, taint, tolerated", [
    ({"key": "drain", "operator": "Exists"}, ("drain", None, "NoExecute"), True),
    ({"operator": "Exists"}, ("anything", "x", "NoSchedule"), True),
    ({"key": "drain", "value": "yes"}, ("drain", "yes", "NoSchedule"), True),
    ({"key": "drain", "value": "yes"}, ("drain", "no", "NoSchedule"), False),
    ({"key": "drain", "operator": "Exists", "effect": "NoSchedule"}, ("drain", None, "NoExecute"), False),
    ({"key": "other", "operator": "Exists"}, ("drain", None, "NoExecute"), False),
])
def test_tolerations_follow_kubernetes(toleration, taint, tolerated):
    assert Toleration.model_validate(toleration).tolerates(*taint) is tolerated


def test_serving_stack_layers_merge_field_by_field():
    fleet_wide = ServingStackConfig.model_validate({"versions": {"certManager": "v1.18.0"}})
    cluster = ServingStackConfig.model_validate({"versions": {"leaderWorkerSet": "v0.9.0"}, "nvidiaDriverRoot": "/run/nvidia"})
    stack = ServingStack.effective(fleet_wide, cluster)
    assert stack.versions.cert_manager == "v1.18.0" and stack.versions.leader_worker_set == "v0.9.0"
    assert stack.versions.envoy_gateway == "v1.8.1"  # untouched default
    assert stack.nvidia_driver_root == "/run/nvidia"
    assert stack.gateway.class_name == "envoy" and stack.gateway.listeners[0].port == 80


def test_models_are_immutable():
    d = ModelDeployment.model_validate(demo_deployment())
    with pytest.raises(ValidationError):
        d.replicas = 5
