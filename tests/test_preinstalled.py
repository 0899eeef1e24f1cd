"""Bring your own cluster: serving-stack components an Existing cluster already runs (`preinstalled`).

Validation refuses what cannot work (with the config path), render skips exactly the declared
components and nothing else, and `modelplane validate` says what will be installed on each
Existing cluster.
"""
from __future__ import annotations

import copy
import itertools
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from builders import GPU_CLASS
from modelplane.api import ConfigError, ServingStack, load_fleet
from modelplane.api.serving_stack import COMPONENTS, PAIRED
from modelplane.render import serving_stack as ss

REPO = Path(__file__).resolve().parent.parent
NVIDIA_CLASS = {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                             "capacity": {"memory": {"value": "23034Mi"}}}]}
GKE_CLASS = {**NVIDIA_CLASS, "provisioning": {"provider": "GKE", "gke": {
    "machineType": "g2-standard-8", "accelerator": {"type": "nvidia-l4", "count": 1}}}}
KUBECONFIG = "apiVersion: v1\nkind: Config\n"


def existing(preinstalled=None, class_name: str = "l4", **stack) -> dict:
    body = {"cluster": {"source": "Existing", "existing": {"kubeconfig": KUBECONFIG}},
            "nodePools": [{"name": "gpu", "className": class_name}]}
    if preinstalled is not None:
        stack["preinstalled"] = preinstalled
    if stack:
        body["servingStack"] = stack
    return body


def config(cluster: dict | None = None, name: str = "rack", **top) -> dict:
    return {"inferenceClasses": {"l4": copy.deepcopy(NVIDIA_CLASS), "fake": copy.deepcopy(GPU_CLASS),
                                 "l4-gke": copy.deepcopy(GKE_CLASS)},
            "inferenceClusters": {name: cluster or existing()}, **top}


def errors_of(cfg: dict) -> list[tuple[str, str]]:
    try:
        load_fleet(cfg, origin="pulumi")
    except ConfigError as error:
        return [(str(issue).split(": ", 1)[0], issue.message) for issue in error.issues]
    return []


AT = "modelplane:inferenceClusters.rack.servingStack"

GOOD = {
    "empty list": config(existing([])),
    "cert-manager and prometheus": config(existing(["certManager", "prometheus"])),
    "the envoy pair": config(existing(["envoyGateway", "envoyAiGateway"])),
    "everything an NVIDIA cluster gets": config(existing([c for c in COMPONENTS if c != "draExampleDriver"])),
    "the example driver on fake GPUs": config(existing(["draExampleDriver", "certManager"], class_name="fake")),
    "gatewayApi alone": config(existing(["gatewayApi"])),
    "a fleet-wide version of a component this cluster has": config(
        existing(["prometheus"]), servingStack={"versions": {"prometheus": "70.0.0"}}),
    "a fleet-wide driver root, NVIDIA driver preinstalled here": config(
        existing(["nvidiaDraDriver"]), servingStack={"nvidiaDriverRoot": "/run/nvidia/driver"}),
    "a version of another component": config(existing(["prometheus"], versions={"certManager": "v1.18.0"})),
    "driver root with the NVIDIA driver installed by modelplane": config(
        existing(["certManager"], nvidiaDriverRoot="/run/nvidia/driver")),
}


@pytest.mark.parametrize("cfg", GOOD.values(), ids=GOOD.keys())
def test_valid(cfg):
    assert errors_of(cfg) == []


