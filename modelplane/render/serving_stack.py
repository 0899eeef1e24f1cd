"""The serving stack of one workload cluster (spec §8): Helm releases and the inference Gateway.

Pure data: `render_serving_stack` returns the Kubernetes objects (plain dicts) and the Helm
releases (`HelmRelease`) that every workload cluster gets. The Pulumi layer installs them; this
module decides what they are.

Install order (the Pulumi layer turns it into `depends_on`, and deletes in reverse):

1. The Gateway API Inference Extension CRDs (InferencePool, InferenceObjective). There is no
   official Helm chart that installs only these CRDs (the project's `inferencepool` chart deploys
   a pool and its endpoint picker, not the CRDs), so they are not a `HelmRelease` but a
   `RemoteManifest` (`inference_extension_crds`): the upstream release manifest,
   `inference_extension_crds_url(version)`, which the Pulumi layer applies as a ConfigFile. Envoy
   Gateway's extension manager watches InferencePools, so apply them before the `mp-gateway-helm`
   release.
2. The Helm releases, each after the releases in its `depends_on` (Envoy Gateway after
   cert-manager, whose webhooks it uses; the AI Gateway controller after its CRDs and Envoy
   Gateway). Releases install into their own namespace, which Helm creates (`create_namespace`).
3. The objects, in list order, each after the releases `release_dependencies(obj)` names:
   EnvoyProxy, GatewayClass and Gateway are custom resources served by Envoy Gateway's chart
   (which also brings the Gateway API CRDs on workload clusters, spec §14.14).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..api.fleet import Fleet
from ..api.serving_stack import ServingStack
from . import objects as k8s
from .types import (
    GATEWAY_API,
    GPU_TOLERATION,
    MANAGED_BY,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY,
    HelmRelease,
    RemoteManifest,
    meta,
)

# Gateway API Inference Extension CRDs (InferencePool v1, InferencePool v1alpha2, InferenceObjective),
# the upstream release manifest; `stack.versions.inference_extension` picks the release.
INFERENCE_EXTENSION_CRDS_URL = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/{version}/manifests.yaml"
)


def inference_extension_crds_url(version: str) -> str:
    """Where the Gateway API Inference Extension CRDs come from."""
    return INFERENCE_EXTENSION_CRDS_URL.format(version=version)


INFERENCE_EXTENSION_CRDS = "inference-extension-crds"  # the remote manifest (ConfigFile `<cluster>/<name>`)


def inference_extension_crds(stack: ServingStack) -> list[RemoteManifest]:
    """The Inference Extension CRDs as a remote manifest; none on a cluster that has them preinstalled."""
    if not stack.installs("inferenceExtension"):
        return []
    version = stack.versions.inference_extension
    return [
        RemoteManifest(
            name=INFERENCE_EXTENSION_CRDS,
            component="inferenceExtension",
            version=version,
            url=inference_extension_crds_url(version),
        )
    ]


# Release names: `mp-<chart>` as the reference names them (its issue #215: short derived names,
# and a prefix so modelplane never adopts a same-named release a user already runs).
CERT_MANAGER = "mp-cert-manager"
ENVOY_GATEWAY = "mp-gateway-helm"
AI_GATEWAY_CRDS = "mp-ai-gateway-crds-helm"
AI_GATEWAY = "mp-ai-gateway-helm"
PROMETHEUS = "mp-kube-prometheus-stack"
LEADER_WORKER_SET = "mp-lws"
NODE_FEATURE_DISCOVERY = "mp-node-feature-discovery"
NVIDIA_DRA_DRIVER = "mp-dra-driver-nvidia-gpu"
EXAMPLE_DRA_DRIVER = "mp-dra-example-driver"

ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system"
NVIDIA_DRA_DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"
EXAMPLE_DRA_DRIVER_NAMESPACE = "dra-example-driver"
PROMETHEUS_NAMESPACE = "monitoring"

ENVOY_PROXY = WORKLOAD_GATEWAY  # the EnvoyProxy the GatewayClass points at
GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"

# The servingStack component (a key of `servingStack.versions` and `preinstalled`) each release installs.
RELEASE_COMPONENTS = {
    CERT_MANAGER: "certManager",
    ENVOY_GATEWAY: "envoyGateway",
    AI_GATEWAY_CRDS: "envoyAiGateway",
    AI_GATEWAY: "envoyAiGateway",
    PROMETHEUS: "prometheus",
    LEADER_WORKER_SET: "leaderWorkerSet",
    NODE_FEATURE_DISCOVERY: "nodeFeatureDiscovery",
    NVIDIA_DRA_DRIVER: "nvidiaDraDriver",
    EXAMPLE_DRA_DRIVER: "draExampleDriver",
}

_AI_GATEWAY_CONTROLLER = f"ai-gateway-controller.{AI_GATEWAY_NAMESPACE}.svc.cluster.local"
_AI_GATEWAY_EXTENSION_PORT = 1063


def render_serving_stack(cluster: str, stack: ServingStack, fake_gpus: bool) -> tuple[list[dict], list[HelmRelease]]:
    """Objects (in apply order) and Helm releases for workload cluster `cluster`.

    `fake_gpus` (kind clusters, whose pools publish fake `gpu.example.com` devices) installs the
    upstream dra-example-driver instead of the NVIDIA DRA driver, and then the NVIDIA driver's
    critical-pods quota is not needed. Every workload cluster gets the same stack for the same
    inputs; `cluster` only names it.

    Components listed in `stack.preinstalled` (an Existing cluster runs them already) get no
    release, and nothing that only they need (the NVIDIA driver's namespace and quota); releases
    that would wait for them install without waiting (`depends_on` drops them).
    """
    releases = [
        *_gateway_releases(stack),
        _prometheus(stack),
        HelmRelease(
            name=LEADER_WORKER_SET,
            namespace="lws-system",
            chart="lws",
            repository="oci://registry.k8s.io/lws/charts",
            version=stack.versions.leader_worker_set,
        ),
        _node_feature_discovery(stack),
        _example_dra_driver(stack) if fake_gpus else _nvidia_dra_driver(stack),
    ]
    releases = _without_preinstalled(releases, stack)
    objects: list[dict[str, Any]] = [_namespace(SYSTEM_NAMESPACE)]
    if not fake_gpus and stack.installs("nvidiaDraDriver"):
        objects += [_namespace(NVIDIA_DRA_DRIVER_NAMESPACE), critical_pods_quota(NVIDIA_DRA_DRIVER_NAMESPACE)]
    objects += [envoy_proxy(), gateway_class(stack), gateway(stack)]
    return objects, releases


def release_dependencies(obj: dict[str, Any], stack: ServingStack | None = None) -> tuple[str, ...]:
    """Releases that must be installed before `obj` can be applied (its CRD comes from them).

    With `stack`, releases of its preinstalled components are left out: the cluster serves those
    kinds already (the gateway objects need Envoy Gateway's CRDs either way, from whoever installed it).
    """
    group = obj["apiVersion"].rpartition("/")[0]
    needed = (ENVOY_GATEWAY,) if group in ("gateway.envoyproxy.io", "gateway.networking.k8s.io") else ()
    return tuple(r for r in needed if stack is None or stack.installs(RELEASE_COMPONENTS[r]))


def uses_fake_gpus(fleet: Fleet, cluster: str) -> bool:
    """Whether `cluster`'s pools claim devices from the dra-example-driver (`gpu.example.com`).

    Those clusters (the kind demo) get the example driver instead of the NVIDIA one.
    """
    return fleet.uses_fake_gpus(cluster)


def by_component(releases: list[HelmRelease]) -> list[tuple[str, list[HelmRelease]]]:
    """Releases grouped by the servingStack component that installs them, in install order.

    A release of no component (MetalLB on kind) is its own group, named after the release.
    """
    out: list[tuple[str, list[HelmRelease]]] = []
    for release in releases:
        component = RELEASE_COMPONENTS.get(release.name, release.name)
        if out and out[-1][0] == component:
            out[-1][1].append(release)
        else:
            out.append((component, [release]))
    return out


def _without_preinstalled(releases: list[HelmRelease], stack: ServingStack) -> list[HelmRelease]:
    """The releases of components modelplane installs; `depends_on` keeps only releases still installed."""
    kept = [r for r in releases if stack.installs(RELEASE_COMPONENTS[r.name])]
    names = {r.name for r in kept}
    return [replace(r, depends_on=tuple(d for d in r.depends_on if d in names)) for r in kept]


# --- releases -------------------------------------------------------------------------------------


def _gateway_releases(stack: ServingStack) -> list[HelmRelease]:
    """Long: the Helm releases' values as literals."""
    versions = stack.versions
    envoy_gateway_values = {
        "config": {
            "envoyGateway": {
                # The Backend API the AI Gateway relies on.
                "extensionApis": {"enableBackend": True},
                # Envoy Gateway delegates InferencePool backends to the AI Gateway controller's
                # ext-proc extension server, so HTTPRoute -> InferencePool backendRefs route.
                "extensionManager": {
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                "listener": {"includeAll": True},
                                "route": {"includeAll": True},
                                "cluster": {"includeAll": True},
                                "secret": {"includeAll": True},
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        },
                    },
                    "service": {"fqdn": {"hostname": _AI_GATEWAY_CONTROLLER, "port": _AI_GATEWAY_EXTENSION_PORT}},
                    "backendResources": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"},
                    ],
                },
            },
        },
    }
    return [
        HelmRelease(
            name=CERT_MANAGER,
            namespace="cert-manager",
            chart="cert-manager",
            repository="https://charts.jetstack.io",
            version=versions.cert_manager,
            values={"crds": {"enabled": True, "keep": False}},
        ),
        HelmRelease(
            name=ENVOY_GATEWAY,
            namespace=ENVOY_GATEWAY_NAMESPACE,
            chart="gateway-helm",
            repository="oci://docker.io/envoyproxy",
            version=versions.envoy_gateway,
            values=envoy_gateway_values,
            depends_on=(CERT_MANAGER,),
        ),
        HelmRelease(
            name=AI_GATEWAY_CRDS,
            namespace=AI_GATEWAY_NAMESPACE,
            chart="ai-gateway-crds-helm",
            repository="oci://docker.io/envoyproxy",
            version=versions.envoy_ai_gateway,
        ),
        HelmRelease(
            name=AI_GATEWAY,
            namespace=AI_GATEWAY_NAMESPACE,
            chart="ai-gateway-helm",
            repository="oci://docker.io/envoyproxy",
            version=versions.envoy_ai_gateway,
            depends_on=(AI_GATEWAY_CRDS, ENVOY_GATEWAY),
        ),
    ]


