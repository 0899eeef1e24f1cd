"""What rendering produces: plain Kubernetes objects (dicts) and Helm release specs, per cluster."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYSTEM_NAMESPACE = "modelplane-system"
WORKLOAD_GATEWAY = "inference-gateway"  # the Envoy Gateway on every workload cluster
FRONT_DOOR_GATEWAY = "modelplane"  # the Traefik Gateway on the front-door cluster
MANAGED_BY = {"app.kubernetes.io/managed-by": "modelplane"}


@dataclass(frozen=True)
class HelmRelease:
    """A Helm release to install (the Pulumi layer turns it into helm.v3.Release)."""

    name: str  # release name, `mp-<chart>` as the reference names them
    namespace: str
    chart: str
    repository: str  # https://... chart repository, or oci://... registry
    version: str
    values: dict[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()  # releases (by name) that must be installed first

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "chart": self.chart, "repository": self.repository,
                "version": self.version, "values": self.values, "dependsOn": list(self.depends_on)}


@dataclass
class ClusterManifests:
    """Everything one cluster gets: objects in apply order, and Helm releases."""

    cluster: str
    role: str  # "workload" | "front-door"
    objects: list[dict[str, Any]] = field(default_factory=list)
    releases: list[HelmRelease] = field(default_factory=list)


def meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    if labels:
        out["labels"] = dict(labels)
    if annotations:
        out["annotations"] = dict(annotations)
    return out


def gateway_address_placeholder(cluster: str) -> str:
    """Until a workload gateway has an address (known after deploy), rendering shows where it goes."""
    return f"inference-gateway.{cluster}.invalid"


def check_unique_names(cluster: str, objects: list[dict[str, Any]]) -> None:
    """Two objects of one kind with one name in one namespace: the second would overwrite the first."""
    seen: set[tuple] = set()
    for obj in objects:
        identity = (obj.get("apiVersion", "").split("/")[0], obj["kind"], obj["metadata"].get("namespace"),
                    obj["metadata"]["name"])
        if identity in seen:
            where = f"{identity[2]}/" if identity[2] else ""
            raise ValueError(f"cluster {cluster}: two {identity[1]} objects are named {where}{identity[3]}; "
                             "this is a modelplane bug, please report it with the stack file")
        seen.add(identity)
