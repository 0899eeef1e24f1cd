"""The whole program under Pulumi mocks: what a reviewer finds after `pulumi up --stack demo`/`cloud`.

Every resource is read as the engine received it (type, name, parent, provider, dependencies and
which inputs are secret) through the suite's recording monitor.
"""
from __future__ import annotations

import json
from collections import Counter

import pulumi
import pytest
import yaml

from program_run import PROVIDER, RELEASE, Deployed, Registered, deploy, set_stack_config, stack_config
from k8s_validation import assert_valid, integral_floats_to_int
from modelplane.infra import program

# --- demo ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo(recording) -> Deployed:
    return deploy(*recording, stack_config("demo"))


def test_demo_has_a_provider_per_cluster_and_every_kubeconfig_is_secret(demo):
    seen = demo.seen
    providers = {r.name: r for r in seen.of_type(PROVIDER)}
    assert sorted(providers) == ["control", "gpu-eu-west", "gpu-us-east"]
    for provider in providers.values():
        assert "kubeconfig" in provider.secret_inputs, provider.name
    # The kind clusters themselves, through pulumi-command, with the pinned node image.
    creates = [r for r in seen.of_type("command:local:Command") if "kind create cluster" in r.inputs["create"]]
    assert len(creates) == 3
    assert all("kindest/node:v1.34.3@sha256:" in r.inputs["create"] for r in creates)
    # Pool nodes carry the label replicas select (without it engine pods stay Pending forever).
    configs = {r.name: yaml.safe_load(r.inputs["stdin"]) for r in creates}
    for cluster in ("gpu-eu-west", "gpu-us-east"):
        labels = [node.get("labels", {}) for node in configs[f"{cluster}-kind"]["nodes"]]
        assert {"modelplane.ai/pool": cluster} in [{k: v for k, v in lab.items() if k == "modelplane.ai/pool"}
                                                    for lab in labels]
    assert [n["role"] for n in configs["control-kind"]["nodes"]] == ["control-plane"]
    # The front door lives on the control cluster.
    assert seen.provider_of(seen.named(RELEASE, "control/mp-gateway-helm")) == "control"


