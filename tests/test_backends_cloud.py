"""EKS, GKE and AKS backends under mocks: the pools a user asked for, the secret kubeconfig, the
ModelCache StorageClass, and that nothing loads a cloud SDK before a cluster needs it.

Requests come from stacks/Pulumi.cloud.yaml with small edits. Each test provisions inside
`pulumi.runtime.test` (which waits for every registration) and then checks what the engine received.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

import pulumi
import pytest
import yaml

from cloud_mocks import GKE_ENDPOINT, MOCK_CA
from builders import REPO
from pulumi_recording import Registration
from modelplane.api import load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.infra import backends
from modelplane.infra.backends import aks, eks, gke
from modelplane.infra.backends.base import ClusterRequest, GpuPool
from modelplane.infra.components.common import deployed_values
from modelplane.infra.kube import substitute
from modelplane.render.cache import CLOUD_STORAGE_CLASSES, storage_classes
from modelplane.render.types import ClusterStack

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true"}


@cache
def cloud_config() -> dict:
    return read_stack_file(REPO / "stacks" / "Pulumi.cloud.yaml").config


def request(cluster: str, pool: dict | None = None, source: dict | None = None, pools: bool = True) -> ClusterRequest:
    """The cloud stack's `cluster`, its first pool's config updated with `pool`, its source block with `source`."""
    config = copy.deepcopy(cloud_config())
    entry = config["inferenceClusters"][cluster]
    entry["nodePools"][0].update(pool or {})
    block = entry["cluster"]["source"].lower()
    entry["cluster"][block].update(source or {})
    fleet = load_fleet(config)
    ic = fleet.inference_clusters[cluster]
    gpu_pools = tuple(GpuPool(p, fleet.inference_classes[p.class_name]) for p in ic.node_pools) if pools else ()
    return ClusterRequest(cluster, ic.cluster, gpu_pools)


@dataclass
class Provisioned:
    request: ClusterRequest
    registrations: list[Registration]
    kubeconfig: str
    kubeconfig_is_secret: bool
    objects: list[dict]
    ready: list[str]  # URNs

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def named(self, type_: str, name: str) -> Registration:
        [match] = [r for r in self.of_type(type_) if r.name == name]
        return match


def cluster_objects(req: ClusterRequest, access) -> list[dict]:
    """The rendered objects the cluster itself gets (its StorageClass), filled as the InferenceCluster fills them:
    the render's deploy-time placeholders from what the backend reports."""
    spec = SimpleNamespace(cluster=req.source, node_pools=[p.pool for p in req.pools])
    objects, placeholders = storage_classes(SimpleNamespace(inference_clusters={req.name: spec}), req.name)
    stack = ClusterStack(req.name, "workload", "inference-gateway", cluster_objects=objects, placeholders=placeholders)
    return substitute(objects, deployed_values(stack, access))


def provision(module, req: ClusterRequest, monitor) -> Provisioned:
    """Provision under a throwaway InferenceCluster component; resolve what the caller would read."""
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test
    def run():
        parent = pulumi.ComponentResource("modelplane:index:InferenceCluster", req.name)
        access = backends.provision(req, parent)  # through the dispatcher, as the component calls it
        values = [access.kubeconfig, pulumi.Output.from_input(access.kubeconfig.is_secret()),
                  pulumi.Output.from_input(cluster_objects(req, access)),
                  pulumi.Output.all(*[r.urn for r in access.ready])]
        return pulumi.Output.all(*values).apply(lambda v: resolved.update(zip(
            ("kubeconfig", "secret", "objects", "ready"), v)))

    run()
    return Provisioned(req, [r for r in monitor.registrations if r.type != "modelplane:index:InferenceCluster"],
                       resolved["kubeconfig"], resolved["secret"], resolved["objects"], resolved["ready"])


def assert_common(result: Provisioned, storage_class: str) -> None:
    """What every cloud backend promises: parented, prefixed, secret kubeconfig, StorageClass name."""
    for r in result.registrations:
        assert r.parent_name == result.request.name, f"{r.type} {r.name} is not a child of the InferenceCluster"
        assert r.name.startswith(f"{result.request.name}-"), f"{r.type} {r.name} lacks the cluster prefix"
    assert result.kubeconfig_is_secret is True
    assert result.ready, "the provider would wait for nothing"
    if result.request.pools:
        [storage] = result.objects
        assert storage["kind"] == "StorageClass" and storage["metadata"]["name"] == storage_class
    else:
        assert result.objects == []