def _prometheus(stack: ServingStack) -> HelmRelease:
    envoy_proxy_scrape = {
        "job_name": "envoy-gateway-proxy",
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [ENVOY_GATEWAY_NAMESPACE]}}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
                "action": "keep",
                "regex": "proxy",
            },
            {
                "source_labels": ["__address__"],
                "action": "replace",
                "regex": "([^:]+)(?::\\d+)?",
                "replacement": "$1:19001",
                "target_label": "__address__",
            },
        ],
        "metrics_path": "/stats/prometheus",
    }
    values = {
        "fullnameOverride": "prometheus",
        "prometheus": {
            "prometheusSpec": {
                # PodMonitors from every namespace, not only the release's own.
                "podMonitorSelectorNilUsesHelmValues": False,
                "podMonitorNamespaceSelector": {},
                "additionalScrapeConfigs": [envoy_proxy_scrape],
            },
        },
        "grafana": {"enabled": False},
        "alertmanager": {"enabled": False},
    }
    return HelmRelease(
        name=PROMETHEUS,
        namespace=PROMETHEUS_NAMESPACE,
        chart="kube-prometheus-stack",
        repository="https://prometheus-community.github.io/helm-charts",
        version=stack.versions.prometheus,
        values=values,
    )


def _node_feature_discovery(stack: ServingStack) -> HelmRelease:
    # GPU nodes are tainted nvidia.com/gpu; without the toleration the NFD worker never labels
    # them, the DRA driver's kubelet plugin never runs there, and no ResourceSlices appear.
    values = {"worker": {"tolerations": [dict(GPU_TOLERATION)]}}
    return HelmRelease(
        name=NODE_FEATURE_DISCOVERY,
        namespace="node-feature-discovery",
        chart="node-feature-discovery",
        repository="oci://registry.k8s.io/nfd/charts",
        version=stack.versions.node_feature_discovery,
        values=values,
    )


