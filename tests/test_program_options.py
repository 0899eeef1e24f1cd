"""Resource options the engine receives, pinned by what a user of the stack would notice without them.

The demo and cloud stacks' programs run under the suite's mocks; each registration carries the
options of its RegisterResource request (`pulumi_recording.Registration`: retain_on_delete,
custom_timeouts, ignore_changes, delete_before_replace, dependencies, ...). Provider-specific
settings travel as inputs (a kubernetes Provider's kubeconfig, a node group's
`ignoreScalingChanges`) and await settings as annotations (`pulumi.com/waitFor`,
`pulumi.com/skipAwait`), so those are read from the inputs.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi_kubernetes import _utilities as k8s_utilities

from pulumi_recording import Registration
from modelplane.infra import deploy as infra_deploy
from modelplane.infra.components.common import apply_objects, children
from modelplane.render.secrets import placeholder
from program_run import PROVIDER, RELEASE, Deployed, Registered, deploy, stack_config

NAMESPACE = "kubernetes:core/v1:Namespace"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
WORKLOADS = (DEPLOYMENT, LWS)
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
COMMAND = "command:local:Command"
WAIT_FOR, SKIP_AWAIT = "pulumi.com/waitFor", "pulumi.com/skipAwait"

SAAS_KEY = "sk-together-options-test"
HF_TOKEN = "hf_options_test_token"


def cloud_config() -> dict:
    config = stack_config("cloud")
    config["modelEndpoints"]["ml-team"]["together"]["auth"] = {"token": SAAS_KEY}
    config["modelCaches"]["ml-team"]["qwen3-8b"]["huggingFace"]["token"] = HF_TOKEN
    return config


@pytest.fixture(scope="module")
def stacks(recording) -> dict[str, Deployed]:
    """Both stacks deployed once under mocks (the cloud one with its two secrets set)."""
    return {"demo": deploy(*recording, stack_config("demo")),
            "cloud": deploy(*recording, cloud_config())}


def annotations(r: Registration) -> dict[str, str]:
    return ((r.inputs.get("metadata") or {}).get("annotations")) or {}


def component_children(seen: Registered, type_: str, name: str) -> list[Registration]:
    return seen.children(seen.named(f"modelplane:index:{type_}", name))


def kubernetes_objects(seen: Registered) -> list[Registration]:
    return [r for r in seen.all if r.custom and r.type.startswith("kubernetes:")]


def at_path(inputs: dict, path: str) -> Any:
    """The input an ignoreChanges path names (`a.b[0].c`), or KeyError/IndexError if there is none."""
    value: Any = inputs
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


# --- retain_on_delete --------------------------------------------------------------------------

TENANT_NAMESPACES = {
    "demo": {"control/ml-team", "gpu-eu-west/ml-team", "gpu-us-east/ml-team"},
    "cloud": {"front-door/ml-team", "aws-us-east/ml-team", "gcp-us-central/ml-team"},
}


@pytest.mark.parametrize("stack", sorted(TENANT_NAMESPACES))
def test_tenant_namespaces_survive_stack_deletion_or_last_replica_leaving(stacks, stack):
    """Deleting a namespace deletes everything in it: the engine only forgets tenant namespaces.

    Every other namespace (the serving stack's, MetalLB's) is modelplane's own and is deleted.
    """
    namespaces = stacks[stack].seen.of_type(NAMESPACE)
    kept = {r.name for r in namespaces if r.retain_on_delete}
    assert kept == TENANT_NAMESPACES[stack]
    assert all(r.retain_on_delete in (None, False) for r in namespaces if r.name not in kept)
    others = [r.name for r in stacks[stack].seen.all if r.retain_on_delete and r.type != NAMESPACE]
    assert others == []


def test_a_drained_clusters_tenant_namespace_leaves_the_program_and_is_kept(repo, monitor, mocks):
    """The scenario retain_on_delete is for: the last replica leaves gpu-eu-west, its namespace is
    no longer in the program, and the engine would delete it had the first run not retained it."""
    config = stack_config("demo")
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 1
    first = deploy(monitor, mocks, config)
    assert first.seen.named(NAMESPACE, "gpu-eu-west/ml-team").retain_on_delete is True
    config["inferenceClusters"]["gpu-eu-west"]["taints"] = [{"key": "modelplane.ai/drain", "effect": "NoExecute"}]
    after = deploy(monitor, mocks, config, previous=first.result)
    assert "gpu-eu-west/ml-team" not in {r.name for r in after.seen.of_type(NAMESPACE)}
    assert after.seen.named(NAMESPACE, "gpu-us-east/ml-team").retain_on_delete is True


# --- custom_timeouts and await annotations ---------------------------------------------------------

WORKLOAD_TIMEOUTS = [  # (stack, workload type, how many the stack runs)
    ("demo", DEPLOYMENT, 4),  # engine + endpoint picker per replica
    ("cloud", DEPLOYMENT, 5),  # qwen3-8b engine + picker x2, llama-70b picker
    ("cloud", LWS, 1),  # llama-70b: leader + worker
]


@pytest.mark.parametrize("stack,type_,count", WORKLOAD_TIMEOUTS,
                         ids=[f"{s}-{t.rsplit(':', 1)[-1]}" for s, t, _ in WORKLOAD_TIMEOUTS])
def test_workloads_wait_45_minutes_for_image_pulls_and_weights(stacks, stack, type_, count):
    """Engines pull large images and load weights; the provider's default (10 minutes) would fail
    the update while the replica is still starting. Delete keeps the default."""
    seen = stacks[stack].seen
    workloads = [r for r in seen.of_type(type_) if seen.by_urn[r.parent].type == "modelplane:index:ModelReplica"]
    assert len(workloads) == count
    for workload in workloads:
        assert workload.custom_timeouts == {"create": "45m", "update": "45m"}, workload.name
    # Only the workloads wait that long: a broken config object fails in the usual time.
    for replica in seen.of_type("modelplane:index:ModelReplica"):
        for child in seen.children(replica):
            if child.type not in WORKLOADS:
                assert child.custom_timeouts is None, child.name


def test_leaderworkerset_waits_for_available_condition(stacks):
    """pulumi-kubernetes has no built-in await for LeaderWorkerSets: without the annotation the
    front door would route to a leader/worker group that is still loading."""
    seen = stacks["cloud"].seen
    [lws] = seen.of_type(LWS)
    assert annotations(lws)[WAIT_FOR] == "condition=Available"
    assert lws.name == "aws-us-east/ml-team/llama-70b-f99f7-vllm-7c36e"
    assert SKIP_AWAIT not in annotations(lws)


AWAIT_ANNOTATIONS = [  # (id, stack, type, expected Pulumi await annotations, how many)
    ("gateway-created-once-it-has-an-address-demo", "demo", "kubernetes:gateway.networking.k8s.io/v1:Gateway",
     {WAIT_FOR: "jsonpath={.status.addresses[0].value}"}, 3),
    ("gateway-created-once-it-has-an-address-cloud", "cloud", "kubernetes:gateway.networking.k8s.io/v1:Gateway",
     {WAIT_FOR: "jsonpath={.status.addresses[0].value}"}, 4),
    ("cache-download-job-does-not-hold-up-the-update", "cloud", "kubernetes:batch/v1:Job", {SKIP_AWAIT: "true"}, 1),
    ("deployments-use-the-providers-own-readiness-await-demo", "demo", DEPLOYMENT, {}, 4),
    ("deployments-use-the-providers-own-readiness-await-cloud", "cloud", DEPLOYMENT, {}, 5),
]


@pytest.mark.parametrize("stack,type_,expected,count", [row[1:] for row in AWAIT_ANNOTATIONS],
                         ids=[row[0] for row in AWAIT_ANNOTATIONS])
def test_each_object_is_awaited_the_way_it_becomes_ready(stacks, stack, type_, expected, count):
    objects = [o for o in stacks[stack].seen.of_type(type_) if not o.name.endswith("/modelplane-hop")]
    assert len(objects) == count
    for obj in objects:
        pulumi_annotations = {k: v for k, v in annotations(obj).items() if k.startswith("pulumi.com/")}
        assert pulumi_annotations == expected, obj.name


def test_the_hop_gateway_is_not_awaited_for_an_address(stacks):
    """The hop's Gateway has a cluster-internal Service; nothing needs its address (backends name its Service)."""
    [hop] = [o for o in stacks["cloud"].seen.of_type("kubernetes:gateway.networking.k8s.io/v1:Gateway")
             if o.name.endswith("/modelplane-hop")]
    assert not {k for k in annotations(hop) if k.startswith("pulumi.com/")}


