"""The Pulumi program deploys exactly what `modelplane render` shows (DESIGN.md: "render is the whole truth").

The program runs under the suite's mocks for the `demo` and `cloud` stacks (and the demo once more
on a kind network other than kind's default, so the MetalLB ranges differ from the offline render).
Every registered Kubernetes resource (every `kubernetes:*` type: typed classes, custom resources,
`yaml/v2:ConfigFile` remote manifests, `helm.sh/v3:Release`; only the providers are left out) is
matched with the render of the same plan, both ways:

* objects by (cluster, apiVersion, kind, namespace, name), with the whole object compared (metadata
  with labels and annotations, spec, data, ...) once the render's placeholders are replaced with
  what the program puts there;
* Helm releases by (cluster, release name), comparing namespace, chart, repository, version, values
  and the releases and remote manifests each waits for;
* remote manifests by (cluster, name), comparing the file applied.

Nothing may be registered that render does not show, and nothing rendered may be missing. The
order the engine gets is checked against the render's order too: an object waits only for objects
listed before it, and a stack object for exactly the releases and manifests render names.
"""
from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

import pulumi_recording
from pulumi_recording import Registration
from k8s_validation import integral_floats_to_int
from modelplane.api import load_fleet
from modelplane.infra.backends.kind import ipv4_subnet
from modelplane.render.fleet import release_waits_for, render_fleet, waits_for, workload_stack
from modelplane.render.front_door import front_door_stack
from modelplane.render.metallb import ADDRESS_POOL, kind_address_pools, kind_cluster_names
from modelplane.render.types import ClusterManifests, ClusterStack, HelmRelease
from builders import traefik_front_door
from program_run import Deployed, deploy, stack_config

PROVIDER = "pulumi:providers:kubernetes"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
# Inputs of a helm Release that are how it is installed, not what: fixed for every release.
RELEASE_SETTINGS = {"createNamespace": True, "atomic": True, "timeout": 900, "compat": "true"}

SAAS_KEY = "sk-together-render-test"
HF_TOKEN = "hf_render_test_token"
SECRETS = {"modelplane:modelEndpoints.ml-team.together.auth.token": SAAS_KEY,
           "modelplane:modelEndpoints.ml-team.saas.auth.token": SAAS_KEY,
           "modelplane:modelCaches.ml-team.qwen3-8b.huggingFace.token": HF_TOKEN}
OTHER_NETWORK = "192.168.96.0/20"


def cloud_config() -> dict:
    config = stack_config("cloud")
    config["modelEndpoints"]["ml-team"]["together"]["auth"] = {"token": SAAS_KEY}
    config["modelCaches"]["ml-team"]["qwen3-8b"]["huggingFace"]["token"] = HF_TOKEN
    return config


def mocked_network() -> str:
    """The kind network the mocked `docker network inspect` reports (what the kind backend carves from)."""
    stdout = pulumi_recording.OUTPUT_HOOKS["command:local:Command"]({"create": "docker network inspect kind"})["stdout"]
    return ipv4_subnet(stdout, "kind")


def deploy_on_network(recording, config: dict, network: str) -> Deployed:
    """The program with `docker network inspect` reporting `network` as the kind network."""
    hook = pulumi_recording.OUTPUT_HOOKS["command:local:Command"]

    def other(inputs: dict) -> dict:
        if "docker network inspect" in inputs.get("create", ""):
            return {"stdout": json.dumps([{"Subnet": network}]), "stderr": ""}
        return hook(inputs)

    pulumi_recording.OUTPUT_HOOKS["command:local:Command"] = other
    try:
        return deploy(*recording, config)
    finally:
        pulumi_recording.OUTPUT_HOOKS["command:local:Command"] = hook


@dataclass
class Run:
    """One program run under mocks, and the render of the same plan with what fills its placeholders."""

    deployed: Deployed
    fleet: Any
    network: str  # the kind network the program saw
    rendered: list[ClusterManifests] = field(default_factory=list)
    stacks: dict[str, ClusterStack] = field(default_factory=dict)


