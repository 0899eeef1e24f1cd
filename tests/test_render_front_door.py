"""The front door on Traefik, as the reference has it (spec §7): endpoints, weights, routes, the gateway, secrets kept
out. The shared parts (weights, selection, namespaces) are tested here too; the Envoy Gateway front door, the
default, in test_render_front_door_envoy.py."""
from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from builders import demo_deployment, fleet_config, traefik_front_door
from k8s_validation import validate_object
from modelplane.api import NamespacedName, load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.render import front_door as fd
from modelplane.render import front_door_backends as fdb
from modelplane.render import front_door_traefik as traefik
from modelplane.render.secrets import PLACEHOLDER
from modelplane.render.types import gateway_address_placeholder
from modelplane.scheduling import child_name, opaque_name, schedule

STACKS = Path(__file__).resolve().parent.parent / "stacks"
TOKEN = "sk-live-DO-NOT-RENDER-4242"
GATEWAY = {"clusterName": "control", "cluster": {"source": "Kind"},
           "traefik": {"version": "40.2.0", "loadBalancer": "MetalLB", "metallb": {}}}


def find_placeholders(obj):
    """(location in `obj`, config key) of every secret placeholder, depth first, in order."""
    if isinstance(obj, dict):
        for key, item in obj.items():
            yield from (((key,) + where, found) for where, found in find_placeholders(item))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from (((i,) + where, found) for where, found in find_placeholders(item))
    elif isinstance(obj, str):
        yield from (((), match.group(1)) for match in PLACEHOLDER.finditer(obj))


def stack_fleet(name: str):
    """A shipped stack with its front door on Traefik (the stacks use Envoy Gateway): fallback entries become plain ones."""
    config = read_stack_file(STACKS / f"Pulumi.{name}.yaml").config
    traefik_front_door(config["inferenceGateway"])
    for services in config.get("modelServices", {}).values():
        for service in services.values():
            for entry in service["endpoints"]:
                entry.pop("fallback", None)
    return load_fleet(config)