# --- provider inputs: no deleteUnreachable --------------------------------------------------------

CLUSTERS = {"demo": ["control", "gpu-eu-west", "gpu-us-east"],
            "cloud": ["aws-us-east", "azure-eu-west", "front-door", "gcp-us-central"]}


@pytest.mark.parametrize("stack", sorted(CLUSTERS))
def test_an_unreachable_cluster_never_silently_loses_its_state(stacks, stack):
    """No provider sets `deleteUnreachable`: with it, a refresh or destroy while a cluster is only
    unreachable drops all its objects from state without a word (seen with the real engine,
    tests/e2e). The operator opts in per run with PULUMI_K8S_DELETE_UNREACHABLE=true instead."""
    providers = stacks[stack].seen.of_type(PROVIDER)
    assert sorted(p.name for p in providers) == CLUSTERS[stack]
    for provider in providers:
        assert "deleteUnreachable" not in provider.inputs, provider.name


# --- ignore_changes ----------------------------------------------------------------------------------

IGNORED_CHANGES = [  # (type, name, ignoreChanges)
    ("azure-native:containerservice:ManagedCluster", "azure-eu-west-aks", ["agentPoolProfiles[0].count"]),
    ("azure-native:containerservice:AgentPool", "azure-eu-west-a100", ["count"]),
    ("gcp:container/nodePool:NodePool", "gcp-us-central-system", ["initialNodeCount"]),
    ("gcp:container/nodePool:NodePool", "gcp-us-central-l4", ["initialNodeCount"]),
]
# pulumi_eks components take the same switch as an input (ignore desiredSize in scalingConfig).
EKS_SCALING_IGNORED = ["aws-us-east-system", "aws-us-east-h100", "front-door-system"]