# ---------------------------------------------------------------- EKS

def eks_groups(result: Provisioned) -> dict[str, dict]:
    return {r.name: r.inputs for r in result.of_type("eks:index:ManagedNodeGroup")}


def test_eks_gpu_pool_from_the_class(monitor):
    result = provision(eks, request("aws-us-east"), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["EKS"])
    groups = eks_groups(result)
    assert set(groups) == {"aws-us-east-system", "aws-us-east-h100"}
    gpu = groups["aws-us-east-h100"]
    assert gpu["instanceTypes"] == ["p5.48xlarge"] and gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu["diskSize"] == 500
    assert gpu["scalingConfig"] == {"minSize": 1, "desiredSize": 2, "maxSize": 2}
    assert gpu["labels"] == {"modelplane.ai/pool": "h100", "modelplane.ai/gpu": "nvidia-h100-80gb"}
    assert gpu["taints"] == [{**GPU_TAINT, "effect": "NO_SCHEDULE"}]
    # EFA: interfaces and a placement group in the pool's zone, nodes only in that zone's subnet
    assert gpu["enableEfaSupport"] is True and gpu["placementGroupAvailabilityZone"] == "us-east-1a"
    assert gpu["subnetIds"] == ["aws-us-east-private-us-east-1a-id"]
    assert "launchTemplate" not in gpu and "capacityType" not in gpu