BAD = {
    "unknown name, close to a known one": (
        config(existing(["prometheus", "cert-manager"])),
        f"{AT}.preinstalled[1]", "unknown component 'cert-manager'; did you mean 'certManager'? known: gatewayApi, "
                                 "certManager, envoyGateway, envoyAiGateway, inferenceExtension, prometheus, "
                                 "leaderWorkerSet, nodeFeatureDiscovery, nvidiaDraDriver, draExampleDriver"),
    "unknown name": (config(existing(["istio"])), f"{AT}.preinstalled[0]", "unknown component 'istio'; known: "),
    "listed twice": (config(existing(["prometheus", "prometheus"])), f"{AT}.preinstalled[1]",
                     "'prometheus' is listed twice"),
    "text, not a list": (config(existing("certManager")), f"{AT}.preinstalled", "must be a list"),
    "a number in the list": (config(existing([3])), f"{AT}.preinstalled[0]", "must be a string"),
    "more names than components": (config(existing(list(COMPONENTS) + ["certManager"])), f"{AT}.preinstalled",
                                   "must have at most 10 items"),
    "on a Kind cluster": (
        config({"cluster": {"source": "Kind"}, "nodePools": [{"name": "gpu", "className": "fake"}],
                "servingStack": {"preinstalled": ["certManager"]}}),
        f"{AT}.preinstalled", "only an Existing cluster can have preinstalled components: modelplane creates this "
                              "Kind cluster"),
    "on a GKE cluster": (
        config({"cluster": {"source": "GKE", "gke": {"region": "us-central1"}},
                "nodePools": [{"name": "l4", "className": "l4-gke", "zones": ["us-central1-a"]}],
                "servingStack": {"preinstalled": ["prometheus"]}}),
        f"{AT}.preinstalled", "modelplane creates this GKE cluster"),
    "fleet-wide": (config(servingStack={"preinstalled": ["certManager"]}), "modelplane:servingStack.preinstalled",
                   "is per cluster"),
    "preinstalled and a version in one block": (
        config(existing(["certManager", "prometheus"], versions={"prometheus": "72.6.2"})),
        f"{AT}.versions.prometheus", "is set, but prometheus is in preinstalled (preinstalled[1])"),
    "Envoy Gateway without the AI Gateway": (
        config(existing(["envoyGateway"])), f"{AT}.preinstalled[0]",
        "is preinstalled without envoyAiGateway: modelplane installs Envoy Gateway configured for the Envoy AI "
        "Gateway (config.envoyGateway.extensionManager"),
    "the AI Gateway without Envoy Gateway": (
        config(existing(["certManager", "envoyAiGateway"])), f"{AT}.preinstalled[1]",
        "is preinstalled without envoyGateway"),
    "the example driver on an NVIDIA cluster": (
        config(existing(["draExampleDriver"])), f"{AT}.preinstalled[0]",
        "draExampleDriver is not a driver this cluster uses: no pool of this cluster has a class with "
        "gpu.example.com DRA devices"),
    "the NVIDIA driver on a fake-GPU cluster": (
        config(existing(["certManager", "nvidiaDraDriver"], class_name="fake")), f"{AT}.preinstalled[1]",
        "nvidiaDraDriver is not a driver this cluster uses: this cluster's pools have fake gpu.example.com devices"),
    "driver root with the NVIDIA driver preinstalled": (
        config(existing(["nvidiaDraDriver"], nvidiaDriverRoot="/run/nvidia/driver")), f"{AT}.nvidiaDriverRoot",
        "is set, but nvidiaDraDriver is in preinstalled"),
}


@pytest.mark.parametrize("cfg, path, message", BAD.values(), ids=BAD.keys())
def test_invalid(cfg, path, message):
    found = errors_of(cfg)
    assert len(found) == 1, found  # one mistake, one error
    assert found[0][0] == path and message in found[0][1], found


def test_a_driver_check_waits_for_an_undefined_class():
    cfg = config(existing(["draExampleDriver"], class_name="l40"))
    assert [path for path, _ in errors_of(cfg)] == ["modelplane:inferenceClusters.rack.nodePools[0].className"]


# --- the effective stack -----------------------------------------------------------------------------

def test_effective_stack_carries_preinstalled():
    fleet = load_fleet(config(existing(["prometheus", "certManager"])), origin="pulumi")
    stack = fleet.serving_stack_for("rack")
    assert stack.preinstalled == frozenset({"prometheus", "certManager"})
    assert not stack.installs("prometheus") and stack.installs("envoyGateway")
    assert load_fleet(config(existing()), origin="pulumi").serving_stack_for("rack").preinstalled == frozenset()