@pytest.mark.parametrize("type_,name,ignored", IGNORED_CHANGES, ids=[row[1] for row in IGNORED_CHANGES])
def test_autoscaled_node_counts_are_not_reset_by_the_next_update(stacks, type_, name, ignored):
    """The configured count only seeds a pool; afterwards the autoscaler owns it. Without
    ignore_changes every `pulumi up` would scale the pool back (GKE: recreate it)."""
    pool = stacks["cloud"].seen.named(type_, name)
    assert pool.ignore_changes == ignored
    for path in ignored:
        at_path(pool.inputs, path)  # names an input the program sets (a renamed field would ignore nothing)


@pytest.mark.parametrize("name", EKS_SCALING_IGNORED)
def test_autoscaled_eks_node_groups_are_not_reset_by_the_next_update(stacks, name):
    group = stacks["cloud"].seen.named("eks:index:ManagedNodeGroup", name)
    assert group.inputs["ignoreScalingChanges"] is True
    assert "desiredSize" in group.inputs["scalingConfig"]


@pytest.mark.parametrize("stack", sorted(CLUSTERS))
def test_no_other_config_change_is_ignored(stacks, stack):
    ignoring = {(r.type, r.name) for r in stacks[stack].seen.all if r.ignore_changes}
    expected = {(t, n) for t, n, _ in IGNORED_CHANGES} if stack == "cloud" else set()
    assert ignoring == expected


# --- kind: delete_before_replace, additional_secret_outputs --------------------------------------

KIND_CLUSTERS = CLUSTERS["demo"]


@pytest.mark.parametrize("cluster", KIND_CLUSTERS)
def test_a_changed_kind_cluster_is_deleted_before_it_is_recreated(stacks, cluster):
    """kind cannot reshape a cluster and the new one has the same name: the old one goes first."""
    seen = stacks["demo"].seen
    create = seen.named(COMMAND, f"{cluster}-kind")
    assert create.delete_before_replace is True
    assert "triggers[*]" in create.replace_on_changes  # a changed trigger (config, image) is a replacement
    assert create.inputs["triggers"][0] == create.inputs["create"]
    others = {r.name for r in seen.all if r.delete_before_replace}
    assert others == {f"{c}-kind" for c in KIND_CLUSTERS}


@pytest.mark.parametrize("cluster", KIND_CLUSTERS)
def test_kind_kubeconfig_is_encrypted_in_state(stacks, cluster):
    """`kind get kubeconfig` prints a client key: its stdout is a secret output."""
    kubeconfig = stacks["demo"].seen.named(COMMAND, f"{cluster}-kubeconfig")
    assert kubeconfig.additional_secret_outputs == ["stdout"]


# --- protect, version, providers ---------------------------------------------------------------------

@pytest.mark.parametrize("stack", sorted(CLUSTERS))
def test_no_resource_is_protected_so_the_stack_can_be_destroyed(stacks, stack):
    protected = [r.name for r in stacks[stack].seen.all if r.protect]
    assert protected == []


@pytest.mark.parametrize("stack", sorted(CLUSTERS))
def test_every_kubernetes_object_goes_through_the_installed_kubernetes_provider(stacks, stack):
    """Objects registered through the generic CustomResource path (a Gateway whose status is read
    back) name the plugin version themselves; without it the engine may load another version."""
    version = k8s_utilities.get_version()
    objects = kubernetes_objects(stacks[stack].seen)
    assert any(r.type.endswith(":Gateway") for r in objects)
    wrong = [(r.type, r.name, r.version) for r in objects + stacks[stack].seen.of_type(PROVIDER)
             if r.version != version]
    assert wrong == []


def test_eks_components_create_their_aws_resources_in_the_configured_region(stacks):
    """pulumi_eks components get the cluster's own AWS provider (region and profile from the config);
    without it their VPC-side resources would land wherever `aws:region` points."""
    seen = stacks["cloud"].seen
    components = [r for r in seen.all if r.type.startswith("eks:index:")]
    assert {r.name for r in components} == {"aws-us-east-eks", "aws-us-east-system", "aws-us-east-h100",
                                            "front-door-eks", "front-door-system"}
    for component in components:
        cluster = component.parent_name
        provider = seen.named("pulumi:providers:aws", f"{cluster}-aws")
        assert provider.inputs["region"] == "us-east-1"
        assert component.providers == {"aws": f"{provider.urn}::{cluster}-aws-id"}, component.name