def test_eks_system_pool_network_and_cluster(monitor):
    result = provision(eks, request("aws-us-east"), monitor)
    system = eks_groups(result)["aws-us-east-system"]
    assert system["instanceTypes"] == ["m6i.xlarge"] and system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["labels"] == {"modelplane.ai/pool": "system"} and "taints" not in system
    assert system["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 2}
    subnets = {r.name: r.inputs for r in result.of_type("aws:ec2/subnet:Subnet")}
    assert {n: (s["availabilityZone"], s["cidrBlock"]) for n, s in subnets.items()} == {
        "aws-us-east-public-us-east-1a": ("us-east-1a", "10.0.0.0/20"),
        "aws-us-east-public-us-east-1b": ("us-east-1b", "10.0.16.0/20"),
        "aws-us-east-public-us-east-1c": ("us-east-1c", "10.0.32.0/20"),
        "aws-us-east-private-us-east-1a": ("us-east-1a", "10.0.48.0/20"),
        "aws-us-east-private-us-east-1b": ("us-east-1b", "10.0.64.0/20"),
        "aws-us-east-private-us-east-1c": ("us-east-1c", "10.0.80.0/20")}
    [cluster] = result.of_type("eks:index:Cluster")
    assert cluster.inputs["version"] == "1.36" and cluster.inputs["skipDefaultNodeGroup"] is True
    assert cluster.inputs["authenticationMode"] == "API_AND_CONFIG_MAP"
    assert len(cluster.inputs["privateSubnetIds"]) == 3 and len(cluster.inputs["publicSubnetIds"]) == 3
    # The nodes' role is registered with the cluster and worn by every node group.
    node_role = result.named("aws:iam/role:Role", "aws-us-east-node").urn
    assert cluster.inputs["instanceRoles"] == [node_role]
    assert {g["nodeRole"] for g in eks_groups(result).values()} == {node_role}
    # Every AWS resource goes to the config's region, through the cluster's own provider.
    assert result.named("pulumi:providers:aws", "aws-us-east-aws").inputs["region"] == "us-east-1"
    assert all(r.provider_name == "aws-us-east-aws" for r in result.registrations
               if r.custom and r.type.startswith("aws:"))
    kubeconfig = json.loads(result.kubeconfig)
    assert kubeconfig["users"][0]["user"]["exec"]["args"][-1] == cluster.inputs["name"]


def test_eks_efs_behind_the_storage_class(monitor):
    result = provision(eks, request("aws-us-east"), monitor)
    [storage] = result.objects
    assert storage["provisioner"] == "efs.csi.aws.com"
    assert storage["parameters"] == {"provisioningMode": "efs-ap", "fileSystemId": "aws-us-east-cache-id",
                                     "directoryPerms": "700"}
    fs = result.named("aws:efs/fileSystem:FileSystem", "aws-us-east-cache").inputs
    assert fs["encrypted"] is True and fs["throughputMode"] == "elastic"
    assert len(result.of_type("aws:efs/mountTarget:MountTarget")) == 3
    addons = {r.inputs["addonName"]: r for r in result.of_type("aws:eks/addon:Addon")}
    assert set(addons) == {"eks-pod-identity-agent", "aws-efs-csi-driver"}
    assert addons["aws-efs-csi-driver"].inputs["podIdentityAssociations"] == [
        {"roleArn": "arn:aws:iam::123456789012:role/mock-pods-role", "serviceAccount": "efs-csi-controller-sa"}]
    policies = {r.name: r.inputs for r in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert policies["aws-us-east-efs-csi-efs"] == {
        "role": "mock-pods-role", "policyArn": "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"}
    assert addons["aws-efs-csi-driver"].urn in result.ready


@pytest.fixture
def aws_profile():
    pulumi.runtime.set_config("aws:profile", "ml-platform")
    yield "ml-platform"
    pulumi.runtime.config.CONFIG.get().pop("aws:profile", None)


def test_eks_keeps_the_aws_profile_for_its_provider_and_kubeconfig(monitor, aws_profile):
    result = provision(eks, request("aws-us-east"), monitor)
    assert result.named("pulumi:providers:aws", "aws-us-east-aws").inputs["profile"] == aws_profile
    [cluster] = result.of_type("eks:index:Cluster")
    assert cluster.inputs["providerCredentialOpts"] == {"profileName": aws_profile}


@pytest.mark.parametrize("pool, scaling", [
    ({"nodeCount": 3, "minNodeCount": None, "maxNodeCount": None}, {"minSize": 3, "desiredSize": 3, "maxSize": 3}),
    ({"nodeCount": 0, "minNodeCount": None, "maxNodeCount": None}, {"minSize": 0, "desiredSize": 0, "maxSize": 1}),
    ({"nodeCount": 1, "minNodeCount": 0, "maxNodeCount": 8}, {"minSize": 0, "desiredSize": 1, "maxSize": 8}),
])
def test_eks_bounds(monitor, pool, scaling):
    result = provision(eks, request("aws-us-east", pool), monitor)
    assert eks_groups(result)["aws-us-east-h100"]["scalingConfig"] == scaling


def test_eks_pool_across_zones_without_efa(monitor):
    result = provision(eks, request("aws-us-east", {"zones": ["us-east-1b", "us-east-1c"], "fabric": None}), monitor)
    gpu = eks_groups(result)["aws-us-east-h100"]
    assert gpu["subnetIds"] == ["aws-us-east-private-us-east-1b-id", "aws-us-east-private-us-east-1c-id"]
    assert "enableEfaSupport" not in gpu


def test_eks_capacity_block_launches_into_the_reservation(monitor, caplog):
    result = provision(eks, request("aws-us-east", {"capacityBlock": {"capacityReservationId": "cr-0abc123"}}), monitor)
    gpu = eks_groups(result)["aws-us-east-h100"]
    assert gpu["capacityType"] == "CAPACITY_BLOCK" and "diskSize" not in gpu
    template = result.named("aws:ec2/launchTemplate:LaunchTemplate", "aws-us-east-h100").inputs
    assert gpu["launchTemplate"] == {"id": "aws-us-east-h100-id", "version": "1"}
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0abc123"}}
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 500
    # EFA is not wired together with a capacity block: said out loud, not silently dropped
    assert "enableEfaSupport" not in gpu
    assert any("capacity block and fabric EFA" in m for m in caplog.messages)


def test_eks_without_pools_is_a_cluster_and_its_system_pool(monitor):
    result = provision(eks, request("aws-us-east", pools=False), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["EKS"])
    assert set(eks_groups(result)) == {"aws-us-east-system"}
    assert result.of_type("aws:efs/fileSystem:FileSystem") == []


@pytest.mark.parametrize("pool, source, message", [
    ({"zones": ["us-east-1e"]}, None, "uses zone\\(s\\) us-east-1e"),
    (None, {"networking": {"vpcCidr": "10.0.0.0/18",
                           "subnetCidrs": ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"]}}, "outside vpcCidr"),
])
def test_eks_network_mistakes_stop_before_any_cloud_call(monitor, pool, source, message):
    with pytest.raises(pulumi.RunError, match=message):
        provision(eks, request("aws-us-east", pool, source), monitor)


# ---------------------------------------------------------------- GKE

def gke_pools(result: Provisioned) -> dict[str, dict]:
    return {r.name: r.inputs for r in result.of_type("gcp:container/nodePool:NodePool")}


def test_gke_gpu_pool_from_the_class(monitor):
    result = provision(gke, request("gcp-us-central"), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["GKE"])
    pools = gke_pools(result)
    assert set(pools) == {"gcp-us-central-system", "gcp-us-central-l4"}
    gpu = pools["gcp-us-central-l4"]
    node = gpu["nodeConfig"]
    assert node["machineType"] == "g2-standard-8" and node["diskSizeGb"] == 100 and node["imageType"] == "COS_CONTAINERD"
    assert node["guestAccelerators"] == [{"type": "nvidia-l4", "count": 1,
                                          "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}}]
    assert node["labels"] == {"modelplane.ai/pool": "l4", "modelplane.ai/gpu": "nvidia-l4",
                              "cloud.google.com/gke-nvidia-gpu-dra-driver": "true"}
    assert "taints" not in node  # GKE taints GPU nodes itself
    assert gpu["nodeLocations"] == ["us-central1-a", "us-central1-b"]
    assert gpu["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 4}
    assert gpu["initialNodeCount"] == 1  # per zone: 2 nodes over 2 zones
    assert gpu["location"] == "us-central1" and gpu["cluster"] == "mock-gke"
    assert pools["gcp-us-central-l4"] and result.ready[-1].endswith("::gcp-us-central-l4")


def test_gke_system_pool_network_and_cluster(monitor):
    result = provision(gke, request("gcp-us-central"), monitor)
    system = gke_pools(result)["gcp-us-central-system"]
    assert system["nodeConfig"]["machineType"] == "e2-standard-4"
    assert system["nodeConfig"]["labels"] == {"modelplane.ai/pool": "system"}
    assert system["autoscaling"] == {"totalMinNodeCount": 1, "totalMaxNodeCount": 2} and system["initialNodeCount"] == 1
    assert system["nodeLocations"] == ["us-central1-a"]  # next to the first GPU pool
    [network] = result.of_type("gcp:compute/network:Network")
    assert network.inputs["autoCreateSubnetworks"] is False
    [subnet] = result.of_type("gcp:compute/subnetwork:Subnetwork")
    assert subnet.inputs["ipCidrRange"] == "10.0.0.0/24" and subnet.inputs["region"] == "us-central1"
    assert subnet.inputs["secondaryIpRanges"] == [{"rangeName": "pods", "ipCidrRange": "10.1.0.0/16"},
                                                  {"rangeName": "services", "ipCidrRange": "10.2.0.0/16"}]
    [cluster] = result.of_type("gcp:container/cluster:Cluster")
    c = cluster.inputs
    assert c["location"] == "us-central1" and c["minMasterVersion"] == "1.35"
    assert c["releaseChannel"] == {"channel": "REGULAR"} and c["removeDefaultNodePool"] is True
    assert c["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"}
    assert c["addonsConfig"] == {"gcpFilestoreCsiDriverConfig": {"enabled": True}}
    assert c["workloadIdentityConfig"] == {"workloadPool": "mock-project.svc.id.goog"}  # the provider's project
    [api] = result.of_type("gcp:projects/service:Service")
    assert api.inputs["service"] == "file.googleapis.com" and api.urn in cluster.dependencies


def test_gke_kubeconfig_uses_the_auth_plugin(monitor):
    result = provision(gke, request("gcp-us-central"), monitor)
    kubeconfig = yaml.safe_load(result.kubeconfig)
    assert kubeconfig["clusters"][0]["cluster"] == {"server": f"https://{GKE_ENDPOINT}",
                                                    "certificate-authority-data": MOCK_CA}
    exec_ = kubeconfig["users"][0]["user"]["exec"]
    assert exec_["command"] == "gke-gcloud-auth-plugin" and exec_["provideClusterInfo"] is True
    assert kubeconfig["current-context"] == "gcp-us-central"


def test_gke_filestore_storage_class_on_the_cluster_network(monitor):
    [storage] = provision(gke, request("gcp-us-central"), monitor).objects
    assert storage["provisioner"] == "filestore.csi.storage.gke.io"
    assert storage["parameters"] == {"tier": "enterprise", "network": "mock-network"}
    assert storage["volumeBindingMode"] == "Immediate" and storage["allowVolumeExpansion"] is True


@pytest.mark.parametrize("pool, initial, bounds", [
    ({"nodeCount": 3, "minNodeCount": None, "maxNodeCount": None}, 1, (3, 3)),  # 2 per zone would pass the max of 3
    ({"nodeCount": 4, "minNodeCount": 0, "maxNodeCount": 8}, 2, (0, 8)),
    ({"nodeCount": 0, "minNodeCount": None, "maxNodeCount": None}, 0, (0, 1)),
    ({"nodeCount": 3, "minNodeCount": 1, "maxNodeCount": 5, "zones": ["us-central1-f"]}, 3, (1, 5)),
])
def test_gke_bounds_and_per_zone_seed(monitor, pool, initial, bounds):
    gpu = gke_pools(provision(gke, request("gcp-us-central", pool), monitor))["gcp-us-central-l4"]
    assert gpu["initialNodeCount"] == initial
    assert (gpu["autoscaling"]["totalMinNodeCount"], gpu["autoscaling"]["totalMaxNodeCount"]) == bounds


def test_gke_project_from_the_source_block(monitor):
    result = provision(gke, request("gcp-us-central", source={"project": "ml-prod"}), monitor)
    assert all(r.inputs.get("project") == "ml-prod" for r in result.registrations if r.type.startswith("gcp:"))
    [cluster] = result.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "ml-prod.svc.id.goog"}


def test_gke_without_pools_puts_the_system_pool_in_one_zone_of_the_region(monitor):
    result = provision(gke, request("gcp-us-central", pools=False), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["GKE"])
    assert list(gke_pools(result)) == ["gcp-us-central-system"]
    assert gke_pools(result)["gcp-us-central-system"]["nodeLocations"] == ["us-central1-b"]


# ---------------------------------------------------------------- AKS

def aks_pools(result: Provisioned) -> dict[str, dict]:
    return {r.name: r.inputs for r in result.of_type("azure-native:containerservice:AgentPool")}


def test_aks_gpu_pool_from_the_class(monitor):
    result = provision(aks, request("azure-eu-west"), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["AKS"])
    [gpu] = aks_pools(result).values()
    assert gpu["agentPoolName"] == "a100" and gpu["mode"] == "User"
    assert gpu["vmSize"] == "Standard_NC24ads_A100_v4" and gpu["osDiskSizeGB"] == 100
    assert gpu["gpuProfile"] == {"driver": "Install"}
    assert (gpu["count"], gpu["enableAutoScaling"], gpu["minCount"], gpu["maxCount"]) == (2, True, 1, 3)
    assert gpu["availabilityZones"] == ["1", "2"]
    assert gpu["nodeLabels"] == {"modelplane.ai/pool": "a100", "modelplane.ai/gpu": "nvidia-a100-80gb"}
    assert gpu["nodeTaints"] == ["nvidia.com/gpu=true:NoSchedule"]
    assert gpu["resourceName"] == "mock-aks" and gpu["vnetSubnetID"] == "azure-eu-west-nodes-id"
    assert any(urn.endswith("::azure-eu-west-a100") for urn in result.ready)


def test_aks_cluster_system_pool_and_network(monitor):
    result = provision(aks, request("azure-eu-west"), monitor)
    [group] = result.of_type("azure-native:resources:ResourceGroup")
    assert group.inputs["location"] == "westeurope"
    [vnet] = result.of_type("azure-native:network:VirtualNetwork")
    assert vnet.inputs["addressSpace"] == {"addressPrefixes": ["10.0.0.0/16"]}
    [subnet] = result.of_type("azure-native:network:Subnet")
    assert subnet.inputs["addressPrefix"] == "10.0.0.0/20"
    [cluster] = result.of_type("azure-native:containerservice:ManagedCluster")
    c = cluster.inputs
    assert c["kubernetesVersion"] == "1.34" and c["identity"] == {"type": "SystemAssigned"}
    assert c["networkProfile"]["networkPluginMode"] == "overlay" and c["networkProfile"]["podCidr"] == "10.244.0.0/16"
    [system] = c["agentPoolProfiles"]
    assert (system["name"], system["mode"], system["vmSize"]) == ("system", "System", "Standard_D4s_v5")
    assert (system["minCount"], system["maxCount"], system["osDiskSizeGB"]) == (1, 2, 100)
    assert system["nodeLabels"] == {"modelplane.ai/pool": "system"} and "nodeTaints" not in system
    assert {r.inputs["resourceGroupName"] for r in result.registrations if "resourceGroupName" in r.inputs} == {"mock-rg"}


def test_aks_kubeconfig_is_the_decoded_user_credential(monitor):
    result = provision(aks, request("azure-eu-west"), monitor)
    kubeconfig = yaml.safe_load(result.kubeconfig)
    assert kubeconfig["kind"] == "Config" and kubeconfig["clusters"][0]["name"] == "mock-aks"


def test_aks_existing_resource_group_is_used_not_created(monitor):
    result = provision(aks, request("azure-eu-west", source={"resourceGroupName": "ml-platform"}), monitor)
    assert result.of_type("azure-native:resources:ResourceGroup") == []
    groups = {r.inputs["resourceGroupName"] for r in result.registrations if "resourceGroupName" in r.inputs}
    assert groups == {"ml-platform"}


def test_aks_azure_files_storage_class(monitor):
    [storage] = provision(aks, request("azure-eu-west"), monitor).objects
    assert storage["provisioner"] == "file.csi.azure.com" and storage["parameters"] == {"skuName": "Premium_LRS"}
    assert {"mfsymlinks", "cache=strict", "nosharesock"} <= set(storage["mountOptions"])


@pytest.mark.parametrize("pool, expected", [
    ({"nodeCount": 1, "minNodeCount": None, "maxNodeCount": None, "zones": None}, (1, 1, 1, None)),
    ({"nodeCount": 0, "minNodeCount": None, "maxNodeCount": None}, (0, 0, 1, ["1", "2"])),
    ({"nodeCount": 2, "minNodeCount": 0, "maxNodeCount": 10, "zones": ["3"]}, (2, 0, 10, ["3"])),
])
def test_aks_bounds_and_zones(monitor, pool, expected):
    [gpu] = aks_pools(provision(aks, request("azure-eu-west", pool), monitor)).values()
    assert (gpu["count"], gpu["minCount"], gpu["maxCount"], gpu.get("availabilityZones")) == expected


def test_aks_infiniband_is_announced_not_dropped(monitor, caplog):
    provision(aks, request("azure-eu-west", {"fabric": {"type": "InfiniBand", "infiniband": {"fabric": "ib0"}}}),
              monitor)
    assert any("asks for InfiniBand" in m for m in caplog.messages)


def test_aks_without_pools_is_the_cluster_and_its_system_pool(monitor):
    result = provision(aks, request("azure-eu-west", pools=False), monitor)
    assert_common(result, CLOUD_STORAGE_CLASSES["AKS"])
    assert aks_pools(result) == {}


# ---------------------------------------------------------------- imports

SDKS = {"pulumi_aws", "pulumi_eks", "pulumi_gcp", "pulumi_azure_native"}


@pytest.mark.parametrize("module, allowed", [
    ("modelplane.infra.backends", set()),
    ("modelplane.infra.backends.eks", {"pulumi_aws", "pulumi_eks"}),
    ("modelplane.infra.backends.gke", {"pulumi_gcp"}),
    ("modelplane.infra.backends.aks", {"pulumi_azure_native"}),
])
def test_a_cloud_sdk_loads_only_with_its_backend(module, allowed):
    code = f"import sys, {module}; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(SDKS)})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == str(sorted(allowed))