def fleet_with(**overrides):
    config = fleet_config(inferenceGateway=copy.deepcopy(GATEWAY),
                          modelServices={"ml-team": {"mock": {"endpoints": [
                              {"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}}]}}})
    config.update(overrides)
    return load_fleet(config)


def traefik_objects(endpoint):
    return traefik.TraefikFrontDoor(fleet_with()).endpoint_objects(endpoint, frozenset({False}))


def gateway_parts(fleet):
    """The front door's objects and releases, whatever the plan."""
    stack = fd.front_door_stack(fleet)
    return stack.objects, stack.releases


def assert_valid(objects):
    problems = {f"{o['kind']}/{o['metadata']['name']}": validate_object(o) for o in objects}
    assert {k: v for k, v in problems.items() if v} == {}


# --- §7.2 weights --------------------------------------------------------------------------------

@pytest.mark.parametrize("groups, expected", [
    ([(80, 3), (20, 1)], [27, 27, 26, 20]),
    ([(1, 2), (3, 1)], [1, 1, 6]),
    ([(2, 1), (2, 1)], [1, 1]),
    ([(1_000_000, 1), (1, 2)], [1_000_000, 1, 1]),
    # banker's rounding: 2,000,000 : 5 : 5 scales to 1,000,000 : 2.5 : 2.5, and 2.5 rounds to 2 (not 3)
    ([(1_000_000, 1), (1, 2), (5, 2)], [1_000_000, 1, 1, 2, 2]),
    # ... and 4.5 rounds to 4 (not 5)
    ([(1_000_000, 1), (1, 2), (9, 2)], [1_000_000, 1, 1, 4, 4]),
    ([(1, 1)], [1]),
    ([(7, 0), (3, 2)], [2, 1]),  # a group with no endpoints is dropped
    ([(5, 0)], []),
    ([], []),
    ([(9, 2), (1, 1)], [5, 4, 1]),
    ([(1, 3)], [1, 1, 1]),
])
def test_distribute_weights(groups, expected):
    assert fdb.distribute_weights(groups) == expected


def test_weights_stay_within_gateway_api_bounds():
    for groups in ([(1_000_000, 7), (1, 10)], [(999_999, 3), (1_000_000, 1), (1, 9)]):
        weights = fdb.distribute_weights(groups)
        assert len(weights) == sum(n for _, n in groups)
        assert all(1 <= w <= 1_000_000 for w in weights)


# --- §2.3 names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, expected", [
    (lambda: opaque_name("my-model", "cluster-a", "0"), "my-model-5ab63"),
    (lambda: opaque_name("my-model", "cluster-a", "1"), "my-model-609c5"),
    (lambda: opaque_name("my-model", "cluster-b", "0"), "my-model-f0b76"),
    (lambda: child_name("my-model-5ab63", "main"), "my-model-5ab63-main-216f1"),
    (lambda: child_name("test-cluster", "serving-stack"), "test-cluster-serving-stack-fd00b"),
])
def test_name_vectors(call, expected):
    assert call() == expected


def test_replica_endpoint_is_named_like_the_replica():
    fleet = fleet_with()
    result = schedule(fleet)
    for replica in result.replicas():
        endpoint = fdb.replica_endpoint(fleet, replica, {})
        assert endpoint.name == opaque_name(replica.key.name, replica.cluster, str(replica.index))
        service, _ = traefik_objects(endpoint)
        assert service["metadata"]["name"] == replica.name


# --- §7.1 endpoints ------------------------------------------------------------------------------

@pytest.mark.parametrize("url, scheme, host, port, address_type", [
    ("http://172.18.255.200/ml-team/mock-demo-be445/v1", "http", "172.18.255.200", 80, "IPv4"),
    ("https://api.together.xyz/", "https", "api.together.xyz", 443, "FQDN"),
    ("https://api.together.xyz:8443/v1", "https", "api.together.xyz", 8443, "FQDN"),
    ("http://10.0.0.7:8080", "http", "10.0.0.7", 8080, "IPv4"),
    ("http://[2001:db8::1]/x", "http", "2001:db8::1", 80, "IPv6"),
    ("https://[2001:db8::1]:9443/", "https", "2001:db8::1", 9443, "IPv6"),
    ("HTTPS://API.Example.COM", "https", "api.example.com", 443, "FQDN"),
    ("http://a1b2.elb.us-east-1.amazonaws.com/ml-team/r/v1", "http", "a1b2.elb.us-east-1.amazonaws.com", 80, "FQDN"),
])
def test_parse_url(url, scheme, host, port, address_type):
    backend = fdb.parse_url(url)
    assert (backend.scheme, backend.host, backend.port, backend.address_type) == (scheme, host, port, address_type)


@pytest.mark.parametrize("url", ["http:///no-host", "not a url", "http://host:http/", "http://host:99999/"])
def test_parse_url_rejects(url):
    with pytest.raises(ValueError, match="Invalid spec.url"):
        fdb.parse_url(url)


@pytest.mark.parametrize("url, port, address_type, host", [
    ("http://172.18.255.200/ml-team/r/v1", 80, "IPv4", "172.18.255.200"),
    ("https://api.together.xyz/", 443, "FQDN", "api.together.xyz"),
    ("http://[fd00::10]:8000/", 8000, "IPv6", "fd00::10"),
])
def test_endpoint_objects(url, port, address_type, host):
    service, endpoint_slice = traefik.endpoint_objects("together", "ml-team", url, {"app.example.com/provider": "together"})
    assert service["apiVersion"] == "v1" and service["kind"] == "Service"
    assert service["metadata"]["name"] == "together" and service["metadata"]["namespace"] == "ml-team"
    assert "selector" not in service["spec"]  # selectorless: the hand-made slice fills it
    assert service["spec"]["ports"] == [{"port": port, "protocol": "TCP"}]
    assert service["metadata"]["labels"]["app.example.com/provider"] == "together"
    assert endpoint_slice["apiVersion"] == "discovery.k8s.io/v1"
    assert endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"] == "together"
    assert endpoint_slice["addressType"] == address_type
    assert endpoint_slice["ports"] == [{"name": "", "port": port, "protocol": "TCP"}]
    assert endpoint_slice["endpoints"] == [{"addresses": [host], "conditions": {"ready": True}}]
    assert_valid([service, endpoint_slice])


def test_https_on_another_port_names_the_port_https():
    """Traefik speaks TLS to a backend only on port 443 or a port named https*."""
    service, endpoint_slice = traefik.endpoint_objects("saas", "ml-team", "https://llm.example.com:8443/", {})
    assert service["spec"]["ports"] == [{"name": "https", "port": 8443, "protocol": "TCP"}]
    assert endpoint_slice["ports"] == [{"name": "https", "port": 8443, "protocol": "TCP"}]
    assert_valid([service, endpoint_slice])


def test_replica_endpoint_url_rewrite_path_and_labels():
    fleet = fleet_with(modelDeployments={"ml-team": {"mock-demo": {
        **demo_deployment(), "template": {**demo_deployment()["template"],
                                     "metadata": {"labels": {"app.example.com/model": "mock", "tier": "gold"}}}}}})
    result = schedule(fleet)
    replica = min(result.replicas(), key=lambda r: r.cluster)
    endpoint = fdb.replica_endpoint(fleet, replica, {replica.cluster: "172.18.255.100"})
    assert endpoint.url == f"http://172.18.255.100/ml-team/{replica.name}/v1"
    assert endpoint.rewrite_path == f"/ml-team/{replica.name}/"
    assert endpoint.labels == {"app.example.com/model": "mock", "tier": "gold",
                               "modelplane.ai/deployment": "mock-demo", "modelplane.ai/cluster": replica.cluster,
                               "modelplane.ai/replica-index": str(replica.index)}
    service, endpoint_slice = traefik_objects(endpoint)
    assert endpoint_slice["endpoints"][0]["addresses"] == ["172.18.255.100"]
    assert service["metadata"]["labels"]["modelplane.ai/deployment"] == "mock-demo"


def test_replica_endpoint_without_a_known_address_uses_the_placeholder():
    fleet = fleet_with()
    replica = schedule(fleet).replicas()[0]
    endpoint = fdb.replica_endpoint(fleet, replica, {})
    address = gateway_address_placeholder(replica.cluster)
    assert endpoint.url == f"http://{address}/ml-team/{replica.name}/v1"
    _, endpoint_slice = traefik_objects(endpoint)
    assert endpoint_slice["addressType"] == "FQDN"
    assert endpoint_slice["endpoints"][0]["addresses"] == [address]


# --- §7.2 routes ---------------------------------------------------------------------------------

def test_service_route_shape():
    backends = [fdb.RouteBackend(_endpoint("mock-demo-be445", {}, url="http://10.0.0.1/",
                                           rewrite_path="/ml-team/mock-demo-be445/"), weight=1),
                fdb.RouteBackend(_endpoint("plain", {}, url="http://10.0.0.2:8080/"), weight=3)]
    route = traefik.service_route("ml-team", "mock", backends)
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1" and route["kind"] == "HTTPRoute"
    assert route["metadata"]["namespace"] == "ml-team"
    assert route["spec"]["parentRefs"] == [{"name": "modelplane", "namespace": "modelplane-system"}]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/ml-team/mock/"}}]
    assert rule["backendRefs"] == [
        {"name": "mock-demo-be445", "port": 80, "weight": 1, "filters": [
            {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch",
                                                           "replacePrefixMatch": "/ml-team/mock-demo-be445/"}}}]},
        {"name": "plain", "port": 8080, "weight": 3},  # no rewritePath: no filter
    ]
    assert_valid([route])


def test_service_route_without_backends_has_a_rule_without_backend_refs():
    route = traefik.service_route("ml-team", "mock", [])
    assert "backendRefs" not in route["spec"]["rules"][0]
    assert_valid([route])


def test_demo_route_splits_evenly_over_both_regions():
    fleet = stack_fleet("demo")
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    (route,) = [o for o in manifests.objects if o["kind"] == "HTTPRoute"]
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [r["weight"] for r in refs] == [1, 1]
    assert sorted(r["name"] for r in refs) == sorted(r.name for r in schedule(fleet).replicas())


def test_cloud_route_weights_nine_to_one_with_the_saas_endpoint():
    config = read_stack_file(STACKS / "Pulumi.cloud.yaml").config
    traefik_front_door(config["inferenceGateway"])
    chat = config["modelServices"]["ml-team"]["chat"]["endpoints"]
    chat[0]["weight"], chat[1]["weight"] = 9, 1
    del chat[1]["fallback"]
    fleet = load_fleet(config)
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    routes = {o["metadata"]["name"]: o for o in manifests.objects if o["kind"] == "HTTPRoute"}
    refs = routes["chat"]["spec"]["rules"][0]["backendRefs"]
    assert [(r["name"].split("-")[0], r["weight"]) for r in refs] == [("qwen3", 5), ("qwen3", 4), ("together", 1)]
    together = refs[-1]
    assert together["port"] == 443
    # a SaaS endpoint gets its own Host header (Traefik would forward the front door's address)
    assert together["filters"] == [{"type": "URLRewrite", "urlRewrite": {
        "hostname": "api.together.xyz", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}]
    assert [r["weight"] for r in routes["llama"]["spec"]["rules"][0]["backendRefs"]] == [1]


def _endpoint(name, labels, namespace="ml-team", url="http://10.0.0.1/", rewrite_path=None):
    return fdb.FrontDoorEndpoint(namespace=namespace, name=name, url=url, labels=labels, rewrite_path=rewrite_path)


def test_a_service_selects_endpoints_in_its_own_namespace_only():
    fleet = fleet_with()
    service = fleet.model_services[NamespacedName("ml-team", "mock")]
    labels = {"modelplane.ai/deployment": "mock-demo"}
    endpoints = [_endpoint("b", labels), _endpoint("a", labels), _endpoint("other", labels, namespace="other-team")]
    backends = fdb.route_backends("ml-team", service, endpoints)
    assert [b.service for b in backends] == ["a", "b"]
    assert [b.weight for b in backends] == [1, 1]


def test_an_endpoint_matched_twice_counts_for_the_first_entry():
    fleet = fleet_with(modelServices={"ml-team": {"mix": {"endpoints": [
        {"weight": 3, "selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}},
        {"weight": 1, "selector": {"matchLabels": {"modelplane.ai/cluster": "gpu-eu-west"}}},
    ]}}})
    service = fleet.model_services[NamespacedName("ml-team", "mix")]
    endpoints = [
        _endpoint("eu", {"modelplane.ai/deployment": "mock-demo", "modelplane.ai/cluster": "gpu-eu-west"}),
        _endpoint("us", {"modelplane.ai/deployment": "mock-demo", "modelplane.ai/cluster": "gpu-us-east"}),
        _endpoint("eu-other", {"modelplane.ai/deployment": "x", "modelplane.ai/cluster": "gpu-eu-west"}),
    ]
    backends = fdb.route_backends("ml-team", service, endpoints)
    # entry 0: eu, us (3 over 2 -> 2, 1); entry 1: eu-other only (1 over 1)
    assert [(b.service, b.weight) for b in backends] == [("eu", 2), ("us", 1), ("eu-other", 1)]


def test_a_service_that_matches_nothing_gets_no_route():
    fleet = fleet_with(inferenceClusters={"gpu-eu-west": {"labels": {"modelplane.ai/region": "eu-west"},
                                                          "cluster": {"source": "Kind"},
                                                          "nodePools": [{"name": "gpu", "className": "synthetic-gpu",
                                                                         "nodeCount": 0}]}})
    result = schedule(fleet)
    assert result.replicas() == []
    manifests = fd.front_door_parts(fleet, result, {}).manifests()
    assert not [o for o in manifests.objects if o["kind"] == "HTTPRoute"]


# --- §7.3 the gateway ----------------------------------------------------------------------------

def test_inference_gateway_with_metallb():
    gateway = copy.deepcopy(GATEWAY)
    gateway["traefik"]["metallb"] = {"addressPool": "172.18.255.200-172.18.255.250"}
    fleet = fleet_with(inferenceGateway=gateway)
    objects, releases = gateway_parts(fleet)
    by_name = {r.name: r for r in releases}
    assert list(by_name) == ["metallb", "traefik"]
    metallb = by_name["metallb"]
    assert (metallb.chart, metallb.repository, metallb.version, metallb.namespace) == (
        "metallb", "https://metallb.github.io/metallb", "0.14.9", "metallb-system")
    traefik = by_name["traefik"]
    assert (traefik.chart, traefik.repository, traefik.version, traefik.namespace) == (
        "traefik", "https://traefik.github.io/charts", "40.2.0", "traefik-system")
    assert traefik.depends_on == ("metallb",)
    assert traefik.values == {
        "providers": {"kubernetesGateway": {"enabled": True, "statusAddress": {"service": {
                          "namespace": "traefik-system", "name": "traefik"}}},
                      "kubernetesIngress": {"enabled": False}},
        "service": {"nameOverride": "traefik"},
        "gateway": {"enabled": False},
        "gatewayClass": {"enabled": False},
    }
    kinds = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert kinds[("IPAddressPool", "modelplane")]["spec"] == {"addresses": ["172.18.255.200-172.18.255.250"]}
    assert kinds[("IPAddressPool", "modelplane")]["metadata"]["namespace"] == "metallb-system"
    assert kinds[("L2Advertisement", "modelplane")]["spec"] == {"ipAddressPools": ["modelplane"]}
    assert kinds[("GatewayClass", "traefik")]["spec"] == {"controllerName": "traefik.io/gateway-controller"}
    gateway = kinds[("Gateway", "modelplane")]
    assert gateway["metadata"]["namespace"] == "modelplane-system"
    assert gateway["spec"] == {"gatewayClassName": "traefik", "listeners": [
        {"name": "web", "protocol": "HTTP", "port": 8000, "allowedRoutes": {"namespaces": {"from": "All"}}}]}
    assert ("Namespace", "modelplane-system") in kinds and ("Namespace", "metallb-system") in kinds
    assert_valid(objects)


def test_the_configured_address_pool_and_metallb_version():
    gateway = copy.deepcopy(GATEWAY)
    gateway["cluster"] = {"source": "Existing", "existing": {"kubeconfig": "kubeconfig-text"}}
    gateway["traefik"]["metallb"] = {"addressPool": "192.168.10.200-192.168.10.250", "version": "0.15.2"}
    fleet = fleet_with(inferenceGateway=gateway)
    objects, releases = gateway_parts(fleet)
    assert releases[0].version == "0.15.2"
    (pool,) = [o for o in objects if o["kind"] == "IPAddressPool"]
    assert pool["spec"]["addresses"] == ["192.168.10.200-192.168.10.250"]


def test_without_a_load_balancer_there_is_no_metallb():
    fleet = stack_fleet("cloud")
    objects, releases = gateway_parts(fleet)
    assert [r.name for r in releases] == ["traefik"] and releases[0].depends_on == ()
    assert not [o for o in objects if o["apiVersion"].startswith("metallb.io")]


V151 = "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml"


@pytest.mark.parametrize("serving_stack, url", [
    (None, V151),  # the default: the release the reference vendors
    ({"versions": {"gatewayApi": "v1.6.1"}},
     "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml"),
])
def test_the_front_doors_gateway_api_crds_follow_the_fleet_wide_version(serving_stack, url):
    config = read_stack_file(STACKS / "Pulumi.demo.yaml").config
    traefik_front_door(config["inferenceGateway"])
    if serving_stack is not None:
        config["servingStack"] = serving_stack
    # A workload cluster's own block does not move the front door.
    config["inferenceClusters"]["gpu-eu-west"]["servingStack"] = {"versions": {"gatewayApi": "v1.4.0"}}
    fleet = load_fleet(config)
    [manifest] = fd.front_door_stack(fleet).remote_manifests
    assert (manifest.name, manifest.component, manifest.url) == ("gateway-api-crds", "gatewayApi", url)


def test_service_address():
    assert fd.service_address("172.18.255.200", NamespacedName("ml-team", "mock")) == "http://172.18.255.200/ml-team/mock"


def test_release_dependencies():
    assert fd.release_dependencies({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool"}) == ("metallb",)
    assert fd.release_dependencies({"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware"}) == ("traefik",)
    assert fd.release_dependencies({"apiVersion": "v1", "kind": "Service"}) == ()


# --- the whole front door ------------------------------------------------------------------------

@pytest.mark.parametrize("stack, pool, expected", [
    ("demo", "172.18.255.239-172.18.255.254",  # the top /28 of kind's default network: control sorts first
     {"Namespace": 3, "IPAddressPool": 1, "L2Advertisement": 1, "GatewayClass": 1, "Gateway": 1,
      "Service": 2, "EndpointSlice": 2, "HTTPRoute": 1}),
    ("cloud", None,
     {"Namespace": 2, "GatewayClass": 1, "Gateway": 1, "Service": 4, "EndpointSlice": 4, "HTTPRoute": 2}),
])
def test_render_front_door_for_the_stacks(stack, pool, expected):
    fleet = stack_fleet(stack)
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    assert manifests.role == "front-door"
    assert manifests.cluster == fleet.inference_gateway.cluster_name
    assert Counter(o["kind"] for o in manifests.objects) == expected
    assert_valid(manifests.objects)
    # namespaces come before anything in them
    first_namespaced = next(i for i, o in enumerate(manifests.objects) if "namespace" in o["metadata"])
    names = [o["metadata"]["name"] for o in manifests.objects[:first_namespaced] if o["kind"] == "Namespace"]
    assert "modelplane-system" in names
    # The Gateway API CRDs come first, from the upstream release manifest.
    assert [(m.name, m.component, m.url) for m in manifests.remote_manifests] == [
        ("gateway-api-crds", "gatewayApi", V151)]
    # The Gateway is awaited until it has an address (Pulumi's annotation, rendered).
    [gateway] = [o for o in manifests.objects if o["kind"] == "Gateway"]
    assert gateway["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.status.addresses[0].value}"}
    pools = [o["spec"]["addresses"] for o in manifests.objects if o["kind"] == "IPAddressPool"]
    assert pools == ([[pool]] if pool else [])
    if pool:  # on kind the range is computed from kind's default network: a named placeholder says so
        [placeholder] = [p for p in manifests.placeholders if p.token == pool]
        assert placeholder.name == "control.metallbAddressPool" and "172.18.0.0/16" in placeholder.value


def test_a_kind_front_door_range_follows_the_kind_network():
    fleet = stack_fleet("demo")
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}, "192.168.96.0/20").manifests()
    [pool] = [o for o in manifests.objects if o["kind"] == "IPAddressPool"]
    assert pool["spec"]["addresses"] == ["192.168.111.239-192.168.111.254"]


def test_a_configured_address_pool_is_no_placeholder():
    gateway = copy.deepcopy(GATEWAY)
    gateway["traefik"]["metallb"] = {"addressPool": "172.18.200.0-172.18.200.15"}
    fleet = fleet_with(inferenceGateway=gateway)
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    [pool] = [o for o in manifests.objects if o["kind"] == "IPAddressPool"]
    assert pool["spec"]["addresses"] == ["172.18.200.0-172.18.200.15"]
    assert [p.name for p in manifests.placeholders if p.name.endswith(".metallbAddressPool")] == []


def test_gateway_addresses_are_used_per_cluster():
    fleet = stack_fleet("demo")
    result = schedule(fleet)
    addresses = {"gpu-eu-west": "172.18.255.100", "gpu-us-east": "172.18.255.120"}
    manifests = fd.front_door_parts(fleet, result, addresses).manifests()
    slices = {o["metadata"]["name"]: o for o in manifests.objects if o["kind"] == "EndpointSlice"}
    for replica in result.replicas():
        assert slices[replica.name]["endpoints"][0]["addresses"] == [addresses[replica.cluster]]
        assert slices[replica.name]["addressType"] == "IPv4"


def test_every_namespace_in_use_gets_a_namespace_object():
    fleet = fleet_with(modelEndpoints={"other-team": {"saas": {"url": "https://api.example.com/"}}})
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    namespaces = {o["metadata"]["name"] for o in manifests.objects if o["kind"] == "Namespace"}
    assert namespaces == {"modelplane-system", "metallb-system", "ml-team", "other-team"}


# --- secrets -------------------------------------------------------------------------------------

def secret_fleet():
    return fleet_with(
        modelEndpoints={"ml-team": {"saas": {"url": "https://api.example.com/", "rewritePath": "/",
                                             "labels": {"app.example.com/provider": "example"},
                                             "auth": {"token": TOKEN}}}},
        modelServices={"ml-team": {"mock": {"endpoints": [
            {"weight": 3, "selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}},
            {"weight": 1, "selector": {"matchLabels": {"app.example.com/provider": "example"}}}]}}},
    )


def test_auth_adds_a_middleware_referenced_from_the_backend_and_no_secret_value():
    fleet = secret_fleet()
    manifests = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    rendered = json.dumps([o for o in manifests.objects]) + json.dumps([r.to_dict() for r in manifests.releases])
    assert TOKEN not in rendered
    (middleware,) = [o for o in manifests.objects if o["kind"] == "Middleware"]
    name = child_name("saas", "auth")
    assert middleware["apiVersion"] == "traefik.io/v1alpha1"
    assert middleware["metadata"] == {"name": name, "namespace": "ml-team",
                                      "labels": {"app.kubernetes.io/managed-by": "modelplane"}}
    assert middleware["spec"] == {"headers": {"customRequestHeaders": {
        "Authorization": "Bearer <secret: modelplane:modelEndpoints.ml-team.saas.auth.token>"}}}
    assert list(find_placeholders(middleware)) == [
        (("spec", "headers", "customRequestHeaders", "Authorization"), "modelplane:modelEndpoints.ml-team.saas.auth.token")]
    (route,) = [o for o in manifests.objects if o["kind"] == "HTTPRoute"]
    (saas_ref,) = [r for r in route["spec"]["rules"][0]["backendRefs"] if r["name"] == "saas"]
    assert saas_ref["filters"][-1] == {"type": "ExtensionRef", "extensionRef": {
        "group": "traefik.io", "kind": "Middleware", "name": name}}
    assert not [o for o in manifests.objects if o["kind"] == "Secret"]  # Traefik cannot read a header from one
    assert_valid(manifests.objects)


def test_custom_header_and_bare_token():
    fleet = fleet_with(modelEndpoints={"ml-team": {"saas": {
        "url": "https://api.example.com/", "auth": {"token": TOKEN, "header": "x-api-key", "scheme": ""}}}})
    endpoint = fleet.model_endpoints[NamespacedName("ml-team", "saas")]
    middleware = traefik.endpoint_auth_middleware("ml-team", "saas", endpoint.auth)
    assert middleware["spec"]["headers"]["customRequestHeaders"] == {
        "x-api-key": "<secret: modelplane:modelEndpoints.ml-team.saas.auth.token>"}
    assert TOKEN not in json.dumps(middleware)


def test_no_secret_value_is_rendered_anywhere():
    """Endpoint token, cache token and kubeconfig: none appears in any rendered object or release."""
    from modelplane.render.cache import cache_storage_class, render_cache
    from modelplane.render.serving_stack import render_serving_stack

    secrets = [TOKEN, "hf_CACHE_TOKEN_DO_NOT_RENDER", "KUBECONFIG-DO-NOT-RENDER"]
    config = fleet_config(
        inferenceGateway=copy.deepcopy(GATEWAY),
        modelEndpoints={"ml-team": {"saas": {"url": "https://api.example.com/", "auth": {"token": secrets[0]},
                                             "labels": {"app.example.com/provider": "example"}}}},
        modelServices={"ml-team": {"mock": {"endpoints": [
            {"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}},
            {"selector": {"matchLabels": {"app.example.com/provider": "example"}}}]}}},
        modelCaches={"ml-team": {"weights": {"source": "HuggingFace", "huggingFace": {
            "repo": "Qwen/Qwen3-8B", "sizeGiB": 20, "token": secrets[1]}}}},
    )
    config["inferenceClusters"]["byo"] = {
        "labels": {"modelplane.ai/region": "eu-west"},
        "cluster": {"source": "Existing", "existing": {"kubeconfig": secrets[2], "cache": {"storageClassName": "nfs"}}},
        "nodePools": [{"name": "gpu", "className": "synthetic-gpu"}]}
    fleet = load_fleet(config)
    result = schedule(fleet)
    front = fd.front_door_parts(fleet, result, {}).manifests()
    everything = [front.objects, [r.to_dict() for r in front.releases]]
    cache_objects = []
    for cluster, spec in fleet.inference_clusters.items():
        objects, releases = render_serving_stack(cluster, fleet.serving_stack_for(cluster),
                                                 spec.cluster.source == "Kind")
        everything += [objects, [r.to_dict() for r in releases]]
        storage = cache_storage_class(fleet, cluster)
        for key, cache in fleet.model_caches.items():
            if storage:
                cache_objects += render_cache(key.namespace, key.name, cache, cluster, storage)
    everything.append(cache_objects)
    text = json.dumps(everything)
    for secret in secrets:
        assert secret not in text
    assert [o["kind"] for o in cache_objects] == ["PersistentVolumeClaim", "Secret", "Job"]  # only byo has RWX storage
    found = {key for objs in (front.objects, cache_objects) for o in objs for _, key in find_placeholders(o)}
    assert found == {"modelplane:modelEndpoints.ml-team.saas.auth.token",
                     "modelplane:modelCaches.ml-team.weights.huggingFace.token"}