def test_a_failed_chart_install_rolls_back_and_gives_up_after_15_minutes(stacks):
    for stack in ("demo", "cloud"):
        releases = stacks[stack].seen.of_type(RELEASE)
        assert releases
        for release in releases:
            assert (release.inputs["atomic"], release.inputs["timeout"]) == (True, 900), release.name


# --- depends_on: the order a cluster can take things in ------------------------------------------

Edges = list[tuple[Registration, Registration]]  # (dependent, prerequisite)


def _named(seen: Registered, type_: str, name: str) -> Registration:
    return seen.named(type_, name)


def nodes_before_provider(seen: Registered) -> Edges:
    """Each cluster's provider after what makes the cluster usable: kind's cluster and kubeconfig,
    cloud node pools, the EKS EFS driver and mount targets (ModelCache's StorageClass needs them)."""
    def is_ready(r: Registration, cluster: str) -> bool:
        if not r.name.startswith(f"{cluster}-"):
            return False
        if r.type == COMMAND:
            return r.name in (f"{cluster}-kind", f"{cluster}-kubeconfig")
        if r.type == "aws:eks/addon:Addon":
            return r.name.endswith("-efs-csi")
        return r.type in ("eks:index:ManagedNodeGroup", "gcp:container/nodePool:NodePool",
                          "azure-native:containerservice:AgentPool", "azure-native:containerservice:ManagedCluster",
                          "aws:efs/mountTarget:MountTarget")

    edges = []
    for provider in seen.of_type(PROVIDER):
        ready = [r for r in seen.all if is_ready(r, provider.name)]
        assert ready, provider.name
        edges += [(provider, r) for r in ready]
    return edges


def _system_objects(seen: Registered, stack: str) -> list[Registration]:
    """Namespaces and quotas of the serving stack / front door (not tenant namespaces)."""
    return [r for r in seen.all
            if r.type in (NAMESPACE, "kubernetes:core/v1:ResourceQuota") and r.name not in TENANT_NAMESPACES[stack]]


def namespaces_and_quotas_before_releases(stack: str) -> Callable[[Registered], Edges]:
    """Charts' pods are admitted against the namespaces' labels and quotas: those come first."""
    def edges(seen: Registered) -> Edges:
        system = _system_objects(seen, stack)
        assert system
        return [(release, obj) for release in seen.of_type(RELEASE) for obj in system
                if obj.provider_name == release.provider_name]
    return edges


def pairs(rows: list[tuple[str, str, str, str]], clusters: list[str]) -> Callable[[Registered], Edges]:
    """(dependent type, name, prerequisite type, name) per cluster; `{c}` in a name is the cluster."""
    def edges(seen: Registered) -> Edges:
        return [(_named(seen, dt, dn.format(c=c)), _named(seen, pt, pn.format(c=c)))
                for c in clusters for dt, dn, pt, pn in rows]
    return edges


WORKLOAD_RELEASES = [  # a workload cluster's releases, in the order their charts need
    (RELEASE, "{c}/mp-gateway-helm", RELEASE, "{c}/mp-cert-manager"),
    (RELEASE, "{c}/mp-gateway-helm", CONFIG_FILE, "{c}/inference-extension-crds"),  # InferencePool CRD first
    (RELEASE, "{c}/mp-ai-gateway-helm", RELEASE, "{c}/mp-gateway-helm"),
    (RELEASE, "{c}/mp-ai-gateway-helm", RELEASE, "{c}/mp-ai-gateway-crds-helm"),
]
SERVED_OBJECTS = [  # objects of kinds a chart installs, after that chart
    ("kubernetes:gateway.networking.k8s.io/v1:GatewayClass", "{c}/envoy", RELEASE, "{c}/mp-gateway-helm"),
    ("kubernetes:gateway.networking.k8s.io/v1:Gateway", "{c}/modelplane-system/inference-gateway",
     RELEASE, "{c}/mp-gateway-helm"),
    ("kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy", "{c}/modelplane-system/inference-gateway",
     RELEASE, "{c}/mp-gateway-helm"),
]
METALLB = [
    ("kubernetes:metallb.io/v1beta1:IPAddressPool", "{c}/metallb-system/modelplane", RELEASE, "{c}/metallb"),
    ("kubernetes:metallb.io/v1beta1:L2Advertisement", "{c}/metallb-system/modelplane", RELEASE, "{c}/metallb"),
]
FRONT_DOOR = [  # Envoy Gateway's chart serves every custom resource of the front door (the Gateway API's too)
    ("kubernetes:gateway.networking.k8s.io/v1:GatewayClass", "{c}/modelplane-front-door", RELEASE, "{c}/mp-gateway-helm"),
    ("kubernetes:gateway.networking.k8s.io/v1:Gateway", "{c}/modelplane-system/modelplane", RELEASE, "{c}/mp-gateway-helm"),
    ("kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyExtensionPolicy", "{c}/modelplane-system/model-router",
     RELEASE, "{c}/mp-gateway-helm"),
    ("kubernetes:gateway.envoyproxy.io/v1alpha1:ClientTrafficPolicy", "{c}/modelplane-system/front-door",
     RELEASE, "{c}/mp-gateway-helm"),
]