def test_installs_refuses_an_unknown_component():
    with pytest.raises(ValueError, match="unknown serving-stack component 'prometheus-stack'"):
        ServingStack().installs("prometheus-stack")


# --- render ------------------------------------------------------------------------------------------

def stack_with(*preinstalled: str) -> ServingStack:
    return ServingStack(preinstalled=frozenset(preinstalled))


def rendered(stack: ServingStack, fake_gpus: bool = False):
    objects, releases = ss.render_serving_stack("rack", stack, fake_gpus)
    return objects, {r.name: r for r in releases}


# Each declarable unit (the envoy pair goes together) and the releases it removes.
UNITS = {
    ("gatewayApi",): set(),
    ("certManager",): {"mp-cert-manager"},
    ("envoyGateway", "envoyAiGateway"): {"mp-gateway-helm", "mp-ai-gateway-crds-helm", "mp-ai-gateway-helm"},
    ("inferenceExtension",): set(),
    ("prometheus",): {"mp-kube-prometheus-stack"},
    ("leaderWorkerSet",): {"mp-lws"},
    ("nodeFeatureDiscovery",): {"mp-node-feature-discovery"},
    ("nvidiaDraDriver",): {"mp-dra-driver-nvidia-gpu"},
    ("draExampleDriver",): {"mp-dra-example-driver"},
}


def test_units_cover_every_component():
    assert sorted(c for unit in UNITS for c in unit) == sorted(COMPONENTS)
    assert set(ss.RELEASE_COMPONENTS.values()) == set(COMPONENTS) - {"gatewayApi", "inferenceExtension"}


@pytest.mark.parametrize("fake_gpus", [False, True])
@pytest.mark.parametrize("unit", UNITS, ids=["+".join(u) for u in UNITS])
def test_render_skips_exactly_the_declared_releases(unit, fake_gpus):
    all_objects, everything = rendered(ServingStack(), fake_gpus)
    objects, kept = rendered(stack_with(*unit), fake_gpus)
    assert set(everything) - set(kept) == UNITS[unit] & set(everything)
    assert list(kept) == [name for name in everything if name in kept]  # order unchanged
    for name, release in kept.items():  # nothing else changes but the waits on what is gone
        assert release == replace(everything[name], depends_on=tuple(d for d in everything[name].depends_on
                                                                    if d in kept))
    skipped_objects = [o for o in all_objects if o not in objects]
    if unit == ("nvidiaDraDriver",) and not fake_gpus:
        assert [(o["kind"], o["metadata"]["name"]) for o in skipped_objects] == [
            ("Namespace", "dra-driver-nvidia-gpu"), ("ResourceQuota", "allow-critical-pods")]
    else:
        assert skipped_objects == []


def test_gateway_objects_stay_when_envoy_gateway_is_preinstalled():
    objects, releases = rendered(stack_with("envoyGateway", "envoyAiGateway"))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [("Namespace", "modelplane-system"), ("Namespace", "dra-driver-nvidia-gpu"),
                     ("ResourceQuota", "allow-critical-pods"), ("EnvoyProxy", "inference-gateway"),
                     ("GatewayClass", "envoy"), ("Gateway", "inference-gateway")]
    # their CRDs come from the preinstalled Envoy Gateway: no release to wait for
    assert [ss.release_dependencies(o, stack_with("envoyGateway", "envoyAiGateway")) for o in objects[3:]] == [()] * 3
    assert [ss.release_dependencies(o, ServingStack()) for o in objects[3:]] == [("mp-gateway-helm",)] * 3
    assert [ss.release_dependencies(o) for o in objects[3:]] == [("mp-gateway-helm",)] * 3


@pytest.mark.parametrize("fake_gpus, release", [(False, "mp-gateway-helm"), (True, "mp-dra-example-driver")])
def test_depends_on_drops_a_preinstalled_cert_manager(fake_gpus, release):
    _, everything = rendered(ServingStack(), fake_gpus)
    _, kept = rendered(stack_with("certManager"), fake_gpus)
    assert everything[release].depends_on == ("mp-cert-manager",)
    assert kept[release].depends_on == ()


