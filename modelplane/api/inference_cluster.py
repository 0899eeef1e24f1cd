"""InferenceCluster: a workload cluster, where it comes from, its node pools, labels and taints."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import (
    ApiModel,
    DnsSubdomain,
    Labels,
    LabelValue,
    QualifiedName,
    Rules,
    RuleViolation,
    SecretValue,
    SingleLine,
    duplicates,
)
from .errors import shown
from .serving_stack import ServingStackConfig

# kind node image for the demo: Kubernetes >= 1.34.2 (the 1.34.0 kubelet DRA deadlock is fixed),
# pinned by digest so every laptop runs the same bits.
DEFAULT_KIND_NODE_IMAGE = "kindest/node:v1.34.3@sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48"

SourceName = Literal["Existing", "Kind", "EKS", "GKE", "AKS"]
_UNSUPPORTED_SOURCES = {"Nebius", "Vultr"}

_AKS_POOL_NAME = re.compile(r"[a-z][a-z0-9]{0,11}")  # matched with fullmatch, as every name grammar
_KIND_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")

# Nodes in one pool: AKS caps an agent pool at 1,000 nodes and GKE a node pool at 1,000 per zone
# (nodeCount is the pool's total here); EKS's managed node groups default to 450, raisable by
# quota. Beyond 1,000 no cloud provisions the pool, and a kind pool would be 1,000 containers.
MAX_POOL_NODES = 1000


def _cidr(value: str) -> str:
    if (problem := syntax.cidr_problem(value)) is not None:
        raise ValueError(problem)
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]


class CacheStorage(ApiModel):
    storage_class_name: DnsSubdomain = Field(min_length=1, max_length=253)


class ExistingSource(ApiModel):
    """A cluster you already run, reached through a kubeconfig kept as a Pulumi secret."""

    kubeconfig: SecretValue
    context: SingleLine | None = Field(default=None, min_length=1)
    cache: CacheStorage | None = None  # an RWX StorageClass, needed only for ModelCache


class KindSource(ApiModel):
    """A local kind cluster, created with `kind create cluster` through pulumi-command."""

    cluster_name: str | None = Field(default=None, min_length=1, max_length=40)  # default: the cluster's name
    node_image: SingleLine = Field(default=DEFAULT_KIND_NODE_IMAGE, min_length=1)

    @model_validator(mode="after")
    def _kind_name(self) -> KindSource:
        rules = Rules()
        if self.cluster_name is not None:
            rules.check(
                bool(_KIND_NAME.fullmatch(self.cluster_name)),
                ["clusterName"],
                f"{shown(self.cluster_name)} is not a valid kind cluster name: lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit",
            )
        rules.raise_if_any()
        return self


class EKSNetworking(ApiModel):
    vpc_cidr: Cidr = "10.0.0.0/16"
    subnet_cidrs: list[Cidr] = Field(
        default_factory=lambda: ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"], min_length=2, max_length=6
    )


class EKSSource(ApiModel):
    region: SingleLine = Field(min_length=1, max_length=32)
    kubernetes_version: SingleLine = "1.36"
    networking: EKSNetworking = Field(default_factory=EKSNetworking)


class GKENetworking(ApiModel):
    pod_cidr: Cidr = "10.1.0.0/16"
    service_cidr: Cidr = "10.2.0.0/16"
    node_cidr: Cidr = "10.0.0.0/24"


class GKESource(ApiModel):
    region: SingleLine = Field(min_length=1, max_length=32)
    project: SingleLine | None = Field(default=None, min_length=1)  # default: the gcp:project config
    kubernetes_version: SingleLine = "1.35"
    networking: GKENetworking = Field(default_factory=GKENetworking)


class AKSNetworking(ApiModel):
    vnet_cidr: Cidr = "10.0.0.0/16"
    subnet_cidr: Cidr = "10.0.0.0/20"


class AKSSource(ApiModel):
    location: SingleLine = Field(min_length=1, max_length=32)
    resource_group_name: SingleLine | None = Field(default=None, min_length=1, max_length=90)
    kubernetes_version: SingleLine = "1.34"
    networking: AKSNetworking = Field(default_factory=AKSNetworking)


class ClusterSource(ApiModel):
    """Where a cluster comes from. Each source has its own block, named after it in lower case."""

    source: SourceName
    existing: ExistingSource | None = None
    kind: KindSource | None = None
    eks: EKSSource | None = None
    gke: GKESource | None = None
    aks: AKSSource | None = None

    @model_validator(mode="before")
    @classmethod
    def _explain_unsupported_sources(cls, data: Any) -> Any:
        source = data.get("source") if isinstance(data, dict) else None
        if isinstance(source, str) and source in _UNSUPPORTED_SOURCES:
            raise RuleViolation(
                [
                    (
                        ("source",),
                        f"source {source} is not supported by this implementation; provision "
                        "the cluster yourself and use source: Existing with its kubeconfig",
                    )
                ]
            )
        if source == "Kind" and data.get("kind") is None:
            data = {**data, "kind": {}}  # every kind setting has a default
        return data

    @model_validator(mode="after")
    def _one_block_for_the_source(self) -> ClusterSource:
        rules = Rules()
        wanted = self.source.lower()
        rules.check(getattr(self, wanted) is not None, [wanted], f"source {self.source} requires the '{wanted}' block")
        for other in ("existing", "kind", "eks", "gke", "aks"):
            if other != wanted and getattr(self, other) is not None:
                rules.fail(
                    [other], f"block '{other}' does not apply to source {self.source}; remove it or change source"
                )
        rules.raise_if_any()
        return self

    @property
    def is_cloud(self) -> bool:
        return self.source in ("EKS", "GKE", "AKS")

    def block(self) -> ExistingSource | KindSource | EKSSource | GKESource | AKSSource:
        return getattr(self, self.source.lower())


class Taint(ApiModel):
    key: QualifiedName = Field(min_length=1)
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "NoExecute"]


class CapacityBlock(ApiModel):
    # pydantic matches `pattern` with Rust's regex, where `$` is the end of the text ("cr-1\n" fails; tested)
    capacity_reservation_id: str = Field(min_length=4, max_length=64, pattern=r"^cr-[0-9a-f]+$")


class InfiniBand(ApiModel):
    fabric: SingleLine = Field(min_length=1, max_length=63)


class Fabric(ApiModel):
    type: Literal["None", "EFA", "InfiniBand"] = "None"
    infiniband: InfiniBand | None = None

    @model_validator(mode="after")
    def _block_only_for_infiniband(self) -> Fabric:
        rules = Rules()
        rules.check(
            self.infiniband is None or self.type == "InfiniBand",
            ["infiniband"],
            "is only valid when type is InfiniBand",
        )
        rules.raise_if_any()
        return self


class NodePool(ApiModel):
    name: LabelValue = Field(min_length=1, max_length=40)  # becomes the node label modelplane.ai/pool=<name>
    class_name: SingleLine = Field(min_length=1, max_length=253)
    node_count: int = Field(default=1, ge=0, le=MAX_POOL_NODES)
    min_node_count: int | None = Field(default=None, ge=0, le=MAX_POOL_NODES)
    max_node_count: int | None = Field(default=None, ge=1, le=MAX_POOL_NODES)
    zones: list[Annotated[SingleLine, Field(min_length=1, max_length=63)]] | None = Field(default=None, max_length=16)
    capacity_block: CapacityBlock | None = None
    fabric: Fabric | None = None

    @model_validator(mode="after")
    def _bounds(self) -> NodePool:
        rules = Rules()
        low, high = self.min_node_count, self.max_node_count
        if low is not None and high is not None:
            rules.check(low <= high, ["minNodeCount"], f"must not exceed maxNodeCount ({low} > {high})")
        if low is not None:
            rules.check(
                self.node_count >= low, ["nodeCount"], f"must be at least minNodeCount ({self.node_count} < {low})"
            )
        if high is not None:
            rules.check(
                self.node_count <= high, ["nodeCount"], f"must not exceed maxNodeCount ({self.node_count} > {high})"
            )
        for i, zone in duplicates(self.zones or []):
            rules.fail(["zones", i], f"zone {shown(zone)} is listed twice")
        rules.raise_if_any()
        return self

    @property
    def fabric_type(self) -> str:
        return self.fabric.type if self.fabric else "None"


class InferenceCluster(ApiModel):
    labels: Labels = Field(default_factory=dict)  # what clusterSelector.matchLabels matches
    cluster: ClusterSource
    taints: list[Taint] = Field(default_factory=list, max_length=64)
    node_pools: list[NodePool] = Field(default_factory=list, min_length=1, max_length=8)  # leave out for none
    serving_stack: ServingStackConfig | None = None  # per-cluster overrides of modelplane:servingStack

    @model_validator(mode="after")
    def _pool_rules(self) -> InferenceCluster:
        rules = Rules()
        source = self.cluster.source
        rules.unique_names("nodePools", self.node_pools, "pool", " in a cluster")
        for i, (key, effect) in duplicates((t.key, t.effect) for t in self.taints):
            rules.fail(["taints", i], f"taint {key}:{effect} is listed twice")
        for i, pool in enumerate(self.node_pools):
            at: list[str | int] = ["nodePools", i]
            if self.cluster.is_cloud or source == "Kind":
                rules.check(
                    pool.name != "system",
                    at + ["name"],
                    "'system' is the name of the non-GPU pool every provisioned cluster gets; choose another",
                )
            if source == "AKS":
                rules.check(
                    bool(_AKS_POOL_NAME.fullmatch(pool.name)),
                    at + ["name"],
                    f"{shown(pool.name)} is not a valid AKS agent pool name: 1-12 lower-case letters and digits, starting with a letter",
                )
            if source == "EKS":
                rules.check(
                    bool(pool.zones),
                    at + ["zones"],
                    "is required on EKS: GPU instance types exist only in some zones (e.g. [us-east-1a])",
                )
            if source == "GKE":
                rules.check(
                    bool(pool.zones),
                    at + ["zones"],
                    "is required on GKE: accelerators exist only in some zones (e.g. [us-central1-a])",
                )
                if pool.zones and self.cluster.gke:
                    for z, zone in enumerate(pool.zones):
                        rules.check(
                            zone.startswith(self.cluster.gke.region + "-"),
                            at + ["zones", z],
                            f"zone {shown(zone)} is not in region {self.cluster.gke.region}",
                        )
            if source == "AKS" and pool.zones:
                rules.check(len(pool.zones) <= 3, at + ["zones"], "AKS takes at most 3 zones (e.g. ['1', '2', '3'])")
            if pool.capacity_block is not None:
                rules.check(source == "EKS", at + ["capacityBlock"], "capacity blocks exist only on EKS")
            fabric = pool.fabric_type
            if fabric == "EFA":
                rules.check(source == "EKS", at + ["fabric", "type"], "EFA exists only on EKS")
            if fabric == "InfiniBand":
                rules.check(source == "AKS", at + ["fabric", "type"], "InfiniBand is supported only on AKS")
        if self.serving_stack is not None and self.serving_stack.preinstalled:
            rules.check(
                source == "Existing",
                ["servingStack", "preinstalled"],
                f"only an Existing cluster can have preinstalled components: modelplane creates this {source} "
                "cluster, so nothing runs on it before modelplane installs the whole serving stack; remove "
                "servingStack.preinstalled",
            )
        rules.raise_if_any()
        return self

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.node_pools if p.name == name), None)