SERVING_STACK_ORDER = [  # (id, stack, edges)
    ("demo-namespaces-before-releases", "demo", namespaces_and_quotas_before_releases("demo")),
    ("cloud-namespaces-and-quotas-before-releases", "cloud", namespaces_and_quotas_before_releases("cloud")),
    ("cloud-nvidia-driver-after-its-quota", "cloud",
     pairs([(RELEASE, "{c}/mp-dra-driver-nvidia-gpu", "kubernetes:core/v1:ResourceQuota",
             "{c}/dra-driver-nvidia-gpu/allow-critical-pods")], ["aws-us-east", "azure-eu-west", "gcp-us-central"])),
    ("demo-releases-in-dependency-order", "demo",
     pairs(WORKLOAD_RELEASES + [(RELEASE, "{c}/mp-dra-example-driver", RELEASE, "{c}/mp-cert-manager")],
           ["gpu-eu-west", "gpu-us-east"])),
    ("cloud-releases-in-dependency-order", "cloud",
     pairs(WORKLOAD_RELEASES, ["aws-us-east", "azure-eu-west", "gcp-us-central"])),
    ("demo-front-door-releases-in-order", "demo",
     pairs([(RELEASE, "{c}/mp-gateway-helm", RELEASE, "{c}/metallb")], ["control"])),
    ("demo-served-objects-after-their-chart", "demo",
     pairs(SERVED_OBJECTS + METALLB, ["gpu-eu-west", "gpu-us-east"])),
    ("demo-metallb-objects-after-metallb-on-the-front-door", "demo", pairs(METALLB, ["control"])),
    ("cloud-served-objects-after-their-chart", "cloud",
     pairs(SERVED_OBJECTS, ["aws-us-east", "azure-eu-west", "gcp-us-central"])),
    ("demo-front-door-after-envoy-gateway", "demo", pairs(FRONT_DOOR, ["control"])),
    ("cloud-front-door-after-envoy-gateway", "cloud", pairs(FRONT_DOOR, ["front-door"])),
]


# What a replica's object waits for on its cluster besides its namespace, by its type: the release or CRD
# manifest its kind comes from, and for a workload whose pods claim devices, the DRA driver (its DeviceClass).
REPLICA_PREREQUISITES = {
    "kubernetes:inference.networking.k8s.io/v1:InferencePool": ("inference-extension-crds",),
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute": ("mp-gateway-helm",),
    LWS: ("mp-lws", "mp-dra-example-driver", "mp-dra-driver-nvidia-gpu"),
    DEPLOYMENT: ("mp-dra-example-driver", "mp-dra-driver-nvidia-gpu"),
}


def _claims_devices(workload: Registration) -> bool:
    spec = workload.inputs["spec"]
    templates = [spec.get("template")] + [spec.get("leaderWorkerTemplate", {}).get(k) for k in ("leaderTemplate",
                                                                                                 "workerTemplate")]
    return any((t or {}).get("spec", {}).get("resourceClaims") for t in templates)


def replica_edges(what: str) -> Callable[[Registered], Edges]:
    """Per replica: its workloads after its config objects, or every child after its tenant namespace and
    what its kind needs from the serving stack (REPLICA_PREREQUISITES)."""
    def edges(seen: Registered) -> Edges:
        out = []
        for replica in seen.of_type("modelplane:index:ModelReplica"):
            objects = seen.children(replica)
            workloads = [r for r in objects if r.type in WORKLOADS]
            config = [r for r in objects if r.type not in WORKLOADS]
            assert workloads and config, replica.name
            cluster = objects[0].provider_name
            if what == "config":
                out += [(w, c) for w in workloads for c in config]
            else:
                installed = {r.name.split("/", 1)[1]: r for r in component_children(seen, "ServingStack", cluster)
                             if r.type in (RELEASE, CONFIG_FILE)}
                namespace = seen.named(NAMESPACE, f"{cluster}/{replica.name.split('/')[0]}")
                for o in objects:
                    needs = [n for n in REPLICA_PREREQUISITES.get(o.type, ()) if n in installed
                             and (o.type not in WORKLOADS or "dra" not in n or _claims_devices(o))]
                    out += [(o, p) for p in [namespace, *(installed[n] for n in needs)]]
        return out
    return edges


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_replica_objects_wait_for_nothing_else_of_the_serving_stack(stacks, stack):
    """Nothing more than REPLICA_PREREQUISITES: every dependency is a URN in the state of each object that names
    it, and work for the engine on every `up` (a Role waiting for Prometheus was 10 URNs of 2 it needs)."""
    seen = stacks[stack].seen
    wanted = {(o.urn, p.urn) for o, p in replica_edges("stack")(seen)}
    extra = set()
    for replica in seen.of_type("modelplane:index:ModelReplica"):
        cluster = seen.children(replica)[0].provider_name
        stack_parts = {r.urn for r in component_children(seen, "ServingStack", cluster)}
        extra |= {(o.name, d.rsplit("::", 1)[-1]) for o in seen.children(replica) for d in o.dependencies
                  if d in stack_parts and (o.urn, d) not in wanted}
    assert extra == set()
    claiming = [o for r in seen.of_type("modelplane:index:ModelReplica") for o in seen.children(r)
                if o.type in WORKLOADS and _claims_devices(o)]
    assert claiming  # the rule for device claims is exercised