def valid_subsets():
    for n in range(len(COMPONENTS) + 1):
        for subset in itertools.combinations(COMPONENTS, n):
            if all(PAIRED[c] in subset for c in subset if c in PAIRED):
                yield frozenset(subset)


@pytest.mark.parametrize("fake_gpus", [False, True])
def test_every_declaration_renders_a_consistent_stack(fake_gpus):
    """For every allowed `preinstalled` set: dependencies point backwards at releases that are rendered."""
    count = 0
    for subset in valid_subsets():
        _, releases = ss.render_serving_stack("rack", ServingStack(preinstalled=subset), fake_gpus)
        seen: set[str] = set()
        for release in releases:
            assert ss.RELEASE_COMPONENTS[release.name] not in subset
            assert set(release.depends_on) <= seen, (subset, release.name)
            seen.add(release.name)
        count += 1
    assert count == 2 ** (len(COMPONENTS) - 2) * 2  # the envoy pair counts as one choice


def test_inference_extension_crd_manifest_is_skipped():
    assert [m.component for m in ss.inference_extension_crds(ServingStack())] == ["inferenceExtension"]
    assert ss.inference_extension_crds(stack_with("inferenceExtension")) == []
    assert ss.inference_extension_crds(stack_with("certManager")) != []


def test_releases_grouped_by_component():
    _, releases = ss.render_serving_stack("rack", stack_with("certManager", "prometheus"), False)
    assert [(c, [r.name for r in rs]) for c, rs in ss.by_component(releases)] == [
        ("envoyGateway", ["mp-gateway-helm"]),
        ("envoyAiGateway", ["mp-ai-gateway-crds-helm", "mp-ai-gateway-helm"]),
        ("leaderWorkerSet", ["mp-lws"]),
        ("nodeFeatureDiscovery", ["mp-node-feature-discovery"]),
        ("nvidiaDraDriver", ["mp-dra-driver-nvidia-gpu"]),
    ]


# --- modelplane validate -------------------------------------------------------------------------------

def stack_file(tmp_path: Path, clusters: dict, name: str = "Pulumi.own.yaml") -> Path:
    cfg = config()
    cfg["inferenceClusters"] = clusters
    for cluster in clusters.values():
        if cluster["cluster"]["source"] == "Existing":
            cluster["cluster"]["existing"]["kubeconfig"] = {"secure": "v1:abc:def"}
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"config": {f"modelplane:{k}": v for k, v in cfg.items()}}, sort_keys=False))
    return path


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", "validate", "--config", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_validate_says_what_is_installed_on_an_existing_cluster(tmp_path):
    path = stack_file(tmp_path, {"rack": existing(["certManager", "prometheus"]),
                                 "lab": existing(class_name="fake"),
                                 "kind": {"cluster": {"source": "Kind"},
                                          "nodePools": [{"name": "gpu", "className": "fake"}]}})
    result = validate(path)
    assert result.returncode == 0 and result.stdout.startswith(f"valid: {path}: ")
    lines = result.stderr.splitlines()
    assert len(lines) == 8  # four per Existing cluster, none for the kind cluster
    header = [line for line in lines if line.startswith("warning: ")]
    assert header == [
        "warning: modelplane:inferenceClusters.lab.cluster.source: an Existing cluster: it needs Kubernetes 1.34+ "
        "with resource.k8s.io/v1 (not checked offline), and modelplane installs there:  "
        f"[{path}:{line_of(path, 'lab')}]",
        "warning: modelplane:inferenceClusters.rack.cluster.source: an Existing cluster: it needs Kubernetes 1.34+ "
        "with resource.k8s.io/v1 (not checked offline), and modelplane installs there:  "
        f"[{path}:{line_of(path, 'rack')}]"]
    rack = lines[4:]
    assert rack[1] == (
        "  Helm releases: envoyGateway: mp-gateway-helm (gateway-helm v1.8.1, namespace envoy-gateway-system); "
        "envoyAiGateway: mp-ai-gateway-crds-helm (ai-gateway-crds-helm v0.7.0, namespace envoy-ai-gateway-system), "
        "mp-ai-gateway-helm (ai-gateway-helm v0.7.0, namespace envoy-ai-gateway-system); leaderWorkerSet: mp-lws "
        "(lws v0.8.0, namespace lws-system); nodeFeatureDiscovery: mp-node-feature-discovery (node-feature-discovery "
        "0.18.3, namespace node-feature-discovery); nvidiaDraDriver: mp-dra-driver-nvidia-gpu (dra-driver-nvidia-gpu "
        "0.4.0, namespace dra-driver-nvidia-gpu)")
    assert rack[2] == (
        "  CRD manifests: inferenceExtension: https://github.com/kubernetes-sigs/gateway-api-inference-extension/"
        "releases/download/v1.0.1/manifests.yaml; cluster-scoped objects: Namespace modelplane-system, "
        "Namespace dra-driver-nvidia-gpu, GatewayClass envoy")
    assert rack[3].startswith("  left alone (servingStack.preinstalled): certManager, prometheus; if the cluster "
                              "already runs more of these, add them to inferenceClusters.rack.servingStack.preinstalled")
    lab = lines[:4]
    assert "certManager: mp-cert-manager (cert-manager v1.17.1, namespace cert-manager)" in lab[1]
    assert "draExampleDriver: mp-dra-example-driver" in lab[1] and "nvidiaDraDriver" not in lab[1]
    assert lab[2].endswith("cluster-scoped objects: Namespace modelplane-system, GatewayClass envoy")
    assert lab[3].startswith("  left alone (servingStack.preinstalled): nothing;")


