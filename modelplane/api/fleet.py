"""The Fleet: the whole stack config as one validated object, keyed the way users address it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import ConfigIssue
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .labels import missing_labels
from .mirror import Mirror
from .model_cache import ModelCache
from .model_deployment import ModelDeployment
from .model_service import ModelEndpoint, ModelService
from .scheduling import Packing, SchedulingConfig
from .serving_stack import FAKE_GPU_DRIVER, ServingStack, ServingStackConfig

GKE_NVIDIA_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"  # where GKE's driver installer puts the driver


@dataclass(frozen=True, order=True)
class NamespacedName:
    """Identity of a namespaced object. Two same-named deployments in two namespaces are two objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Fleet:
    inference_classes: dict[str, InferenceClass] = field(default_factory=dict)
    inference_clusters: dict[str, InferenceCluster] = field(default_factory=dict)
    inference_gateway: InferenceGateway | None = None
    model_deployments: dict[NamespacedName, ModelDeployment] = field(default_factory=dict)
    model_services: dict[NamespacedName, ModelService] = field(default_factory=dict)
    model_caches: dict[NamespacedName, ModelCache] = field(default_factory=dict)
    model_endpoints: dict[NamespacedName, ModelEndpoint] = field(default_factory=dict)
    serving_stack: ServingStackConfig | None = None
    mirror: Mirror | None = None  # modelplane:mirror: where charts and CRD manifests come from
    scheduling: SchedulingConfig | None = None  # modelplane:scheduling: how pools' capacity is counted
    warnings: tuple[ConfigIssue, ...] = ()

    @property
    def packing(self) -> Packing:
        """How the scheduler counts a pool's capacity (`modelplane:scheduling.packing`)."""
        return self.scheduling.packing if self.scheduling is not None else "DeviceGranular"

    def counts(self) -> dict[str, int]:
        """Objects per kind, in the order users read them."""
        return {
            "InferenceClass": len(self.inference_classes),
            "InferenceCluster": len(self.inference_clusters),
            "InferenceGateway": 1 if self.inference_gateway else 0,
            "ModelDeployment": len(self.model_deployments),
            "ModelService": len(self.model_services),
            "ModelCache": len(self.model_caches),
            "ModelEndpoint": len(self.model_endpoints),
        }

    def summary(self) -> str:
        counts = self.counts()
        replicas = sum(d.replicas for d in self.model_deployments.values())
        parts = [f"{n} {kind if n == 1 else _plural(kind)}" for kind, n in counts.items()]
        return ", ".join(parts) + f"; {replicas} replica{'' if replicas == 1 else 's'} requested"

    def serving_stack_for(self, cluster: str) -> ServingStack:
        """The fleet-wide stack with the cluster's overrides; GKE installs the NVIDIA driver elsewhere."""
        inference_cluster = self.inference_clusters[cluster]
        source_default = (
            ServingStackConfig(nvidia_driver_root=GKE_NVIDIA_DRIVER_ROOT)
            if inference_cluster.cluster.source == "GKE"
            else None
        )
        return ServingStack.effective(source_default, self.serving_stack, inference_cluster.serving_stack)

    def uses_fake_gpus(self, cluster: str) -> bool:
        """Whether `cluster`'s pools claim fake `gpu.example.com` devices (dra-example-driver's).

        Those clusters (the kind demo) get the example DRA driver instead of the NVIDIA one.
        """
        pools = self.inference_clusters[cluster].node_pools
        drivers = {
            device.driver
            for pool in pools
            if (cls := self.inference_classes.get(pool.class_name))
            for device in cls.devices
            if device.claim == "DRA"
        }
        return FAKE_GPU_DRIVER in drivers

    def clusters_matching(self, match_labels: dict[str, str] | None) -> list[str]:
        """Names (sorted) of clusters whose labels contain every pair of `match_labels`."""
        wanted = match_labels or {}
        return sorted(
            name for name, cluster in self.inference_clusters.items() if not missing_labels(cluster.labels, wanted)
        )

    def deployments_in(self, namespace: str) -> Iterator[tuple[NamespacedName, ModelDeployment]]:
        return ((key, d) for key, d in sorted(self.model_deployments.items()) if key.namespace == namespace)


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith("s") else "s")