def cache_edges(seen: Registered) -> Edges:
    """The cache's objects after its tenant namespace; replicas that mount the cache after its PVC."""
    out = []
    for cache in seen.of_type("modelplane:index:ModelCache"):
        for obj in seen.children(cache):
            out.append((obj, seen.named(NAMESPACE, f"{obj.provider_name}/{cache.name.split('/')[0]}")))
            if obj.type != "kubernetes:core/v1:PersistentVolumeClaim":
                continue
            for replica in seen.of_type("modelplane:index:ModelReplica"):
                objects = seen.children(replica)
                if objects[0].provider_name == obj.provider_name:
                    out += [(o, obj) for o in objects if o.type in WORKLOADS]
    assert out
    return out


REPLICA_ORDER = [
    ("demo-workloads-after-their-config", "demo", replica_edges("config")),
    ("cloud-workloads-after-their-config", "cloud", replica_edges("config")),
    ("demo-replicas-after-the-serving-stack-and-namespace", "demo", replica_edges("stack")),
    ("cloud-replicas-after-the-serving-stack-and-namespace", "cloud", replica_edges("stack")),
    ("cloud-replicas-after-the-cache-volume-they-mount", "cloud", cache_edges),
]


def endpoint_after_workloads(seen: Registered) -> Edges:
    """A replica's Backend after its workloads (ready), and after its cluster's gateway has a name on the front door."""
    out = []
    for replica in seen.of_type("modelplane:index:ModelReplica"):
        workloads = [r for r in seen.children(replica) if r.type in WORKLOADS]
        endpoint = component_children(seen, "ModelEndpoint", replica.name)
        assert {r.type.rsplit(":", 1)[-1] for r in endpoint} == {"Backend"}
        cluster = workloads[0].provider_name
        alias = component_children(seen, "GatewayAlias", cluster)
        assert {r.type.rsplit(":", 1)[-1] for r in alias} == {"Service", "EndpointSlice"}
        out += [(e, w) for e in endpoint for w in workloads + alias]
    return out


def front_door_ready(cluster: str) -> Callable[[Registered], Edges]:
    """Endpoints and routes after the front door's CRDs, its releases (Traefik: the auth
    Middleware's CRD) and their tenant namespace."""
    def edges(seen: Registered) -> Edges:
        gateway = component_children(seen, "InferenceGateway", cluster)
        ready = [r for r in gateway if r.type in (RELEASE, CONFIG_FILE)]
        out = []
        for type_ in ("ModelEndpoint", "ModelService"):
            for component in seen.of_type(f"modelplane:index:{type_}"):
                namespace = seen.named(NAMESPACE, f"{cluster}/{component.name.split('/')[0]}")
                out += [(o, p) for o in seen.children(component) for p in ready + [namespace]]
        return out
    return edges


FRONT_DOOR_ORDER = [
    ("demo", endpoint_after_workloads),
    ("cloud", endpoint_after_workloads),
]


@pytest.mark.parametrize("stack,edges", FRONT_DOOR_ORDER, ids=[row[0] for row in FRONT_DOOR_ORDER])
def test_front_door_endpoint_waits_for_replica_workload(stacks, stack, edges):
    """An endpoint (and so the route) never points at a replica that is still starting: its
    Service and EndpointSlice are created only once every workload of the replica is available."""
    assert_ordered(edges(stacks[stack].seen))


def route_after_endpoints(seen: Registered) -> Edges:
    out = []
    for service in seen.of_type("modelplane:index:ModelService"):
        [route] = [r for r in seen.children(service) if r.type.endswith(":HTTPRoute")]
        names = {ref["name"] for rule in route.inputs["spec"]["rules"] for ref in rule["backendRefs"]}
        namespace = service.name.split("/")[0]
        endpoints = [o for component in seen.of_type("modelplane:index:ModelEndpoint")
                     if component.name.startswith(f"{namespace}/")
                     for o in seen.children(component)]
        backends = [o for o in endpoints if o.type.endswith(":Backend") and o.inputs["metadata"]["name"] in names]
        assert len({b.inputs["metadata"]["name"] for b in backends}) == len(names), service.name
        out += [(route, b) for b in backends]
    return out


SERVICE_ORDER = [
    ("demo-route-after-its-endpoints", "demo", route_after_endpoints),
    ("cloud-route-after-its-endpoints", "cloud", route_after_endpoints),
    ("demo-front-door-objects-after-traefik-crds-and-namespace", "demo", front_door_ready("control")),
    ("cloud-front-door-objects-after-traefik-crds-and-namespace", "cloud", front_door_ready("front-door")),
]