def _nvidia_dra_driver(stack: ServingStack) -> HelmRelease:
    values: dict[str, Any] = {"gpuResourcesEnabledOverride": True, "resources": {"computeDomains": {"enabled": False}}}
    if stack.nvidia_driver_root != "/":
        values["nvidiaDriverRoot"] = stack.nvidia_driver_root
    return HelmRelease(
        name=NVIDIA_DRA_DRIVER,
        namespace=NVIDIA_DRA_DRIVER_NAMESPACE,
        chart="dra-driver-nvidia-gpu",
        repository="oci://registry.k8s.io/dra-driver-nvidia/charts",
        version=stack.versions.nvidia_dra_driver,
        values=values,
    )


def _example_dra_driver(stack: ServingStack) -> HelmRelease:
    # Chart defaults: fake gpu.example.com devices on every node and the gpu.example.com DeviceClass.
    # Its admission webhook takes its certificate from cert-manager (a self-signed Issuer).
    return HelmRelease(
        name=EXAMPLE_DRA_DRIVER,
        namespace=EXAMPLE_DRA_DRIVER_NAMESPACE,
        chart="dra-example-driver",
        repository="oci://registry.k8s.io/dra-example-driver/charts",
        version=stack.versions.dra_example_driver,
        depends_on=(CERT_MANAGER,),
    )


