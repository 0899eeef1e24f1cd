"""GKE: a VPC with one subnet (secondary ranges `pods` and `services`), a regional cluster with the
Filestore CSI driver, a system node pool, and one node pool per GPU pool with GKE-installed drivers.

GKE taints GPU nodes `nvidia.com/gpu=present:NoSchedule` itself, so no taint is set here.
The kubeconfig authenticates with `gke-gcloud-auth-plugin`, i.e. with the credentials of whoever
runs Pulumi; it holds no key, but it is still handled as a secret like every kubeconfig.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from ...api.inference_class import GKEProvisioning
from ...render.cache import GKE_NETWORK_NAME
from ...render.types import POOL_LABEL
from .base import SYSTEM_POOL, ClusterAccess, ClusterRequest, GpuPool

SYSTEM_MACHINE_TYPE = "e2-standard-4"
IMAGE_TYPE = "COS_CONTAINERD"
DRA_DRIVER_LABEL = "cloud.google.com/gke-nvidia-gpu-dra-driver"  # lets the autoscaler scale DRA pools from 0
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # IAM, not scopes, limits what nodes do


@dataclass
class GKEAccess(ClusterAccess):
    """ClusterAccess plus what the rendered StorageClass needs from the GCP side."""

    network_name: pulumi.Output[str] | None = None  # Filestore instances attach to this VPC

    def deployed_values(self) -> dict[str, pulumi.Input[str]]:
        values = super().deployed_values()
        if self.network_name is not None:
            values[GKE_NETWORK_NAME] = self.network_name
        return values


def provision(request: ClusterRequest, parent: pulumi.Resource) -> GKEAccess:
    """Long: the cluster's resources in the order they depend on each other."""
    block, name = request.block(), request.name
    opts = pulumi.ResourceOptions(parent=parent)
    project = block.project or gcp.organizations.get_client_config_output().project  # the provider's default

    network = gcp.compute.Network(f"{name}-vpc", project=block.project, auto_create_subnetworks=False, opts=opts)
    subnet = gcp.compute.Subnetwork(
        f"{name}-nodes",
        project=block.project,
        region=block.region,
        network=network.id,
        ip_cidr_range=block.networking.node_cidr,
        private_ip_google_access=True,
        opts=opts,
        secondary_ip_ranges=[
            {"range_name": "pods", "ip_cidr_range": block.networking.pod_cidr},
            {"range_name": "services", "ip_cidr_range": block.networking.service_cidr},
        ],
    )
    filestore_api = gcp.projects.Service(
        f"{name}-filestore-api",
        project=block.project,
        service="file.googleapis.com",
        disable_on_destroy=False,
        opts=opts,
    )  # other stacks may use it too
    cluster = gcp.container.Cluster(
        f"{name}-gke",
        project=block.project,
        location=block.region,
        network=network.id,
        subnetwork=subnet.id,
        min_master_version=block.kubernetes_version,
        release_channel={"channel": "REGULAR"},
        # Pools are separate resources: the default pool is created (GKE requires one) and removed.
        remove_default_node_pool=True,
        initial_node_count=1,
        deletion_protection=False,
        ip_allocation_policy={"cluster_secondary_range_name": "pods", "services_secondary_range_name": "services"},
        workload_identity_config={"workload_pool": pulumi.Output.from_input(project).apply(_workload_pool)},
        addons_config={"gcp_filestore_csi_driver_config": {"enabled": True}},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[filestore_api]),
    )

    system = gcp.container.NodePool(
        f"{name}-{SYSTEM_POOL}",
        project=block.project,
        cluster=cluster.name,
        location=block.region,
        node_locations=_system_zone(request),
        initial_node_count=1,
        autoscaling={"total_min_node_count": 1, "total_max_node_count": 2},
        node_config={
            "machine_type": SYSTEM_MACHINE_TYPE,
            "labels": {POOL_LABEL: SYSTEM_POOL},
            "oauth_scopes": OAUTH_SCOPES,
            "workload_metadata_config": {"mode": "GKE_METADATA"},
        },
        opts=_seeded_once(opts),
    )
    gpu = [_gpu_node_pool(request, pool, cluster, opts) for pool in request.pools]

    return GKEAccess(
        kubeconfig=pulumi.Output.secret(_kubeconfig(name, cluster)), ready=[system, *gpu], network_name=network.name
    )


def _seeded_once(opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    # initialNodeCount only seeds a pool (changing it would recreate the pool); the autoscaler
    # moves within the bounds afterwards.
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"]))


def _system_zone(request: ClusterRequest) -> pulumi.Input[list[str]]:
    """One zone for the system pool, next to the first GPU pool; a regional pool would start a node
    in every zone of the region, above its bound of 2."""
    if request.pools:
        first = request.pools[0].pool.zones
        assert first is not None  # required on GKE (validated)
        return [first[0]]
    block = request.block()
    zones = gcp.compute.get_zones_output(project=block.project, region=block.region)
    return zones.names.apply(lambda names: sorted(names)[:1])


def _gpu_node_pool(
    request: ClusterRequest, pool: GpuPool, cluster: gcp.container.Cluster, opts: pulumi.ResourceOptions
) -> gcp.container.NodePool:
    spec = pool.provisioning_block(GKEProvisioning)
    zones = pool.pool.zones
    assert zones is not None  # required on GKE (validated)
    # GKE counts initial nodes per zone but bounds per pool (total_*): round up so the pool starts
    # with at least nodeCount nodes, unless that would pass the upper bound.
    per_zone = math.ceil(pool.pool.node_count / len(zones))
    if per_zone * len(zones) > pool.max_nodes:
        per_zone = pool.pool.node_count // len(zones)
    return gcp.container.NodePool(
        f"{request.name}-{pool.name}",
        project=request.block().project,
        cluster=cluster.name,
        location=request.block().region,
        node_locations=zones,
        initial_node_count=per_zone,
        autoscaling={"total_min_node_count": pool.min_nodes, "total_max_node_count": pool.max_nodes},
        node_config={
            "machine_type": spec.machine_type,
            "disk_size_gb": spec.disk_size_gb,
            "image_type": IMAGE_TYPE,
            "guest_accelerators": [
                {
                    "type": spec.accelerator.type,
                    "count": spec.accelerator.count,
                    "gpu_driver_installation_config": {"gpu_driver_version": "DEFAULT"},
                }
            ],
            "labels": {**pool.labels(), DRA_DRIVER_LABEL: "true"},
            "oauth_scopes": OAUTH_SCOPES,
            "workload_metadata_config": {"mode": "GKE_METADATA"},
        },
        opts=_seeded_once(opts),
    )


def _kubeconfig(name: str, cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """What `gcloud container clusters get-credentials` writes, as JSON (valid YAML)."""

    def build(args: list) -> str:
        endpoint, ca = args
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": name,
                "clusters": [
                    {"name": name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca}}
                ],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                "users": [
                    {
                        "name": name,
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": "gke-gcloud-auth-plugin",
                                "provideClusterInfo": True,
                                "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
                            }
                        },
                    }
                ],
            }
        )

    return pulumi.Output.all(cluster.endpoint, cluster.master_auth.cluster_ca_certificate).apply(build)


def _workload_pool(project: str | None) -> str | None:
    """Workload Identity's pool is named after the project (unknown only when no project is configured)."""
    return f"{project}.svc.id.goog" if project else None
