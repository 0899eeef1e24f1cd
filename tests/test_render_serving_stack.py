"""The serving stack of a workload cluster (spec §8): releases, versions, values of note, gateway objects."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from builders import fleet_config
from k8s_validation import validate_object
from modelplane.api import ServingStack, load_fleet
from modelplane.api.serving_stack import GatewaySettings, Listener, ServingStackVersions
from modelplane.api.stackfile import read_stack_file
from modelplane.render import serving_stack as ss

STACKS = Path(__file__).resolve().parent.parent / "stacks"


def releases_by_name(stack: ServingStack | None = None, fake_gpus: bool = False):
    _, releases = ss.render_serving_stack("gpu-eu-west", stack or ServingStack(), fake_gpus)
    return {r.name: r for r in releases}


def objects_by_kind(stack: ServingStack | None = None, fake_gpus: bool = False):
    objects, _ = ss.render_serving_stack("gpu-eu-west", stack or ServingStack(), fake_gpus)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


@pytest.mark.parametrize("name, chart, repository, version, namespace", [
    ("mp-cert-manager", "cert-manager", "https://charts.jetstack.io", "v1.17.1", "cert-manager"),
    ("mp-gateway-helm", "gateway-helm", "oci://docker.io/envoyproxy", "v1.8.1", "envoy-gateway-system"),
    ("mp-ai-gateway-crds-helm", "ai-gateway-crds-helm", "oci://docker.io/envoyproxy", "v0.7.0", "envoy-ai-gateway-system"),
    ("mp-ai-gateway-helm", "ai-gateway-helm", "oci://docker.io/envoyproxy", "v0.7.0", "envoy-ai-gateway-system"),
    ("mp-kube-prometheus-stack", "kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts",
     "72.6.2", "monitoring"),
    ("mp-lws", "lws", "oci://registry.k8s.io/lws/charts", "v0.8.0", "lws-system"),
    ("mp-node-feature-discovery", "node-feature-discovery", "oci://registry.k8s.io/nfd/charts", "0.18.3",
     "node-feature-discovery"),
    ("mp-dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts", "0.4.0",
     "dra-driver-nvidia-gpu"),
])
def test_default_releases(name, chart, repository, version, namespace):
    release = releases_by_name()[name]
    assert (release.chart, release.repository, release.version, release.namespace) == (
        chart, repository, version, namespace)
    assert release.name == f"mp-{chart}"


def test_release_set_and_order():
    assert list(releases_by_name()) == [
        "mp-cert-manager", "mp-gateway-helm", "mp-ai-gateway-crds-helm", "mp-ai-gateway-helm",
        "mp-kube-prometheus-stack", "mp-lws", "mp-node-feature-discovery", "mp-dra-driver-nvidia-gpu"]


@pytest.mark.parametrize("fake_gpus", [False, True])
def test_dependencies_point_backwards_at_existing_releases(fake_gpus):
    _, releases = ss.render_serving_stack("c", ServingStack(), fake_gpus)
    seen: set[str] = set()
    for release in releases:
        assert set(release.depends_on) <= seen, f"{release.name} depends on a later or unknown release"
        seen.add(release.name)


def test_dependencies():
    releases = releases_by_name()
    assert releases["mp-gateway-helm"].depends_on == ("mp-cert-manager",)
    assert set(releases["mp-ai-gateway-helm"].depends_on) == {"mp-ai-gateway-crds-helm", "mp-gateway-helm"}
    assert releases["mp-cert-manager"].depends_on == ()


def test_values_of_note():
    releases = releases_by_name()
    assert releases["mp-cert-manager"].values == {"crds": {"enabled": True, "keep": False}}
    envoy = releases["mp-gateway-helm"].values["config"]["envoyGateway"]
    assert envoy["extensionApis"] == {"enableBackend": True}
    manager = envoy["extensionManager"]
    assert manager["hooks"]["xdsTranslator"] == {
        "translation": {kind: {"includeAll": True} for kind in ("listener", "route", "cluster", "secret")},
        "post": ["Translation", "Cluster", "Route"]}
    assert manager["service"] == {"fqdn": {"hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local",
                                           "port": 1063}}
    assert manager["backendResources"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}]
    prometheus = releases["mp-kube-prometheus-stack"].values
    assert prometheus["fullnameOverride"] == "prometheus"
    assert prometheus["grafana"] == {"enabled": False} and prometheus["alertmanager"] == {"enabled": False}
    spec = prometheus["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False and spec["podMonitorNamespaceSelector"] == {}
    (job,) = spec["additionalScrapeConfigs"]
    assert job["job_name"] == "envoy-gateway-proxy" and job["metrics_path"] == "/stats/prometheus"
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["envoy-gateway-system"]}}]
    assert job["relabel_configs"][1]["replacement"] == "$1:19001"
    assert releases["mp-node-feature-discovery"].values == {"worker": {"tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    assert releases["mp-dra-driver-nvidia-gpu"].values == {
        "gpuResourcesEnabledOverride": True, "resources": {"computeDomains": {"enabled": False}}}


@pytest.mark.parametrize("root, expected", [("/", None), ("/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/nvidia")])
def test_nvidia_driver_root_only_when_not_slash(root, expected):
    values = releases_by_name(ServingStack(nvidia_driver_root=root))["mp-dra-driver-nvidia-gpu"].values
    assert values.get("nvidiaDriverRoot") == expected


# --- versions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, release", [
    ("cert_manager", "mp-cert-manager"),
    ("envoy_gateway", "mp-gateway-helm"),
    ("envoy_ai_gateway", "mp-ai-gateway-crds-helm"),
    ("envoy_ai_gateway", "mp-ai-gateway-helm"),
    ("prometheus", "mp-kube-prometheus-stack"),
    ("leader_worker_set", "mp-lws"),
    ("node_feature_discovery", "mp-node-feature-discovery"),
    ("nvidia_dra_driver", "mp-dra-driver-nvidia-gpu"),
])
def test_every_version_is_overridable(field, release):
    stack = ServingStack(versions=ServingStackVersions(**{field: "9.9.9-test"}))
    assert releases_by_name(stack)[release].version == "9.9.9-test"


def test_versions_from_stack_config_fleet_wide_and_per_cluster():
    config = fleet_config(servingStack={"versions": {"certManager": "v1.18.0", "draExampleDriver": "0.5.0"}})
    config["inferenceClusters"]["gpu-us-east"]["servingStack"] = {"versions": {"certManager": "v1.19.0"}}
    fleet = load_fleet(config)
    eu = releases_by_name(fleet.serving_stack_for("gpu-eu-west"), fake_gpus=True)
    us = releases_by_name(fleet.serving_stack_for("gpu-us-east"), fake_gpus=True)
    assert eu["mp-cert-manager"].version == "v1.18.0"
    assert us["mp-cert-manager"].version == "v1.19.0"
    assert eu["mp-dra-example-driver"].version == us["mp-dra-example-driver"].version == "0.5.0"
    assert eu["mp-gateway-helm"].version == "v1.8.1"


def test_inference_extension_crds_url_follows_the_version():
    assert ss.inference_extension_crds_url(ServingStack().versions.inference_extension) == (
        "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.0.1/manifests.yaml")
    assert ss.inference_extension_crds_url("v1.6.0").endswith("/download/v1.6.0/manifests.yaml")


# --- fake GPUs -----------------------------------------------------------------------------------

def test_fake_gpus_install_the_example_driver_instead_of_nvidia():
    releases = releases_by_name(fake_gpus=True)
    assert "mp-dra-driver-nvidia-gpu" not in releases
    driver = releases["mp-dra-example-driver"]
    assert (driver.chart, driver.repository, driver.version, driver.namespace) == (
        "dra-example-driver", "oci://registry.k8s.io/dra-example-driver/charts", "0.4.0", "dra-example-driver")
    assert driver.depends_on == ("mp-cert-manager",)  # its webhook certificate comes from cert-manager
    objects = objects_by_kind(fake_gpus=True)
    assert ("ResourceQuota", "allow-critical-pods") not in objects
    assert ("Namespace", "dra-driver-nvidia-gpu") not in objects


def test_the_nvidia_driver_gets_the_critical_pods_quota():
    objects = objects_by_kind()
    quota = objects[("ResourceQuota", "allow-critical-pods")]
    assert quota["metadata"]["namespace"] == "dra-driver-nvidia-gpu"
    assert quota["spec"] == {"hard": {"pods": "1000"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical", "system-cluster-critical"]}]}}
    assert ("Namespace", "dra-driver-nvidia-gpu") in objects


@pytest.mark.parametrize("stack, expected", [
    ("demo", {"gpu-eu-west": True, "gpu-us-east": True}),
    ("cloud", {"aws-us-east": False, "gcp-us-central": False, "azure-eu-west": False}),
])
def test_uses_fake_gpus(stack, expected):
    fleet = load_fleet(read_stack_file(STACKS / f"Pulumi.{stack}.yaml").config)
    assert {c: ss.uses_fake_gpus(fleet, c) for c in fleet.inference_clusters} == expected


# --- objects -------------------------------------------------------------------------------------

def test_gateway_objects_default():
    objects = objects_by_kind()
    assert ("Namespace", "modelplane-system") in objects
    proxy = objects[("EnvoyProxy", "inference-gateway")]
    assert proxy["metadata"]["namespace"] == "modelplane-system"
    assert proxy["spec"]["provider"] == {"type": "Kubernetes",
                                         "kubernetes": {"envoyService": {"externalTrafficPolicy": "Cluster"}}}
    gateway_class = objects[("GatewayClass", "envoy")]
    assert gateway_class["spec"] == {
        "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
        "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "inference-gateway",
                          "namespace": "modelplane-system"}}
    gateway = objects[("Gateway", "inference-gateway")]
    assert gateway["metadata"]["namespace"] == "modelplane-system"
    assert gateway["spec"] == {"gatewayClassName": "envoy", "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}


def test_gateway_class_name_and_listeners_from_the_stack():
    stack = ServingStack(gateway=GatewaySettings(class_name="inference", listeners=[
        Listener(name="web", port=8080, protocol="HTTP"), Listener(name="grpc", port=9000, protocol="TCP")]))
    objects = objects_by_kind(stack)
    assert ("GatewayClass", "inference") in objects
    gateway = objects[("Gateway", "inference-gateway")]
    assert gateway["spec"]["gatewayClassName"] == "inference"
    assert [(lst["name"], lst["port"], lst["protocol"], lst["allowedRoutes"]["namespaces"]["from"])
            for lst in gateway["spec"]["listeners"]] == [("web", 8080, "HTTP", "All"), ("grpc", 9000, "TCP", "All")]
    assert all(not validate_object(o) for o in objects.values())


@pytest.mark.parametrize("fake_gpus, expected", [
    (False, {"Namespace": 2, "ResourceQuota": 1, "EnvoyProxy": 1, "GatewayClass": 1, "Gateway": 1}),
    (True, {"Namespace": 1, "EnvoyProxy": 1, "GatewayClass": 1, "Gateway": 1}),
])
def test_objects_are_valid_and_namespaces_come_first(fake_gpus, expected):
    objects, _ = ss.render_serving_stack("c", ServingStack(), fake_gpus)
    assert Counter(o["kind"] for o in objects) == expected
    problems = {f"{o['kind']}/{o['metadata']['name']}": validate_object(o) for o in objects}
    assert {k: v for k, v in problems.items() if v} == {}
    created: set[str] = set()
    for obj in objects:
        if obj["kind"] == "Namespace":
            created.add(obj["metadata"]["name"])
        elif "namespace" in obj["metadata"]:
            assert obj["metadata"]["namespace"] in created


def test_release_dependencies_of_objects():
    objects = objects_by_kind()
    assert ss.release_dependencies(objects[("EnvoyProxy", "inference-gateway")]) == ("mp-gateway-helm",)
    assert ss.release_dependencies(objects[("Gateway", "inference-gateway")]) == ("mp-gateway-helm",)
    assert ss.release_dependencies(objects[("ResourceQuota", "allow-critical-pods")]) == ()


def test_rendering_is_deterministic():
    assert ss.render_serving_stack("a", ServingStack(), False) == ss.render_serving_stack("a", ServingStack(), False)