def run(recording, config: dict, network: str | None = None) -> Run:
    deployed = deploy_on_network(recording, config, network) if network else deploy(*recording, config)
    fleet = load_fleet(config)
    out = Run(deployed, fleet, network or mocked_network())
    # A workload gateway's address is known once it is programmed: the mocks report one per Gateway.
    address = pulumi_recording.gateway_status({"metadata": {"name": "inference-gateway"}})["status"]["addresses"][0]["value"]
    out.rendered = render_fleet(fleet, deployed.result, {name: address for name in fleet.inference_clusters})
    out.stacks = {name: workload_stack(fleet, name) for name in fleet.inference_clusters}
    if fleet.inference_gateway is not None:
        out.stacks[fleet.inference_gateway.cluster_name] = front_door_stack(fleet)
    return out


def own_front_door_config() -> dict:
    """The demo with its front door on Traefik, on an Existing cluster that already has the Gateway API CRDs."""
    config = stack_config("demo")
    gateway = traefik_front_door(config["inferenceGateway"])
    gateway["cluster"] = {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}
    gateway["traefik"]["metallb"] = {"addressPool": "192.168.10.200-192.168.10.250"}
    gateway["preinstalled"] = ["gatewayApi"]
    return config


@pytest.fixture(scope="module")
def runs(recording) -> dict[str, Run]:
    return {"demo": run(recording, stack_config("demo")),
            "demo-other-network": run(recording, stack_config("demo"), OTHER_NETWORK),
            "cloud": run(recording, cloud_config()),
            "demo-own-front-door": run(recording, own_front_door_config()),
            "demo-traefik": run(recording, traefik_config())}


STACKS = ["demo", "demo-other-network", "cloud", "demo-own-front-door", "demo-traefik"]


def traefik_config() -> dict:
    """The demo with its front door on Traefik and a hand-made endpoint with a credential (a Middleware)."""
    config = stack_config("demo")
    traefik_front_door(config["inferenceGateway"])
    config["modelEndpoints"] = {"ml-team": {"saas": {"url": "https://api.example.com/", "labels": {"provider": "saas"},
                                                     "auth": {"token": SAAS_KEY}}}}
    config["modelServices"]["ml-team"]["mock"]["endpoints"].append({"selector": {"matchLabels": {"provider": "saas"}}})
    return config


# --- what fills a placeholder under the mocks ----------------------------------------------------------

def placeholder_value(run: Run, cluster: str, name: str) -> str:
    """What the program puts where render left placeholder `name` (see `render.types.Placeholder`)."""
    if name in SECRETS:
        return SECRETS[name]
    owner, _, value = name.partition(".")
    assert owner == cluster, f"{cluster}: placeholder {name} names another cluster"
    if value == ADDRESS_POOL:  # the kind backend carves the range from the network it finds, by the same rule
        return kind_address_pools(kind_cluster_names(run.fleet), run.network)[cluster]
    if value == "efsFileSystemId":  # the mocks give every resource the id `<name>-id`
        return f"{cluster}-cache-id"
    if value == "networkName":  # cloud_mocks: an unnamed GCP network is `mock-network`
        return "mock-network"
    raise AssertionError(f"{cluster}: render left placeholder {name}, which this test does not know how the "
                         "program fills; add it to placeholder_value")


def filled(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: filled(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, replacements) for v in value]
    if isinstance(value, str):
        for token, real in replacements.items():
            value = value.replace(token, real)
    return value


# --- both sides as comparable items ------------------------------------------------------------------------