BACKEND_ORDER = [
    ("kind-kubeconfig-and-network-read-after-the-cluster-exists", "demo",
     pairs([(COMMAND, "{c}-kubeconfig", COMMAND, "{c}-kind"), (COMMAND, "{c}-kind-network", COMMAND, "{c}-kind")],
           KIND_CLUSTERS)),
    ("gke-cluster-after-the-filestore-api", "cloud",
     pairs([("gcp:container/cluster:Cluster", "{c}-gke", "gcp:projects/service:Service", "{c}-filestore-api")],
           ["gcp-us-central"])),
    ("eks-nat-after-the-internet-gateway", "cloud",
     pairs([("aws:ec2/natGateway:NatGateway", "{c}-nat", "aws:ec2/internetGateway:InternetGateway", "{c}-igw")],
           ["aws-us-east", "front-door"])),
    ("eks-nodes-after-their-routes-and-role-policies", "cloud",
     pairs([("eks:index:ManagedNodeGroup", "{c}-system", "aws:ec2/routeTableAssociation:RouteTableAssociation",
             "{c}-private-us-east-1a"),
            ("eks:index:ManagedNodeGroup", "{c}-system", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
             "{c}-node-worker"),
            ("eks:index:ManagedNodeGroup", "{c}-system", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
             "{c}-node-cni")], ["aws-us-east", "front-door"])),
    ("eks-gpu-nodes-after-their-routes-and-role-policies", "cloud",
     pairs([("eks:index:ManagedNodeGroup", "{c}-h100", "aws:ec2/routeTableAssociation:RouteTableAssociation",
             "{c}-private-us-east-1c"),
            ("eks:index:ManagedNodeGroup", "{c}-h100", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
             "{c}-node-ecr")], ["aws-us-east"])),
    ("eks-addons-after-the-system-nodes", "cloud",
     pairs([("aws:eks/addon:Addon", "{c}-pod-identity-agent", "eks:index:Cluster", "{c}-eks"),
            ("aws:eks/addon:Addon", "{c}-pod-identity-agent", "eks:index:ManagedNodeGroup", "{c}-system"),
            ("aws:eks/addon:Addon", "{c}-efs-csi", "eks:index:ManagedNodeGroup", "{c}-system"),
            ("aws:eks/addon:Addon", "{c}-efs-csi", "aws:eks/addon:Addon", "{c}-pod-identity-agent"),
            ("aws:eks/addon:Addon", "{c}-efs-csi", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
             "{c}-efs-csi-efs")], ["aws-us-east"])),
]


def assert_ordered(edges: Edges) -> None:
    assert edges, "nothing to check"
    missing = sorted({(d.type.rsplit(":", 1)[-1], d.name, p.type.rsplit(":", 1)[-1], p.name)
                      for d, p in edges if not d.depends_on(p)})
    assert missing == [], "created before what it needs: " + "; ".join(f"{a} {b} before {c} {e}"
                                                                      for a, b, c, e in missing)


@pytest.mark.parametrize("stack", sorted(CLUSTERS))
def test_nothing_is_applied_to_a_cluster_before_its_nodes_are_ready(stacks, stack):
    assert_ordered(nodes_before_provider(stacks[stack].seen))


@pytest.mark.parametrize("stack,edges", [row[1:] for row in SERVING_STACK_ORDER],
                         ids=[row[0] for row in SERVING_STACK_ORDER])
def test_serving_stack_installs_in_the_order_its_charts_need(stacks, stack, edges):
    """Namespaces and quotas, then the charts in dependency order (and after the CRDs they watch),
    then the objects of kinds those charts serve."""
    assert_ordered(edges(stacks[stack].seen))


@pytest.mark.parametrize("stack,edges", [row[1:] for row in REPLICA_ORDER], ids=[row[0] for row in REPLICA_ORDER])
def test_replica_workloads_start_after_the_serving_stack_and_their_config(stacks, stack, edges):
    assert_ordered(edges(stacks[stack].seen))


@pytest.mark.parametrize("stack,edges", [row[1:] for row in SERVICE_ORDER], ids=[row[0] for row in SERVICE_ORDER])
def test_service_route_waits_for_its_endpoints(stacks, stack, edges):
    """The route names an endpoint only once it exists (so once its replica is ready), and the
    front door's objects come after Traefik, the Gateway API CRDs and their namespace."""
    assert_ordered(edges(stacks[stack].seen))


@pytest.mark.parametrize("stack,edges", [row[1:] for row in BACKEND_ORDER], ids=[row[0] for row in BACKEND_ORDER])
def test_cluster_backends_create_in_dependency_order(stacks, stack, edges):
    assert_ordered(edges(stacks[stack].seen))


# --- the unsubstituted `<secret: …>` placeholder guard -------------------------------------------

TOKEN = placeholder("modelEndpoints", "ml-team", "together", "auth", "token")
HF = placeholder("modelCaches", "ml-team", "qwen3-8b", "huggingFace", "token")
KUBECONFIG = "apiVersion: v1\nkind: Config\n"

