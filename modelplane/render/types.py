"""What rendering produces: plain Kubernetes objects (dicts) and Helm release specs, per cluster."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .secrets import PLACEHOLDER as SECRET_PLACEHOLDER

SYSTEM_NAMESPACE = "modelplane-system"
WORKLOAD_GATEWAY = "inference-gateway"  # the Envoy Gateway on every workload cluster
WORKLOAD_GATEWAY_PORT = 80  # where the front door reaches it (servingStack.gateway's default `http` listener)
FRONT_DOOR_GATEWAY = "modelplane"  # the Gateway on the front-door cluster
MANAGED_BY = {"app.kubernetes.io/managed-by": "modelplane"}
# --- how the front door names and reaches what it routes to (the contract with the workload clusters) ---
# The front door (Envoy Gateway) keeps every backend of a service in one Envoy cluster, so that health
# checks, ejection, retries and fallback work across them; a backend then cannot carry its own path.
# Each replica is instead known to its workload cluster's gateway by a virtual host name, sent as the
# Host header of both traffic and health checks. It is never resolved in DNS.
REPLICA_HOST_SUFFIX = "replica.modelplane.internal"
ENDPOINT_HOST_SUFFIX = "endpoint.modelplane.internal"  # a hand-made endpoint's hop on the front door itself
HEALTH_PATH = "/health"  # what the front door probes on every backend (vLLM, SGLang, TGI and the mock answer it)
MODEL_HEADER = "x-modelplane-model"  # set from the request body's `model` by the front door's model router


def replica_host(namespace: str, replica: str) -> str:
    """The Host a replica answers on its workload cluster's gateway, e.g. `mock-demo-be445.ml-team.replica.modelplane.internal`."""
    return f"{replica}.{namespace}.{REPLICA_HOST_SUFFIX}"


def endpoint_host(namespace: str, endpoint: str) -> str:
    """The Host of a hand-made endpoint's hop route on the front door."""
    return f"{endpoint}.{namespace}.{ENDPOINT_HOST_SUFFIX}"


def model_name(namespace: str, service: str) -> str:
    """A ModelService's name in the request body's `model` field: `<namespace>/<service>`."""
    return f"{namespace}/{service}"


# Contracts with Kubernetes and the other layers, spelled once.
SERVING, WORKLOAD, LWS_ROLE = (
    "modelplane.ai/serving",
    "modelplane.ai/workload",
    "modelplane.ai/lws-role",
)  # pod labels
ENGINE_PORT = 8000  # where an engine serves (the InferencePool's target port)
GATEWAY_API = "gateway.networking.k8s.io/v1"  # the apiVersion of every Gateway and HTTPRoute rendered
POOL_LABEL = "modelplane.ai/pool"  # a pool's node label; a replica's nodeSelector names it (else pods stay Pending)
GPU_TAINT_KEY = "nvidia.com/gpu"  # GPU pools are tainted so that only pods tolerating it (claiming GPUs) land there
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}  # copy it into an object


def endpoint_slice_labels(service: str) -> dict[str, str]:
    """The labels that make a hand-written EndpointSlice the endpoints of Service `service`."""
    return {"kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "modelplane"}


StackRole = Literal["workload", "front-door"]  # what a cluster's serving stack is for

# A replica's workloads: applied after the replica's other objects, and awaited until available.
WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet")


@dataclass(frozen=True)
class HelmRelease:
    """A Helm release to install (the Pulumi layer turns it into helm.v3.Release)."""

    name: str  # release name, `mp-<chart>` as the reference names them
    namespace: str
    chart: str
    repository: str  # https://... chart repository, oci://... registry, or "" when `chart` is a local .tgz path
    version: str
    values: dict[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()  # releases (by name) that must be installed first

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "chart": self.chart,
            "repository": self.repository,
            "version": self.version,
            "values": self.values,
            "dependsOn": list(self.depends_on),
        }


@dataclass(frozen=True)
class RemoteManifest:
    """A multi-document YAML manifest applied from a URL: upstream CRDs that no Helm chart installs.

    The Pulumi layer applies it as a `yaml.v2.ConfigFile` named `<cluster>/<name>`. `sha256` is the
    pinned digest of the file at `url` when known (a mirror's copy must match it).
    """

    name: str  # e.g. "inference-extension-crds"
    component: str  # the servingStack component it installs, e.g. "inferenceExtension", "gatewayApi"
    version: str
    url: str  # https://... upstream, or a mirror's URL or local path
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "component": self.component,
            "version": self.version,
            "url": self.url,
            "sha256": self.sha256,
        }


@dataclass(frozen=True)
class Placeholder:
    """A value rendering cannot know, and what rendered objects hold in its place (`token`).

    Three kinds, each named (`name`) so the Pulumi layer knows what to put there:

    * a secret: `<secret: modelplane:<config path>>` (`secrets.placeholder`); the program puts the
      decrypted config value there, as a Pulumi secret.
    * a value the cluster has once deployed: `<deployed: <cluster>.<value>>` (`deployed_placeholder`),
      e.g. the EFS file system behind an EKS cluster's StorageClass; a workload gateway's address is
      `inference-gateway.<cluster>.invalid` instead (`gateway_address_placeholder`), because it sits
      in a URL and an EndpointSlice, where only a host name is valid.
    * a value computed offline from a default: a kind cluster's MetalLB range, carved from kind's
      default network; the program carves it from the real network with the same rule.

    The Pulumi layer substitutes every token it finds (`modelplane.infra.kube.substitute`); a secret
    token without a value stops the run.
    """

    name: str  # "modelplane:<config path>" (a secret) or "<cluster>.<value>"
    token: str  # exactly what the rendered objects hold
    value: str  # what `pulumi up` puts there, in words

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "renderedAs": self.token, "deployedAs": self.value}