def object_key(cluster: str, obj: dict) -> tuple:
    meta = obj["metadata"]
    return ("object", cluster, obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


def release_content(release: HelmRelease) -> dict:
    return {"namespace": release.namespace, "chart": release.chart, "repository": release.repository.rstrip("/"),
            "version": release.version, "values": release.values}


def rendered_items(run: Run) -> tuple[dict[tuple, Any], dict[tuple, int]]:
    """Every rendered item by key, placeholders filled, and each object's position in its cluster's list."""
    items: dict[tuple, Any] = {}
    position: dict[tuple, int] = {}
    for cluster in run.rendered:
        name = cluster.cluster
        replacements = {p.token: placeholder_value(run, name, p.name) for p in cluster.placeholders}
        for i, obj in enumerate(cluster.objects):
            key = object_key(name, obj)
            assert key not in items, f"rendered twice: {key}"
            items[key] = filled(obj, replacements)
            position[key] = i
        for release in cluster.releases:
            items[("release", name, release.name)] = release_content(release)
        for manifest in cluster.remote_manifests:
            items[("manifest", name, manifest.name)] = {"file": manifest.url, "resourcePrefix": name}
    text = json.dumps(list(items.values()), default=str)
    for leftover in ("<secret: ", "<deployed: ", ".invalid"):
        assert leftover not in text, f"a placeholder is left after filling: {leftover}"
    return items, position


def registered_release(r: Registration) -> dict:
    inputs = integral_floats_to_int(dict(r.inputs))
    settings = {k: inputs.pop(k) for k in list(inputs) if k in RELEASE_SETTINGS}
    assert settings == RELEASE_SETTINGS, f"{r.name}: installed with {settings}, not {RELEASE_SETTINGS}"
    repository_opts = inputs.pop("repositoryOpts", None)
    chart = inputs.pop("chart")
    if repository_opts is not None:
        assert set(repository_opts) == {"repo"}, r.name
        repository = repository_opts["repo"].rstrip("/")
    elif chart.startswith("oci://"):
        repository, chart = chart.rsplit("/", 1)
    else:
        repository = ""  # a local chart file (a folder mirror)
    name = inputs.pop("name")
    assert r.name.endswith(f"/{name}"), f"{r.name}: Pulumi name and Helm release name {name} differ"
    content = {"namespace": inputs.pop("namespace"), "chart": chart, "repository": repository,
               "version": inputs.pop("version"), "values": inputs.pop("values", {})}
    assert inputs == {}, f"{r.name}: inputs render knows nothing of: {sorted(inputs)}"
    return content


def registered_items(seen) -> tuple[dict[tuple, Any], dict[str, tuple], list[tuple]]:
    """Every registered Kubernetes resource by key; URN -> key; and keys registered more than once."""
    items: dict[tuple, Any] = {}
    by_urn: dict[str, tuple] = {}
    counts: Counter = Counter()
    for r in seen.all:
        if not r.type.startswith("kubernetes:"):  # the providers are `pulumi:providers:kubernetes`
            continue
        cluster = r.name.split("/", 1)[0]
        assert r.provider_name == cluster, f"{r.type} {r.name} goes through provider {r.provider_name}"
        if r.type == RELEASE:
            key, content = ("release", cluster, r.name.split("/", 1)[1]), registered_release(r)
        elif r.type == CONFIG_FILE:
            key, content = ("manifest", cluster, r.name.split("/", 1)[1]), dict(r.inputs)
        else:
            obj = integral_floats_to_int({k: v for k, v in r.inputs.items() if v is not None})
            key, content = object_key(cluster, obj), obj
            # The Pulumi name is `<cluster>/<namespace>/<name>` and the type is the object's group/version/kind.
            meta = obj["metadata"]
            assert r.name == "/".join(p for p in (cluster, meta.get("namespace"), meta["name"]) if p), r.name
            api_version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
            assert r.type == f"kubernetes:{api_version}:{obj['kind']}", (r.type, r.name)
        counts[key] += 1
        items[key] = content
        by_urn[r.urn] = key
    return items, by_urn, [key for key, n in counts.items() if n > 1]


def diff(registered: dict[tuple, Any], rendered: dict[tuple, Any]) -> list[str]:
    problems = [f"deployed but not rendered: {key}" for key in sorted(registered.keys() - rendered.keys(), key=str)]
    problems += [f"rendered but not deployed: {key}" for key in sorted(rendered.keys() - registered.keys(), key=str)]
    for key in sorted(registered.keys() & rendered.keys(), key=str):
        if registered[key] != rendered[key]:
            problems.append(f"differs: {key}\n  deployed: {json.dumps(registered[key], sort_keys=True, default=str)}\n"
                            f"  rendered: {json.dumps(rendered[key], sort_keys=True, default=str)}")
    return problems


# --- the tests --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_every_deployed_kubernetes_resource_is_rendered_and_nothing_else(runs, stack):
    run = runs[stack]
    registered, _, twice = registered_items(run.deployed.seen)
    rendered, _ = rendered_items(run)
    assert twice == []
    assert diff(registered, rendered) == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_engine_gets_the_rendered_order(runs, stack):
    """Within a cluster: an object waits only for objects rendered before it; a release for exactly the
    releases it lists and the remote manifests render names; a stack object for exactly what render names."""
    run = runs[stack]
    _, by_urn, _ = registered_items(run.deployed.seen)
    _, position = rendered_items(run)
    problems = []
    for r in run.deployed.seen.all:
        key = by_urn.get(r.urn)
        if key is None:
            continue
        cluster = key[1]
        stack_ = run.stacks[cluster]
        prerequisites = {by_urn[u] for u in r.dependencies if u in by_urn}
        same_cluster = {p for p in prerequisites if p[1] == cluster}
        releases = {p[2] for p in same_cluster if p[0] == "release"}
        manifests = {p[2] for p in same_cluster if p[0] == "manifest"}
        if key[0] == "manifest":
            if same_cluster:
                problems.append(f"{key} waits for {same_cluster}: remote manifests are applied first")
        elif key[0] == "release":
            release = next(x for x in stack_.releases if x.name == key[2])
            if releases != set(release.depends_on):
                problems.append(f"{key} waits for releases {sorted(releases)}, render lists {release.depends_on}")
            if manifests != set(release_waits_for(stack_, release)):
                problems.append(f"{key} waits for manifests {sorted(manifests)}, render names "
                                f"{release_waits_for(stack_, release)}")
        else:
            for p in same_cluster:
                if p[0] == "object" and position[p] > position[key]:
                    problems.append(f"{key} waits for {p}, which render lists after it")
            obj = next((o for o in stack_.objects if object_key(cluster, o) == key), None)
            if obj is not None and releases | manifests != set(waits_for(stack_, obj)):
                problems.append(f"{key} waits for {sorted(releases | manifests)}, render names {waits_for(stack_, obj)}")
    assert problems == []


def test_the_comparison_sees_every_kind_of_resource(runs):
    """The comparison covers typed objects, custom resources, remote manifests and releases on every cluster."""
    for stack, expected in (("demo", {"control", "gpu-eu-west", "gpu-us-east"}),
                            ("cloud", {"front-door", "aws-us-east", "azure-eu-west", "gcp-us-central"})):
        registered, _, _ = registered_items(runs[stack].deployed.seen)
        for what in ("object", "release"):
            assert {key[1] for key in registered if key[0] == what} == expected, (stack, what)
        # Remote manifests: the workload clusters' Inference Extension CRDs (Envoy Gateway's chart brings the front
        # door's Gateway API CRDs); the Traefik front door's Gateway API CRDs in demo-traefik.
        assert {key[1] for key in registered if key[0] == "manifest"} == expected - {"control", "front-door"}
        kinds = {key[3] for key in registered if key[0] == "object"}
        assert {"Namespace", "Gateway", "HTTPRoute"} <= kinds
    kinds = {key[3] for key in registered_items(runs["demo"].deployed.seen)[0] if key[0] == "object"}
    assert {"IPAddressPool", "L2Advertisement"} <= kinds
    kinds = {key[3] for key in registered_items(runs["cloud"].deployed.seen)[0] if key[0] == "object"}
    assert {"StorageClass", "Backend", "BackendTrafficPolicy", "HTTPRouteFilter", "LeaderWorkerSet", "Job",
            "Secret"} <= kinds
    registered = registered_items(runs["demo-traefik"].deployed.seen)[0]
    assert {key[1] for key in registered if key[0] == "manifest"} == {"control", "gpu-eu-west", "gpu-us-east"}
    assert "Middleware" in {key[3] for key in registered if key[0] == "object"}


def test_an_existing_front_door_with_the_gateway_api_preinstalled_gets_no_crd_manifest(runs):
    """`inferenceGateway.preinstalled: [gatewayApi]`: no ConfigFile on the front door, Traefik waits for no manifest."""
    seen = runs["demo-own-front-door"].deployed.seen
    registered, _, _ = registered_items(seen)
    assert {key[2] for key in registered if key[0] == "manifest" and key[1] == "control"} == set()
    assert [r.name for r in seen.of_type(CONFIG_FILE) if r.name.startswith("control/")] == []
    assert {key[2] for key in registered if key[0] == "release" and key[1] == "control"} == {"metallb", "traefik"}
    assert {key[1] for key in registered_items(runs["demo-traefik"].deployed.seen)[0] if key[0] == "manifest"} >= {
        "control"}


def test_placeholders_are_filled_with_what_exists_once_deployed(runs):
    """On another kind network the program's MetalLB ranges differ from the render's (kind's default
    network), by the same rule; secrets and cloud values reach the objects only in the program."""
    demo, other = runs["demo"], runs["demo-other-network"]
    for cluster in ("control", "gpu-eu-west", "gpu-us-east"):
        [pool] = [r for r in other.deployed.seen.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
                  if r.name.startswith(f"{cluster}/")]
        [rendered] = [p for c in other.rendered if c.cluster == cluster for p in c.placeholders
                      if p.name == f"{cluster}.{ADDRESS_POOL}"]
        assert rendered.token.startswith("172.18.255.")  # render: kind's default network
        assert pool.inputs["spec"]["addresses"] == [kind_address_pools(kind_cluster_names(other.fleet),
                                                                       OTHER_NETWORK)[cluster]]
        assert pool.inputs["spec"]["addresses"][0].startswith("192.168.111.")
        [same] = [r for r in demo.deployed.seen.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
                  if r.name.startswith(f"{cluster}/")]
        assert same.inputs["spec"]["addresses"] == [rendered.token]  # on kind's default network they agree
    cloud = {c.cluster: {p.name for p in c.placeholders} - set(SECRETS) for c in runs["cloud"].rendered}
    assert cloud == {"front-door": set(), "aws-us-east": {"aws-us-east.efsFileSystemId"}, "azure-eu-west": set(),
                     "gcp-us-central": {"gcp-us-central.networkName"}}
    secrets = {c.cluster: {p.name for p in c.placeholders} & set(SECRETS) for c in runs["cloud"].rendered}
    assert secrets["front-door"] == {"modelplane:modelEndpoints.ml-team.together.auth.token"}
    assert set().union(*secrets.values()) == set(SECRETS) - {"modelplane:modelEndpoints.ml-team.saas.auth.token"}


def test_the_comparison_fails_when_infra_adds_drops_or_changes_something(monkeypatch, recording):
    """The check itself: an object infra adds, one it drops and a release value it changes are all reported."""
    from modelplane.infra.components import cluster, common, serving_stack

    add, install, releases = cluster.apply_objects, serving_stack.install_stack, common.install_releases
    sneaky = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sneaky", "namespace": "default"}}

    def added(name, objects, opts, **kwargs):
        return add(name, [*objects, sneaky], opts, **kwargs)

    def dropped(stack, opts, replacements, adopt=()):
        objects = [o for o in stack.objects if o["kind"] != "L2Advertisement"]
        return install(dataclasses.replace(stack, objects=objects), opts, replacements, adopt)

    def changed(name, rendered, opts, after=None, adopt=()):
        rendered = [dataclasses.replace(r, values={**r.values, "replicaCount": 2}) if r.name == "mp-lws" else r
                    for r in rendered]
        return releases(name, rendered, opts, after, adopt)

    monkeypatch.setattr(cluster, "apply_objects", added)
    monkeypatch.setattr(serving_stack, "install_stack", dropped)
    monkeypatch.setattr(common, "install_releases", changed)
    mutated = run(recording, stack_config("demo"))
    problems = diff(registered_items(mutated.deployed.seen)[0], rendered_items(mutated)[0])
    for cluster_name in ("gpu-eu-west", "gpu-us-east"):
        assert f"deployed but not rendered: ('object', '{cluster_name}', 'v1', 'ConfigMap', 'default', 'sneaky')" \
            in problems
        assert (f"rendered but not deployed: ('object', '{cluster_name}', 'metallb.io/v1beta1', 'L2Advertisement', "
                "'metallb-system', 'modelplane')") in problems
        assert any(p.startswith(f"differs: ('release', '{cluster_name}', 'mp-lws')") for p in problems)
    assert len(problems) == 6, problems