def test_demo_installs_the_serving_stack_on_each_workload_cluster(demo):
    seen = demo.seen
    expected = {"mp-cert-manager", "mp-gateway-helm", "mp-ai-gateway-crds-helm", "mp-ai-gateway-helm",
                "mp-kube-prometheus-stack", "mp-lws", "mp-node-feature-discovery", "mp-dra-example-driver", "metallb"}
    for cluster in ("gpu-eu-west", "gpu-us-east"):
        releases = [r for r in seen.of_type(RELEASE) if seen.provider_of(r) == cluster]
        assert {r.inputs["name"] for r in releases} == expected
        stack = seen.named("modelplane:index:ServingStack", cluster)
        assert seen.by_urn[stack.parent].type == "modelplane:index:InferenceCluster"
        assert all(r.parent == stack.urn for r in releases)
        crds = seen.named("kubernetes:yaml/v2:ConfigFile", f"{cluster}/inference-extension-crds")
        assert crds.inputs["file"].endswith("/v1.0.1/manifests.yaml")
        # Envoy Gateway's extension manager needs the InferencePool CRD first.
        envoy = next(r for r in releases if r.inputs["name"] == "mp-gateway-helm")
        assert crds.urn in envoy.dependencies
        # MetalLB on kind hands out addresses inside the kind network, one range per cluster.
        pool = seen.named("kubernetes:metallb.io/v1beta1:IPAddressPool", f"{cluster}/metallb-system/modelplane")
        assert pool.inputs["spec"]["addresses"][0].startswith("172.18.255.")
        # MetalLB's speaker is admitted only in its privileged namespace.
        namespace = seen.named("kubernetes:core/v1:Namespace", f"{cluster}/metallb-system")
        metallb = next(r for r in releases if r.inputs["name"] == "metallb")
        assert namespace.urn in metallb.dependencies
        assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    pools = [r.inputs["spec"]["addresses"][0] for r in seen.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")]
    assert len(pools) == len(set(pools)) == 3


def test_demo_replicas_have_their_workloads_and_claim_templates_on_their_cluster(demo):
    seen = demo.seen
    placed = {f"{r.key.namespace}/{r.name}": r.cluster for r in demo.result.replicas()}
    assert placed == {"ml-team/mock-demo-be445": "gpu-eu-west", "ml-team/mock-demo-49b71": "gpu-us-east"}
    for name, cluster in placed.items():
        component = seen.named("modelplane:index:ModelReplica", name)
        kinds = Counter(r.type for r in seen.children(component))
        assert kinds["kubernetes:apps/v1:Deployment"] == 2  # the engine and its endpoint picker
        assert kinds["kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"] == 1
        assert kinds["kubernetes:inference.networking.k8s.io/v1:InferencePool"] == 1
        assert kinds["kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"] == 2  # by path and by host name
        assert {seen.provider_of(r) for r in seen.children(component)} == {cluster}
        # The engine waits for the DRA driver (the DeviceClass its claim names), and no other release of the stack.
        engine = seen.engine_of(name)
        releases = {seen.by_urn[u].inputs.get("name") for u in engine.dependencies if seen.by_urn[u].type == RELEASE}
        assert releases == {"mp-dra-example-driver"}
        [claim] = [r for r in seen.children(component) if r.type.endswith(":ResourceClaimTemplate")]
        assert claim.urn in engine.dependencies
        claim_name = claim.inputs["metadata"]["name"]
        pod = engine.inputs["spec"]["template"]["spec"]
        assert [c["resourceClaimTemplateName"] for c in pod["resourceClaims"]] == [claim_name]


BACKEND = "kubernetes:gateway.envoyproxy.io/v1alpha1:Backend"


def test_demo_front_door_routes_to_ready_replicas_only(demo):
    seen = demo.seen
    gateway = seen.named("modelplane:index:InferenceGateway", "control")
    releases = {r.inputs["name"] for r in seen.of_type(RELEASE) if seen.provider_of(r) == "control"}
    assert releases == {"mp-gateway-helm", "metallb"}
    route = seen.named("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", "control/ml-team/mock")
    for rule in route.inputs["spec"]["rules"]:  # by path, and by the request's model
        assert [(b["name"], b["weight"]) for b in rule["backendRefs"]] == [("mock-demo-49b71", 1),
                                                                           ("mock-demo-be445", 1)]
    for name, cluster in (("mock-demo-be445", "gpu-eu-west"), ("mock-demo-49b71", "gpu-us-east")):
        endpoint = seen.named("modelplane:index:ModelEndpoint", f"ml-team/{name}")
        backend = seen.named(BACKEND, f"control/ml-team/{name}")
        assert backend.parent == endpoint.urn and seen.provider_of(backend) == "control"
        [address] = backend.inputs["spec"]["endpoints"]
        assert address["hostname"] == f"{name}.ml-team.replica.modelplane.internal"
        assert address["fqdn"]["hostname"].startswith(f"{cluster}-gateway-")
        # The cluster's gateway by name: its real address (not the render placeholder), as an IPv4 slice.
        alias = seen.named("modelplane:index:GatewayAlias", cluster)
        [slice_] = [r for r in seen.children(alias) if r.type.endswith(":EndpointSlice")]
        assert slice_.inputs["addressType"] == "IPv4"
        assert slice_.inputs["endpoints"][0]["addresses"] == ["172.18.255.200"]
        assert slice_.urn in backend.dependencies  # the component's children, as Pulumi expands a component dependency
        # Created only after the replica's engine Deployment is ready...
        assert seen.engine_of(f"ml-team/{name}").urn in backend.dependencies
        # ...and the route only after the endpoint.
        assert backend.urn in route.dependencies
    assert gateway in seen.ancestors(seen.named(PROVIDER, "control"))


def test_every_resource_belongs_to_a_modelplane_component(demo):
    seen = demo.seen
    assert {r.type for r in seen.all if not r.custom} >= {
        "modelplane:index:InferenceCluster", "modelplane:index:ServingStack", "modelplane:index:InferenceGateway",
        "modelplane:index:ModelReplica", "modelplane:index:ModelEndpoint", "modelplane:index:ModelService"}
    for registration in seen.all:
        if registration.type.startswith("modelplane:index:") or registration.type == "pulumi:pulumi:StackReference":
            continue
        assert any(a.type.startswith("modelplane:index:") for a in seen.ancestors(registration)), registration.name
        if registration.type.startswith("kubernetes:") and registration.custom:
            assert registration.provider is not None, registration.name  # never the ambient kubeconfig


def test_demo_outputs_placement_status_and_urls(demo):
    out = demo.outputs
    assert out["placement"] == demo.result.document_data()
    # Free devices per pool: the demo's pools are one 1-GPU node each, both taken.
    assert out["capacity"] == {"packing": "DeviceGranular", "unit": "devices", "pools": {
        "gpu-eu-west/gpu-eu-west": {"declared": 1, "free": 0}, "gpu-us-east/gpu-us-east": {"declared": 1, "free": 0}}}
    assert out["deployments"]["ml-team/mock-demo"]["conditions"][0]["message"] == "Scheduled 2 of 2 replicas"
    assert out["gatewayAddress"] == "172.18.255.193"
    assert out["services"] == {"ml-team/mock": "http://172.18.255.193/ml-team/mock"}


def replica_components(seen: Registered) -> list[str]:
    return sorted(r.name for r in seen.of_type("modelplane:index:ModelReplica"))


def test_second_run_keeps_every_replica_and_its_resources(repo, monitor, mocks):
    config = stack_config("demo")
    first = deploy(monitor, mocks, config)
    again = deploy(monitor, mocks, config, previous=first.result)
    assert {r.status for r in again.result.replicas()} == {"retained"}
    assert replica_components(again.seen) == replica_components(first.seen) == [
        "ml-team/mock-demo-49b71", "ml-team/mock-demo-be445"]
    assert sorted((r.type, r.name) for r in again.seen.all) == sorted((r.type, r.name) for r in first.seen.all)


def test_a_drained_replica_is_replaced_and_the_route_waits_for_the_replacement(repo, monitor, mocks):
    config = stack_config("demo")
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 1
    first = deploy(monitor, mocks, config)
    [before] = first.result.replicas()
    assert before.cluster == "gpu-eu-west"
    config["inferenceClusters"]["gpu-eu-west"]["taints"] = [{"key": "modelplane.ai/drain", "effect": "NoExecute"}]
    after = deploy(monitor, mocks, config, previous=first.result)
    [moved] = after.result.replicas()
    assert moved.cluster == "gpu-us-east" and moved.name != before.name
    seen = after.seen
    # The old replica is no longer in the program: the engine deletes it at the end of the update,
    # after the route below has moved to the replacement.
    assert replica_components(seen) == [f"ml-team/{moved.name}"]
    route = seen.named("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", "control/ml-team/mock")
    assert [b["name"] for b in route.inputs["spec"]["rules"][0]["backendRefs"]] == [moved.name]
    engine = seen.engine_of(f"ml-team/{moved.name}")
    backend = seen.named(BACKEND, f"control/ml-team/{moved.name}")
    assert engine.urn in backend.dependencies
    assert backend.urn in route.dependencies


def test_bad_config_registers_nothing(repo, monitor):
    config = stack_config("demo")
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = -1
    set_stack_config(config)
    with pytest.raises(pulumi.RunError, match="nothing was changed"):
        program.run()
    assert monitor.registrations == []


def kubernetes_objects(seen: Registered) -> dict[str, list[dict]]:
    """Every Kubernetes object the program applies, as the provider receives it, per cluster."""
    skip = (RELEASE, "kubernetes:yaml/v2:ConfigFile")
    objects: dict[str, list[dict]] = {}
    for r in seen.all:
        if r.custom and r.type.startswith("kubernetes:") and r.type not in skip:
            obj = integral_floats_to_int({key: value for key, value in r.inputs.items() if value is not None})
            objects.setdefault(r.provider_name, []).append(obj)
    return objects


@pytest.mark.parametrize("stack", ["demo"])
def test_every_applied_object_is_valid_against_the_real_schemas(repo, monitor, mocks, stack):
    deployed = deploy(monitor, mocks, stack_config(stack))
    per_cluster = kubernetes_objects(deployed.seen)
    assert sorted(per_cluster) == ["control", "gpu-eu-west", "gpu-us-east"]
    for objects in per_cluster.values():
        assert_valid(objects)


# --- cloud -----------------------------------------------------------------------------------------

SAAS_KEY = "sk-together-test-key"
HF_TOKEN = "hf_test_token_value"


@pytest.fixture(scope="module")
def cloud(recording) -> Deployed:
    config = stack_config("cloud")
    config["modelEndpoints"]["ml-team"]["together"]["auth"] = {"token": SAAS_KEY}
    config["modelCaches"]["ml-team"]["qwen3-8b"]["huggingFace"]["token"] = HF_TOKEN
    return deploy(*recording, config)


def test_cloud_has_a_provider_per_cluster_fed_by_its_cloud(cloud):
    seen = cloud.seen
    providers = {r.name: r for r in seen.of_type(PROVIDER)}
    assert sorted(providers) == ["aws-us-east", "azure-eu-west", "front-door", "gcp-us-central"]
    for provider in providers.values():
        assert "kubeconfig" in provider.secret_inputs, provider.name
    clouds = {r.type.split(":")[0] for r in seen.all} - {"kubernetes", "pulumi", "modelplane"}
    assert {"aws", "eks", "gcp", "azure-native"} <= clouds


def test_cloud_gpu_clusters_get_the_nvidia_driver_and_no_fake_gpus(cloud):
    seen = cloud.seen
    for cluster in ("aws-us-east", "gcp-us-central", "azure-eu-west"):
        releases = {r.inputs["name"]: r for r in seen.of_type(RELEASE) if seen.provider_of(r) == cluster}
        assert "mp-dra-driver-nvidia-gpu" in releases and "mp-dra-example-driver" not in releases
        assert "metallb" not in releases  # clouds have load balancers
        # The driver's system-node-critical pods are admitted only once the quota allows them.
        quota = seen.named("kubernetes:core/v1:ResourceQuota", f"{cluster}/dra-driver-nvidia-gpu/allow-critical-pods")
        assert quota.urn in releases["mp-dra-driver-nvidia-gpu"].dependencies
    gke = next(r for r in seen.of_type(RELEASE)
               if seen.provider_of(r) == "gcp-us-central" and r.inputs["name"] == "mp-dra-driver-nvidia-gpu")
    assert gke.inputs["values"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"


def test_cloud_saas_key_reaches_the_front_door_only_as_a_secret(cloud):
    seen = cloud.seen
    [middleware] = [r for r in seen.of_type("kubernetes:core/v1:Secret") if SAAS_KEY in json.dumps(r.inputs)]
    assert middleware.provider_name == "front-door"
    assert "stringData" in middleware.secret_inputs or "string_data" in middleware.secret_inputs
    assert middleware.inputs["stringData"] == {"credential": f"Bearer {SAAS_KEY}"}
    # Envoy injects it from the Secret on the endpoint's own hop route only.
    [injection] = [r for r in seen.of_type("kubernetes:gateway.envoyproxy.io/v1alpha1:HTTPRouteFilter")
                   if "credentialInjection" in r.inputs["spec"]]
    assert injection.inputs["spec"]["credentialInjection"]["credential"] == {
        "valueRef": {"name": middleware.inputs["metadata"]["name"]}}
    # The Hugging Face token reaches each cluster's hydration Secret, also only as a secret.
    token_secrets = [r for r in seen.of_type("kubernetes:core/v1:Secret") if HF_TOKEN in json.dumps(r.inputs)]
    assert token_secrets and all("string_data" in r.secret_inputs or "stringData" in r.secret_inputs
                                 for r in token_secrets)
    for r in seen.all:
        if r is not middleware and r not in token_secrets:
            assert SAAS_KEY not in json.dumps(r.inputs, default=str), r.name
            assert HF_TOKEN not in json.dumps(r.inputs, default=str), r.name
    assert SAAS_KEY not in json.dumps(cloud.outputs, default=str)
    assert HF_TOKEN not in json.dumps(cloud.outputs, default=str)


def test_cloud_cache_is_staged_where_it_is_mounted(cloud):
    seen = cloud.seen
    caches = seen.of_type("modelplane:index:ModelCache")
    assert [c.name for c in caches] == ["ml-team/qwen3-8b"]
    pvcs = [r for r in seen.children(caches[0]) if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert pvcs
    for pvc in pvcs:
        replicas = [r for r in seen.of_type("modelplane:index:ModelReplica")
                    if any(seen.provider_of(c) == seen.provider_of(pvc) for c in seen.children(r))]
        for replica in replicas:
            engine = seen.engine_of(replica.name)
            volumes = engine.inputs["spec"]["template"]["spec"].get("volumes", [])
            if any(v.get("persistentVolumeClaim", {}).get("claimName") == pvc.inputs["metadata"]["name"] for v in volumes):
                assert pvc.urn in engine.dependencies


def test_cloud_objects_are_valid_against_the_real_schemas(cloud):
    for objects in kubernetes_objects(cloud.seen).values():
        assert_valid(objects)