def deployed_placeholder(cluster: str, value: str) -> str:
    """`<deployed: aws-us-east.efsFileSystemId>`: a value `cluster` has only once it is deployed."""
    return f"<deployed: {cluster}.{value}>"


@dataclass
class ClusterStack:
    """What a cluster gets whatever the plan, in install order: remote manifests, objects, Helm releases.

    `cluster_objects` are what the cluster's backend needs in it (a cloud's ReadWriteMany
    StorageClass); `objects` are the serving stack's or front door's own (MetalLB's pool, the
    Gateway, ...), in apply order. `gateway` names the Gateway (in `SYSTEM_NAMESPACE`) whose address
    is the cluster's. `placeholders` are the deploy-time values in these objects.
    """

    cluster: str
    role: StackRole
    gateway: str
    cluster_objects: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    releases: list[HelmRelease] = field(default_factory=list)
    remote_manifests: list[RemoteManifest] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)


@dataclass
class ClusterManifests:
    """Everything one cluster gets: remote CRD manifests, objects in apply order, and Helm releases.

    `placeholders` lists every value the objects hold a placeholder for (see `Placeholder`).
    """

    cluster: str
    role: StackRole
    objects: list[dict[str, Any]] = field(default_factory=list)
    releases: list[HelmRelease] = field(default_factory=list)
    remote_manifests: list[RemoteManifest] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)


# Pulumi's await annotations: read by the Pulumi Kubernetes provider (when an object counts as
# created), ignored by Kubernetes. Rendered, so render output is what is applied.
WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"
GATEWAY_WAIT = "jsonpath={.status.addresses[0].value}"  # a Gateway is created once it has an address
LWS_WAIT = "condition=Available"  # pulumi-kubernetes has no built-in await for LeaderWorkerSets


def with_annotations(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    metadata = dict(obj["metadata"])
    metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
    return {**obj, "metadata": metadata}


def with_await(obj: dict[str, Any], gateway: str | None = None) -> dict[str, Any]:
    """`obj` with the await annotation its kind needs, if any.

    The Gateway named `gateway` is awaited until it has an address (the front door's endpoints
    and URLs need it); a LeaderWorkerSet until its controller reports Available; a Job (a cache's
    hydration, possibly an hour) is not awaited at all.
    """
    kind = obj["kind"]
    if kind == "Gateway" and gateway is not None and obj["metadata"]["name"] == gateway:
        return with_annotations(obj, {WAIT_FOR: GATEWAY_WAIT})
    if kind == "LeaderWorkerSet":
        return with_annotations(obj, {WAIT_FOR: LWS_WAIT})
    if kind == "Job":
        return with_annotations(obj, {SKIP_AWAIT: "true"})
    return obj


def meta(
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
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


_GATEWAY_ADDRESS = re.compile(r"inference-gateway\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.invalid")


def collect_placeholders(objects: list[dict[str, Any]], declared: list[Placeholder]) -> list[Placeholder]:
    """Every placeholder in `objects`, once each: the declared ones, then secrets, then gateway addresses.

    `declared` are the deploy-time values the renderer put there (kept if their token appears);
    secrets and workload gateway addresses are found by their token's shape, in order of appearance.
    """
    found: dict[str, Placeholder] = {}
    text = json.dumps(objects)
    for declared_placeholder in declared:
        if json.dumps(declared_placeholder.token)[1:-1] in text:
            found.setdefault(declared_placeholder.name, declared_placeholder)
    for match in SECRET_PLACEHOLDER.finditer(text):
        key = match.group(1)
        found.setdefault(
            key,
            Placeholder(
                key,
                match.group(0),
                f"the config value {key} (set with `pulumi config set --secret --path`), as a Pulumi secret",
            ),
        )
    for match in _GATEWAY_ADDRESS.finditer(text):
        cluster = match.group(1)
        found.setdefault(
            f"{cluster}.gatewayAddress",
            Placeholder(
                f"{cluster}.gatewayAddress",
                match.group(0),
                f"the address of the {WORKLOAD_GATEWAY} Gateway on cluster {cluster}, once it has one",
            ),
        )
    return list(found.values())


def check_unique_names(cluster: str, objects: list[dict[str, Any]]) -> None:
    """Two objects of one kind with one name in one namespace: the second would overwrite the first."""
    seen: set[tuple] = set()
    for obj in objects:
        identity = (
            obj.get("apiVersion", "").split("/")[0],
            obj["kind"],
            obj["metadata"].get("namespace"),
            obj["metadata"]["name"],
        )
        if identity in seen:
            where = f"{identity[2]}/" if identity[2] else ""
            raise ValueError(
                f"cluster {cluster}: two {identity[1]} objects are named {where}{identity[3]}; "
                "this is a modelplane bug, please report it with the stack file"
            )
        seen.add(identity)
