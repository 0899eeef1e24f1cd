"""What every cluster backend yields, and the node-pool conventions every backend follows.

A backend turns a `ClusterSource` (Existing, Kind, EKS, GKE, AKS) plus the GPU pools the fleet
asks for into a reachable cluster: a kubeconfig (always a Pulumi secret) for the cluster's
`pulumi_kubernetes.Provider`, and the resources that must exist before anything is applied to it
(node pools, node labels). Cloud SDKs are imported inside the backend module that needs them, so a
stack that does not use a cloud never loads its SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import pulumi

from ...api.inference_class import AKSProvisioning, EKSProvisioning, GKEProvisioning, InferenceClass
from ...api.inference_cluster import ClusterSource, NodePool
from ...render.metallb import ADDRESS_POOL
from ...render.types import POOL_LABEL

GPU_LABEL = "modelplane.ai/gpu"  # the accelerator type, informational
GPU_TAINT_VALUE = "true"
_Block = TypeVar("_Block", GKEProvisioning, EKSProvisioning, AKSProvisioning)
SYSTEM_POOL = "system"  # the non-GPU pool every provisioned cluster gets, for the serving stack


@dataclass(frozen=True)
class GpuPool:
    """One `nodePools[]` entry of a cluster with the InferenceClass it names."""

    pool: NodePool
    inference_class: InferenceClass

    @property
    def name(self) -> str:
        return self.pool.name

    def provisioning_block(self, kind: type[_Block]) -> _Block:
        """The InferenceClass's provisioning block for a cloud pool (validation required it, for the cluster's cloud)."""
        provisioning = self.inference_class.provisioning
        assert provisioning is not None
        block = provisioning.block()
        assert isinstance(block, kind)
        return block

    def labels(self) -> dict[str, str]:
        labels = {POOL_LABEL: self.pool.name}
        provisioning = self.inference_class.provisioning
        if provisioning is not None:
            labels[GPU_LABEL] = provisioning.block().accelerator.type
        return labels

    # Without bounds a pool is fixed at nodeCount: nothing scales (or bills) beyond what the
    # scheduler counted on. Clouds need max >= 1 even for an empty pool.
    @property
    def min_nodes(self) -> int:
        return self.pool.min_node_count if self.pool.min_node_count is not None else self.pool.node_count

    @property
    def max_nodes(self) -> int:
        return self.pool.max_node_count if self.pool.max_node_count is not None else max(self.pool.node_count, 1)


@dataclass(frozen=True)
class ClusterRequest:
    """What a backend is asked to provide."""

    name: str  # the cluster's modelplane name (its component's name)
    source: ClusterSource
    pools: tuple[GpuPool, ...] = ()  # none for the front door's cluster
    # Every kind cluster of the fleet (front door included), so each carves its own MetalLB range.
    kind_clusters: tuple[str, ...] = ()

    def block(self):
        return self.source.block()


@dataclass
class ClusterAccess:
    """A provisioned (or existing) cluster, as the rest of the program needs it."""

    kubeconfig: pulumi.Output[str]  # a Pulumi secret, always
    context: str | None = None  # a kubeconfig context to select (Existing only)
    # Resources that must be complete before anything is applied through the provider
    # (node pools, node labels): the provider depends on them.
    ready: list[pulumi.Resource] = field(default_factory=list)
    # Set on clusters without a cloud load balancer (kind): the address range MetalLB hands out,
    # inside the nodes' network. Cloud clusters leave it None.
    metallb_pool: pulumi.Output[str] | None = None

    def deployed_values(self) -> dict[str, pulumi.Input[str]]:
        """Values the cluster has once deployed, by the name rendered placeholders give them
        (`<deployed: <cluster>.<name>>`, or a kind cluster's MetalLB range)."""
        return {ADDRESS_POOL: self.metallb_pool} if self.metallb_pool is not None else {}
