"""AKS: a resource group (or an existing one), a VNet with one node subnet, a cluster with Azure CNI
overlay networking and a system pool, and one autoscaling agent pool per GPU pool with the NVIDIA
driver installed by AKS. Azure Files CSI is built into AKS, so ModelCache needs only a StorageClass
(rendered: `render.cache.storage_classes`).
"""

from __future__ import annotations

import base64
from typing import Any

import pulumi
from pulumi_azure_native import containerservice, network, resources

from ...api.inference_class import AKSProvisioning
from ...render.types import GPU_TAINT_KEY, POOL_LABEL
from .base import GPU_TAINT_VALUE, SYSTEM_POOL, ClusterAccess, ClusterRequest, GpuPool

SYSTEM_VM_SIZE = "Standard_D4s_v5"
SYSTEM_DISK_GB = 100
# Overlay: pods get addresses outside the VNet, so only nodes use the subnet.
NETWORK_PROFILE: dict[str, Any] = {
    "network_plugin": "azure",
    "network_plugin_mode": "overlay",
    "pod_cidr": "10.244.0.0/16",
    "service_cidr": "10.96.0.0/16",
    "dns_service_ip": "10.96.0.10",
}


def provision(request: ClusterRequest, parent: pulumi.Resource) -> ClusterAccess:
    block, name = request.block(), request.name
    opts = pulumi.ResourceOptions(parent=parent)
    if block.resource_group_name:  # an existing group: used, never created nor deleted
        group = pulumi.Output.from_input(block.resource_group_name)
    else:
        group = resources.ResourceGroup(f"{name}-rg", location=block.location, opts=opts).name

    vnet = network.VirtualNetwork(
        f"{name}-vnet",
        resource_group_name=group,
        location=block.location,
        address_space={"address_prefixes": [block.networking.vnet_cidr]},
        opts=opts,
    )
    subnet = network.Subnet(
        f"{name}-nodes",
        resource_group_name=group,
        virtual_network_name=vnet.name,
        address_prefix=block.networking.subnet_cidr,
        opts=opts,
    )
    cluster = containerservice.ManagedCluster(  # type: ignore[call-overload]  # plain dicts for the SDK's TypedDict args
        f"{name}-aks",
        resource_group_name=group,
        location=block.location,
        dns_prefix=name,
        kubernetes_version=block.kubernetes_version,
        identity={"type": "SystemAssigned"},
        network_profile=NETWORK_PROFILE,
        agent_pool_profiles=[
            {
                "name": SYSTEM_POOL,
                "mode": "System",
                "vm_size": SYSTEM_VM_SIZE,
                "os_type": "Linux",
                "os_disk_size_gb": SYSTEM_DISK_GB,
                "type": "VirtualMachineScaleSets",
                "vnet_subnet_id": subnet.id,
                "count": 1,
                "enable_auto_scaling": True,
                "min_count": 1,
                "max_count": 2,
                "node_labels": {POOL_LABEL: SYSTEM_POOL},
            }
        ],
        # count is only the seed; the cluster autoscaler owns it afterwards
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["agentPoolProfiles[0].count"]),
    )
    gpu = [_agent_pool(request, pool, group, cluster, subnet, parent) for pool in request.pools]

    credentials = containerservice.list_managed_cluster_user_credentials_output(
        resource_group_name=group, resource_name=cluster.name
    )
    kubeconfig = credentials.kubeconfigs[0].value.apply(lambda encoded: base64.b64decode(encoded).decode())
    return ClusterAccess(kubeconfig=pulumi.Output.secret(kubeconfig), ready=[cluster, *gpu])


def _agent_pool(
    request: ClusterRequest,
    pool: GpuPool,
    group: pulumi.Input[str],
    cluster: containerservice.ManagedCluster,
    subnet: network.Subnet,
    parent: pulumi.Resource,
) -> containerservice.AgentPool:
    spec = pool.provisioning_block(AKSProvisioning)
    if pool.pool.fabric_type == "InfiniBand":
        pulumi.log.warn(
            f"cluster {request.name}: pool {pool.name} asks for InfiniBand; the NVIDIA network operator "
            "that exposes it is not installed, so its nodes use Ethernet only",
            parent,
        )
    return containerservice.AgentPool(
        f"{request.name}-{pool.name}",
        agent_pool_name=pool.name,
        resource_group_name=group,
        resource_name_=cluster.name,
        mode="User",
        vm_size=spec.vm_size,
        os_type="Linux",
        os_disk_size_gb=spec.disk_size_gb,
        type="VirtualMachineScaleSets",
        vnet_subnet_id=subnet.id,
        availability_zones=pool.pool.zones or None,
        gpu_profile={"driver": "Install"},
        count=pool.pool.node_count,
        enable_auto_scaling=True,
        min_count=pool.min_nodes,
        max_count=pool.max_nodes,
        node_labels=pool.labels(),
        node_taints=[f"{GPU_TAINT_KEY}={GPU_TAINT_VALUE}:NoSchedule"],
        # count is only the seed; the cluster autoscaler owns it afterwards
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["count"]),
    )