def line_of(path: Path, cluster: str) -> int:
    """The line of `source: Existing` under `cluster` (what the warning points at)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{cluster}:")
    return next(i for i, line in enumerate(lines[start:], start + 1) if "source: Existing" in line)


def test_validate_with_everything_preinstalled(tmp_path):
    path = stack_file(tmp_path, {"rack": existing([c for c in COMPONENTS if c != "draExampleDriver"])})
    result = validate(path)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert lines[1:3] == ["  Helm releases: none",
                          "  CRD manifests: none; cluster-scoped objects: Namespace modelplane-system, GatewayClass envoy"]


def test_validate_refuses_a_bad_declaration(tmp_path):
    path = stack_file(tmp_path, {"rack": existing(["envoyGateway"])})
    result = validate(path)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert "modelplane:inferenceClusters.rack.servingStack.preinstalled[0]: is preinstalled without " \
           "envoyAiGateway" in result.stderr


def test_the_example_stack_is_valid_and_warns():
    path = REPO / "stacks" / "examples" / "Pulumi.own-cluster.yaml"
    result = validate(path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("warning: modelplane:inferenceClusters.")
    assert "an Existing cluster" in result.stderr


def test_the_rendered_cluster_stack_skips_and_waits_for_nothing_preinstalled():
    """Through render.fleet (what `modelplane render` and `pulumi up` deploy): no CRD manifest, no wait on
    a release that is not there."""
    from modelplane.render.fleet import release_waits_for, waits_for, workload_stack

    fleet = load_fleet(config(existing(["inferenceExtension", "envoyGateway", "envoyAiGateway", "certManager"])),
                       origin="pulumi")
    stack = workload_stack(fleet, "rack")
    assert stack.remote_manifests == []
    assert [r.name for r in stack.releases] == ["mp-kube-prometheus-stack", "mp-lws", "mp-node-feature-discovery",
                                               "mp-dra-driver-nvidia-gpu"]
    assert all(waits_for(stack, o) == () for o in stack.objects)
    assert all(release_waits_for(stack, r) == () and r.depends_on == () for r in stack.releases)
    full = workload_stack(load_fleet(config(existing()), origin="pulumi"), "rack")
    assert [m.name for m in full.remote_manifests] == ["inference-extension-crds"]
    gateway = next(o for o in full.objects if o["kind"] == "Gateway")
    assert waits_for(full, gateway) == ("mp-gateway-helm",)