PLACEHOLDER_OBJECTS = [  # (id, object holding a placeholder, the config key the error names)
    ("secret-string-data", {"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "hf-token", "namespace": "ml-team"},
                            "stringData": {"HF_TOKEN": HF}},
     "modelplane:modelCaches.ml-team.qwen3-8b.huggingFace.token"),
    ("header-inside-a-custom-resource", {"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware",
                                         "metadata": {"name": "together-auth", "namespace": "ml-team"},
                                         "spec": {"headers": {"customRequestHeaders": {
                                             "Authorization": f"Bearer {TOKEN}"}}}},
     "modelplane:modelEndpoints.ml-team.together.auth.token"),
    ("env-in-a-list", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hydrate", "namespace": "ml-team"},
                       "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                                                                      "env": [{"name": "T", "value": HF}]}]}}}},
     "modelplane:modelCaches.ml-team.qwen3-8b.huggingFace.token"),
]


@pytest.mark.parametrize("obj,key", [row[1:] for row in PLACEHOLDER_OBJECTS],
                         ids=[row[0] for row in PLACEHOLDER_OBJECTS])
def test_an_unsubstituted_secret_placeholder_stops_the_run_with_a_clear_error(monitor, obj, key):
    """A rendered object with a `<secret: …>` placeholder and no value is never applied: the run
    fails naming the config key to set, and the placeholder reaches no registered input."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}
    other = placeholder("modelEndpoints", "ml-team", "other", "auth", "token")

    @pulumi.runtime.test
    def run():
        provider = k8s.Provider("rack", kubeconfig=KUBECONFIG)
        parent = pulumi.ComponentResource("modelplane:index:ModelCache", "ml-team/qwen3-8b")
        apply_objects("rack", [namespace, obj], children(parent, provider),
                      replacements={other: pulumi.Output.secret("not-this-one")})

    with pytest.raises(ValueError, match=re.escape(f"no value for {key}: set it with "
                                                   "`pulumi config set --secret --path`")):
        run()
    names = [r.name for r in monitor.registrations]
    assert "rack/ml-team" in names  # objects before it were applied as usual
    assert f"rack/ml-team/{obj['metadata']['name']}" not in names
    assert not any("<secret:" in json.dumps(r.inputs) for r in monitor.registrations)


def test_a_secret_placeholder_with_a_value_is_applied_as_a_secret(monitor):
    obj = PLACEHOLDER_OBJECTS[1][1]
    seen = {}

    @pulumi.runtime.test
    def run():
        provider = k8s.Provider("rack", kubeconfig=KUBECONFIG)
        parent = pulumi.ComponentResource("modelplane:index:ModelEndpoint", "ml-team/together")
        [applied] = apply_objects("rack", [obj], children(parent, provider),
                                  replacements={TOKEN: pulumi.Output.secret(SAAS_KEY)})
        return applied.urn.apply(lambda urn: seen.setdefault("urn", urn))

    run()
    [middleware] = [r for r in monitor.registrations if r.urn == seen["urn"]]
    assert middleware.inputs["spec"]["headers"]["customRequestHeaders"] == {"Authorization": f"Bearer {SAAS_KEY}"}
    assert "spec" in middleware.secret_inputs


DROPPED_SECRETS = [  # (id, the placeholder the program forgets to fill, the config key the error names)
    ("cache-token", "modelCaches", "modelplane:modelCaches.ml-team.qwen3-8b.huggingFace.token"),
    ("endpoint-token", "modelEndpoints", "modelplane:modelEndpoints.ml-team.together.auth.token"),
]


@pytest.mark.parametrize("dropped,key", [row[1:] for row in DROPPED_SECRETS],
                         ids=[row[0] for row in DROPPED_SECRETS])
def test_a_secret_the_program_does_not_fill_stops_the_run(monitor, mocks, monkeypatch, dropped, key):
    """The whole cloud program, with one secret placeholder left without a value (as if the
    program forgot to map a config field): the run stops and the placeholder is never sent."""
    fill = infra_deploy.secret_values
    monkeypatch.setattr(infra_deploy, "secret_values",
                        lambda fleet: {k: v for k, v in fill(fleet).items() if dropped not in k})
    with pytest.raises(ValueError, match=re.escape(f"no value for {key}:")):
        deploy(monitor, mocks, cloud_config())
    assert monitor.registrations  # the run got as far as the placement
    assert not any("<secret:" in json.dumps(r.inputs) for r in monitor.registrations)


def test_no_secret_placeholder_reaches_a_registered_input(stacks):
    seen = stacks["cloud"].seen
    leaked = [r.name for r in seen.all if "<secret:" in json.dumps(r.inputs)]
    assert leaked == []
    holders = [r for r in seen.all if SAAS_KEY in json.dumps(r.inputs) or HF_TOKEN in json.dumps(r.inputs)]
    assert holders and all(r.secret_inputs for r in holders)