# --- objects --------------------------------------------------------------------------------------


def _namespace(name: str) -> dict[str, Any]:
    return k8s.namespace(name, MANAGED_BY)


def critical_pods_quota(namespace: str) -> dict[str, Any]:
    """Lets the DRA driver's system-node-critical pods run outside kube-system (needed on GKE)."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": meta("allow-critical-pods", namespace, labels=MANAGED_BY),
        "spec": {
            "hard": {"pods": "1000"},
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": ["system-node-critical", "system-cluster-critical"],
                    },
                ]
            },
        },
    }


def envoy_proxy() -> dict[str, Any]:
    """externalTrafficPolicy Cluster: some clouds' load balancers reject Envoy Gateway's default, Local."""
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "EnvoyProxy",
        "metadata": meta(ENVOY_PROXY, SYSTEM_NAMESPACE, labels=MANAGED_BY),
        "spec": {
            "provider": {"type": "Kubernetes", "kubernetes": {"envoyService": {"externalTrafficPolicy": "Cluster"}}}
        },
    }


def gateway_class(stack: ServingStack) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "GatewayClass",
        "metadata": meta(stack.gateway.class_name, labels=MANAGED_BY),
        "spec": {
            "controllerName": GATEWAY_CONTROLLER,
            "parametersRef": {
                "group": "gateway.envoyproxy.io",
                "kind": "EnvoyProxy",
                "name": ENVOY_PROXY,
                "namespace": SYSTEM_NAMESPACE,
            },
        },
    }


def gateway(stack: ServingStack) -> dict[str, Any]:
    """The workload cluster's Gateway; replica HTTPRoutes from any namespace attach to it."""
    listeners = [
        {
            "name": listener.name,
            "protocol": listener.protocol,
            "port": listener.port,
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }
        for listener in stack.gateway.listeners
    ]
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": meta(WORKLOAD_GATEWAY, SYSTEM_NAMESPACE, labels=MANAGED_BY),
        "spec": {"gatewayClassName": stack.gateway.class_name, "listeners": listeners},
    }
