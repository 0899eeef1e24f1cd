"""The front door on Envoy Gateway (the default): every backend health-checked, ejected and retried as one Envoy
cluster per service, fallback tiers, one base URL routed by the request's `model`, secrets kept in Secrets.

What Envoy Gateway itself makes of these objects is checked by its own translator (egctl) in
tests/test_front_door_xds.py and the end-to-end suite; here: the objects, their schemas, and the rules that
keep a service's backends in one Envoy cluster (no backend carries a filter; all are addressed by name).
"""
from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from builders import fleet_config, stack_config
from k8s_validation import validate_object
from modelplane.api import ConfigError, load_fleet
from modelplane.render import front_door as fd
from modelplane.render import envoy_policy
from modelplane.render import front_door_envoy as envoy
from modelplane.render import front_door_envoy_routes as envoy_routes
from modelplane.render.model_router import MODEL_PATHS
from modelplane.scheduling import child_name, schedule

TOKEN = "sk-live-DO-NOT-RENDER-4242"
GATEWAY = {"clusterName": "control", "cluster": {"source": "Kind"},
           "envoyGateway": {"loadBalancer": "MetalLB", "metallb": {}}}
MOCK = {"modelplane.ai/deployment": "mock-demo"}


def front_door(config: dict, addresses: dict[str, str] | None = None):
    fleet = load_fleet(config)
    return fleet, fd.front_door_parts(fleet, schedule(fleet), addresses or {}).manifests()


def with_saas(fallback: bool = True, **endpoint) -> dict:
    config = fleet_config(inferenceGateway=copy.deepcopy(GATEWAY))
    config["modelEndpoints"] = {"ml-team": {"saas": {"url": "https://api.example.com/", "labels": {"provider": "saas"},
                                                     **endpoint}}}
    config["modelServices"] = {"ml-team": {"mock": {"alias": "mock", "endpoints": [
        {"selector": {"matchLabels": MOCK}},
        {"fallback": fallback, "selector": {"matchLabels": {"provider": "saas"}}}]}}}
    return config


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def assert_valid(objects):
    problems = {f"{o['kind']}/{o['metadata']['name']}": validate_object(o) for o in objects}
    assert {k: v for k, v in problems.items() if v} == {}


# --- the whole front door, for the shipped stacks ---------------------------------------------------------

@pytest.mark.parametrize("stack, expected", [
    ("demo", {"Namespace": 3, "IPAddressPool": 1, "L2Advertisement": 1, "EnvoyProxy": 1, "GatewayClass": 1,
              "Gateway": 1, "ClientTrafficPolicy": 1, "EnvoyExtensionPolicy": 1, "HTTPRouteFilter": 5,
              "HTTPRoute": 2, "Service": 2, "EndpointSlice": 2, "Backend": 2, "BackendTrafficPolicy": 2}),
    # A hand-made endpoint (together): the internal hop Gateway with its own EnvoyProxy, policies and NetworkPolicy;
    # the fallback tier's EnvoyPatchPolicy.
    ("cloud", {"Namespace": 2, "EnvoyProxy": 2, "GatewayClass": 1, "Gateway": 2, "ClientTrafficPolicy": 2,
               "EnvoyExtensionPolicy": 2, "HTTPRouteFilter": 7, "HTTPRoute": 4, "Service": 3, "EndpointSlice": 3,
               "Backend": 5, "BackendTrafficPolicy": 4, "NetworkPolicy": 1, "EnvoyPatchPolicy": 1}),
])
def test_the_shipped_stacks_front_doors_are_valid_envoy_gateway_objects(stack, expected):
    fleet, manifests = front_door(stack_config(stack))
    assert Counter(o["kind"] for o in manifests.objects) == expected
    assert_valid(manifests.objects)  # against Envoy Gateway's own CRDs (v1.8.1) and the Gateway API's
    assert not [o for o in manifests.objects if o["apiVersion"].startswith("traefik.io/")]
    assert manifests.remote_manifests == []  # Envoy Gateway's chart brings the Gateway API CRDs
    [release] = [r for r in manifests.releases if r.chart == "gateway-helm"]
    assert (release.name, release.version, release.namespace) == ("mp-gateway-helm", "v1.8.1", "envoy-gateway-system")
    assert release.values == {"config": {"envoyGateway": {"extensionApis": {"enableBackend": True,
                                                                              "enableEnvoyPatchPolicy": True}}}}


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_every_service_is_health_checked_ejected_and_retried(stack):
    """What reviewers look for, per backend: an active check, passive ejection, one retry, never a known-dead one."""
    fleet, manifests = front_door(stack_config(stack))
    routes = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in manifests.objects
              if o["kind"] == "HTTPRoute" and o["metadata"]["namespace"] != "modelplane-system"
              and not o["spec"].get("hostnames")}
    policies = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in manifests.objects
                if o["kind"] == "BackendTrafficPolicy" and o["spec"]["targetRefs"][0]["kind"] == "HTTPRoute"
                and (o["metadata"]["namespace"], o["metadata"]["name"]) in routes}
    assert set(routes) == set(policies) == {(k.namespace, k.name) for k in fleet.model_services}
    for key, policy in policies.items():
        spec = policy["spec"]
        assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": key[1]}]
        active = spec["healthCheck"]["active"]
        assert (active["type"], active["http"]) == ("HTTP", {"path": "/health", "expectedStatuses": [200]})
        # A dead backend is out within interval x unhealthyThreshold + timeout = 5 s (the issue asks for 10 s).
        assert int(active["interval"][:-1]) * active["unhealthyThreshold"] + int(active["timeout"][:-1]) <= 10
        passive = spec["healthCheck"]["passive"]
        assert passive["consecutiveLocalOriginFailures"] == 1 and passive["maxEjectionPercent"] == 100
        assert spec["healthCheck"]["panicThreshold"] == 0
        # Only what never reached an engine is sent again: a generation is never run (or billed) twice.
        assert spec["retry"] == {"numRetries": 1, "retryOn": {"triggers": [
            "connect-failure", "refused-stream", "reset-before-request"]}}
        assert spec["responseOverride"] == envoy.local_error_overrides()


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_a_services_backends_can_share_one_envoy_cluster(stack):
    """Envoy Gateway puts a rule's backends in one Envoy cluster (so health, ejection, retries and fallback work
    across them) only when no backendRef has a filter of its own and all Backends are addressed alike."""
    _, manifests = front_door(stack_config(stack))
    backends = by_kind(manifests.objects, "Backend")
    for route in by_kind(manifests.objects, "HTTPRoute").values():
        for rule in route["spec"]["rules"]:
            for ref in rule.get("backendRefs", []):
                assert "filters" not in ref
            if route["metadata"]["namespace"] == "modelplane-system" or route["spec"].get("hostnames"):
                continue  # the front door's own answers, and hops (one upstream each)
            endpoints = [backends[ref["name"]]["spec"]["endpoints"] for ref in rule["backendRefs"]]
            assert all(len(e) == 1 and set(e[0]) == {"fqdn", "hostname"} and e[0]["fqdn"]["port"] == 80
                       for e in endpoints), endpoints


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_one_rule_per_service_so_one_envoy_cluster_holds_its_health_and_ejection(stack):
    """Finding 7: the path way in and the model way in are matches of one rule (one Envoy cluster), and the
    router's header never reaches a backend."""
    fleet, manifests = front_door(stack_config(stack))
    routes = by_kind(manifests.objects, "HTTPRoute")
    filters = by_kind(manifests.objects, "HTTPRouteFilter")
    for key in fleet.model_services:
        [rule] = routes[key.name]["spec"]["rules"]
        assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{key.namespace}/{key.name}/"}}] + [
            {"path": {"type": "Exact", "value": path},
             "headers": [{"type": "Exact", "name": "x-modelplane-model", "value": f"{key.namespace}/{key.name}"}]}
            for path in MODEL_PATHS]
        path_filter, drop = rule["filters"]
        prefix = {"ml-team/mock": "^/ml\\-team/mock/", "ml-team/chat": "^/ml\\-team/chat/",
                  "ml-team/llama": "^/ml\\-team/llama/"}[f"{key.namespace}/{key.name}"]
        assert filters[path_filter["extensionRef"]["name"]]["spec"]["urlRewrite"] == {
            "hostname": {"type": "Backend"}, "path": {
                "type": "ReplaceRegexMatch", "replaceRegexMatch": {"pattern": prefix, "substitution": "/"}}}
        assert drop == {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["x-modelplane-model"]}}


def test_the_model_router_knows_every_name_and_the_api_answers_in_its_own_shape():
    _, manifests = front_door(stack_config("demo"))
    policy = by_kind(manifests.objects, "EnvoyExtensionPolicy")["model-router"]
    assert policy["spec"]["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                             "name": "modelplane"}]
    script = policy["spec"]["lua"][0]["inline"]
    assert '["ml-team/mock"] = "ml-team/mock"' in script and '["mock"] = "ml-team/mock"' in script
    filters = by_kind(manifests.objects, "HTTPRouteFilter")
    listing = json.loads(filters["models-list"]["spec"]["directResponse"]["body"]["inline"])
    assert [m["id"] for m in listing["data"]] == ["ml-team/mock", "mock"] and listing["object"] == "list"
    not_found = filters["unknown-model"]["spec"]["directResponse"]
    assert not_found["statusCode"] == 404
    assert json.loads(not_found["body"]["inline"])["error"]["code"] == "model_not_found"
    anthropic = json.loads(filters["unknown-model-messages"]["spec"]["directResponse"]["body"]["inline"])
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "not_found_error"
    [client] = by_kind(manifests.objects, "ClientTrafficPolicy").values()
    # Prompts bigger than Envoy's 32 KiB default, up to the request-body limit (4Mi unless configured).
    assert client["spec"]["connection"] == {"bufferLimit": str(4 * 1024 * 1024)}
    # A client's own router header is dropped before routing (finding 3).
    assert client["spec"]["headers"] == {"earlyRequestHeaders": {"remove": ["x-modelplane-model"]}}


# --- replicas, hops and the fallback tier -----------------------------------------------------------------

def test_a_replica_is_reached_through_its_clusters_gateway_by_its_own_host_name():
    fleet, manifests = front_door(stack_config("demo"))
    backends = by_kind(manifests.objects, "Backend")
    for replica in schedule(fleet).replicas():
        [endpoint] = backends[replica.name]["spec"]["endpoints"]
        assert endpoint == {"fqdn": {"hostname": f"{envoy_routes.gateway_alias(replica.cluster)}.modelplane-system.svc."
                                                 "cluster.local", "port": 80},
                            "hostname": f"{replica.name}.ml-team.replica.modelplane.internal"}
        assert "fallback" not in backends[replica.name]["spec"]


@pytest.mark.parametrize("address, kind, family, endpoints", [
    ("172.18.255.200", "headless", "IPv4", [{"addresses": ["172.18.255.200"], "conditions": {"ready": True}}]),
    ("fd00::10", "headless", "IPv6", [{"addresses": ["fd00::10"], "conditions": {"ready": True}}]),
    ("a1b2-123.elb.us-east-1.amazonaws.com", "ExternalName", "IPv4", []),
    (None, "ExternalName", "IPv4", []),  # offline: the address placeholder, a host name
])
def test_a_workload_gateway_gets_a_dns_name_on_the_front_door(address, kind, family, endpoints):
    service, endpoint_slice = envoy.gateway_alias_objects("gpu-eu-west", address, 80)
    if kind == "headless":
        assert service["spec"] == {"clusterIP": "None", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
    else:
        assert service["spec"]["type"] == "ExternalName"
        assert service["spec"]["externalName"] == (address or "inference-gateway.gpu-eu-west.invalid")
    assert (endpoint_slice["addressType"], endpoint_slice["endpoints"]) == (family, endpoints)
    assert endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"] == service["metadata"]["name"]
    assert_valid([service, endpoint_slice])


def test_a_fallback_endpoint_is_a_fallback_backend_behind_its_own_hop():
    fleet, manifests = front_door(with_saas(rewritePath="/openai/", auth={"token": TOKEN}, model="gpt-4o-mini"))
    assert TOKEN not in json.dumps(manifests.objects)
    backends = by_kind(manifests.objects, "Backend")
    route = by_kind(manifests.objects, "HTTPRoute")["mock"]
    refs = {ref["name"] for ref in route["spec"]["rules"][0]["backendRefs"]}
    fallback = child_name("saas", "fallback")
    assert fallback in refs and "saas" not in backends  # the endpoint serves this service as a fallback only
    assert backends[fallback]["spec"] == {"fallback": True, "endpoints": [{
        "fqdn": {"hostname": "modelplane-hop.envoy-gateway-system.svc.cluster.local", "port": 80},
        "hostname": "saas.ml-team.endpoint.modelplane.internal"}]}
    assert all("fallback" not in backends[r]["spec"] for r in refs - {fallback})
    upstream = backends[child_name("saas", "upstream")]["spec"]
    assert upstream == {"endpoints": [{"fqdn": {"hostname": "api.example.com", "port": 443},
                                       "hostname": "api.example.com"}],
                        "tls": {"wellKnownCACertificates": "System", "sni": "api.example.com"}}
    hop = by_kind(manifests.objects, "HTTPRoute")[child_name("saas", "hop")]
    assert hop["spec"]["parentRefs"] == [{"name": "modelplane-hop", "namespace": "modelplane-system"}]
    assert hop["spec"]["hostnames"] == ["saas.ml-team.endpoint.modelplane.internal"]
    health, traffic = hop["spec"]["rules"]
    # The front door's probe is answered by the hop: the provider is not polled with the key (finding 10).
    healthy = by_kind(manifests.objects, "HTTPRouteFilter")[health["filters"][0]["extensionRef"]["name"]]
    assert healthy["spec"]["directResponse"]["statusCode"] == 200 and "backendRefs" not in health
    # Only the model paths reach the provider (finding 1: no files, fine-tuning or images on the fleet's key).
    assert traffic["matches"] == [{"path": {"type": "Exact", "value": p}, "method": "POST"} for p in MODEL_PATHS]
    host, base, drop, inject = traffic["filters"]
    assert host["urlRewrite"] == {"hostname": "api.example.com"}
    base_filter = by_kind(manifests.objects, "HTTPRouteFilter")[base["extensionRef"]["name"]]
    assert base_filter["spec"]["urlRewrite"] == {"path": {"type": "ReplaceRegexMatch", "replaceRegexMatch": {
        "pattern": "^/", "substitution": "/openai/"}}}
    # A client's own account headers never reach the provider beside the fleet's key (finding 10).
    assert drop == {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": [
        "x-api-key", "api-key", "proxy-authorization", "cookie", "openai-organization", "openai-project",
        "anthropic-organization"]}}
    auth = child_name("saas", "auth")
    assert inject == {"type": "ExtensionRef", "extensionRef": {"group": "gateway.envoyproxy.io",
                                                               "kind": "HTTPRouteFilter", "name": auth}}
    secret = by_kind(manifests.objects, "Secret")[auth]
    assert secret["stringData"] == {"credential": "Bearer <secret: modelplane:modelEndpoints.ml-team.saas.auth.token>"}
    injection = by_kind(manifests.objects, "HTTPRouteFilter")[auth]["spec"]["credentialInjection"]
    assert injection == {"header": "Authorization", "overwrite": True, "credential": {"valueRef": {"name": auth}}}
    # The hop checks, without the key and seldom, that the provider answers at all.
    policy = by_kind(manifests.objects, "BackendTrafficPolicy")[child_name("saas", "hop")]
    assert policy["spec"]["healthCheck"] == {"active": {
        "type": "HTTP", "interval": "30s", "timeout": "5s", "unhealthyThreshold": 2, "healthyThreshold": 1,
        "http": {"path": "/openai/v1/models", "expectedStatuses": [200, 401, 403]}}}
    assert "retry" not in policy["spec"]  # a provider is never sent a request twice
    hop_router = by_kind(manifests.objects, "EnvoyExtensionPolicy")["modelplane-hop"]
    assert hop_router["spec"]["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                 "name": "modelplane-hop"}]
    assert '["saas.ml-team.endpoint.modelplane.internal"] = "gpt-4o-mini"' in hop_router["spec"]["lua"][0]["inline"]
    assert_valid(manifests.objects)


def test_the_hop_is_never_on_the_public_listener():
    """Finding 1: whatever Host a client sends to the public address, nothing there adds a credential."""
    _, manifests = front_door(with_saas(auth={"token": TOKEN}))
    gateways = by_kind(manifests.objects, "Gateway")
    assert set(gateways) == {"modelplane", "modelplane-hop"}
    # The hop's Envoy has a ClusterIP Service only: no load balancer, no node port.
    assert gateways["modelplane-hop"]["spec"]["infrastructure"] == {"parametersRef": {
        "group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "modelplane-hop"}}
    hop_proxy = by_kind(manifests.objects, "EnvoyProxy")["modelplane-hop"]
    assert hop_proxy["spec"]["provider"]["kubernetes"]["envoyService"] == {"name": "modelplane-hop", "type": "ClusterIP"}
    public_routes = [o for o in manifests.objects if o["kind"] == "HTTPRoute"
                     and {p["name"] for p in o["spec"]["parentRefs"]} & {"modelplane"}]
    hop_routes = [o for o in manifests.objects if o["kind"] == "HTTPRoute"
                  and {p["name"] for p in o["spec"]["parentRefs"]} == {"modelplane-hop"}]
    assert hop_routes and all(not r["spec"].get("hostnames") for r in public_routes)
    credential_filters = {o["metadata"]["name"] for o in manifests.objects
                          if o["kind"] == "HTTPRouteFilter" and "credentialInjection" in o["spec"]}
    used_publicly = {f["extensionRef"]["name"] for r in public_routes for rule in r["spec"]["rules"]
                     for f in rule.get("filters", []) if f["type"] == "ExtensionRef"}
    assert credential_filters and not credential_filters & used_publicly
    # Inside the cluster only the front door's own Envoy pods reach the hop's listener.
    policy = by_kind(manifests.objects, "NetworkPolicy")["modelplane-hop"]
    assert policy["metadata"]["namespace"] == "envoy-gateway-system"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"gateway.envoyproxy.io/owning-gateway-name": "modelplane-hop",
                                        "gateway.envoyproxy.io/owning-gateway-namespace": "modelplane-system"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {
                        "gateway.envoyproxy.io/owning-gateway-name": "modelplane",
                        "gateway.envoyproxy.io/owning-gateway-namespace": "modelplane-system"}}}],
                     "ports": [{"protocol": "TCP", "port": 10080}]},
                    {"ports": [{"protocol": "TCP", "port": 19003}]}]}
    assert_valid(manifests.objects)


def test_a_fleet_without_hand_made_endpoints_has_no_hop():
    _, manifests = front_door(stack_config("demo"))
    assert set(by_kind(manifests.objects, "Gateway")) == {"modelplane"}
    assert not by_kind(manifests.objects, "NetworkPolicy")


def test_without_a_credential_the_client_headers_pass_to_the_endpoint():
    """Another team's server the client holds its own key for: only the fleet's key makes headers dangerous."""
    _, manifests = front_door(with_saas())
    hop = by_kind(manifests.objects, "HTTPRoute")[child_name("saas", "hop")]
    assert [f["type"] for f in hop["spec"]["rules"][1]["filters"]] == ["URLRewrite"]


@pytest.mark.parametrize("fallback, factor, threshold", [
    (None, 1_000_000, 0.01),  # AllPrimariesDown: every request stays in the fleet while any primary is healthy
    ({"when": "AllPrimariesDown"}, 1_000_000, 0.01),
    ({"when": "BelowHealthy", "healthyPercent": 50}, 200, 50.0),
    ({"when": "BelowHealthy", "healthyPercent": 72}, 139, 71.94),  # Envoy's own default is 140 (71.43%)
    ({"when": "BelowHealthy", "healthyPercent": 100}, 100, 100.0),
])
def test_the_fallback_tier_takes_traffic_only_as_the_service_says(fallback, factor, threshold):
    """Finding 6: Envoy's fixed factor 1.4 spilled ~30% to the SaaS tier with one of two replicas down."""
    config = with_saas()
    if fallback is not None:
        config["modelServices"]["ml-team"]["mock"]["fallback"] = fallback
    _, manifests = front_door(config)
    [patch] = by_kind(manifests.objects, "EnvoyPatchPolicy").values()
    assert patch["metadata"] == {"name": "fallback.mock.ml-team", "namespace": "modelplane-system",
                                 "labels": {"app.kubernetes.io/managed-by": "modelplane"}}
    assert patch["spec"] == {
        "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "modelplane"},
        "type": "JSONPatch",
        "jsonPatches": [{"type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                         "name": "httproute/ml-team/mock/rule/0",
                         "operation": {"op": "add", "path": "/load_assignment/policy",
                                       "value": {"overprovisioning_factor": factor}}}]}
    assert round(envoy_policy.spill_threshold(factor), 2) == threshold
    assert_valid(manifests.objects)


def test_a_service_without_a_fallback_tier_gets_no_patch():
    _, manifests = front_door(with_saas(fallback=False))
    assert not by_kind(manifests.objects, "EnvoyPatchPolicy")


@pytest.mark.parametrize("healthy, total, factor, primary_share", [
    (1, 2, 140, 70),  # Envoy's default: one of two replicas down sends 30% to the fallback tier
    (1, 2, 1_000_000, 100),
    (1, 1000, 1_000_000, 100),
    (0, 2, 1_000_000, 0),
    (1, 2, 200, 100),  # BelowHealthy 50: at 50% healthy, still all in the fleet
    (2, 5, 200, 80),
])
def test_envoys_priority_load_under_the_rendered_factors(healthy, total, factor, primary_share):
    """Envoy's rule (load_balancer_impl.cc): priority 0 takes min(100, factor x healthy / total) percent."""
    assert min(100, factor * healthy // total) == primary_share


def test_envoys_own_errors_and_unknown_paths_answer_in_json():
    """Finding 8: no plain-text `no healthy upstream`, no bare 404."""
    _, manifests = front_door(stack_config("demo"))
    overrides = envoy.local_error_overrides()
    assert [(o["match"], o["source"]) for o in overrides] == [
        ({"statusCodes": [{"type": "Value", "value": 413}]}, "Local"),
        ({"statusCodes": [{"type": "Value", "value": 503}]}, "Local")]
    for override in overrides:
        body = json.loads(override["response"]["body"]["inline"])
        # Both clients read it: OpenAI's `error.message/type/code`, Anthropic's `type: error` and `error.type`.
        assert body["type"] == "error" and {"type", "code", "message"} <= set(body["error"])
        assert override["response"]["contentType"] == "application/json"
    gateway_policy = by_kind(manifests.objects, "BackendTrafficPolicy")["front-door"]
    assert gateway_policy["spec"] == {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                      "name": "modelplane"}], "responseOverride": overrides}
    api = by_kind(manifests.objects, "HTTPRoute")["model-api"]
    catch_all = api["spec"]["rules"][-1]
    assert catch_all["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    unknown = by_kind(manifests.objects, "HTTPRouteFilter")[catch_all["filters"][0]["extensionRef"]["name"]]
    assert unknown["spec"]["directResponse"]["statusCode"] == 404
    assert json.loads(unknown["spec"]["directResponse"]["body"]["inline"])["error"]["code"] == "unknown_path"
    # /v1/responses (OpenAI's Responses API) is routed by model like the other model paths.
    assert "/v1/responses" in MODEL_PATHS
    assert {"path": {"type": "Exact", "value": "/v1/responses"}} in api["spec"]["rules"][1]["matches"]


@pytest.mark.parametrize("limit, expected", [(None, 4 * 1024 * 1024), ("512Ki", 524288), ("16Mi", 16777216),
                                             ("2000000", 2000000)])
def test_the_request_body_limit_is_configurable(limit, expected):
    """Finding 9: the limit bounds the buffer Envoy keeps per request, and the router answers 413 above it."""
    config = stack_config("demo")
    if limit is not None:
        config["inferenceGateway"]["envoyGateway"]["requestBodyLimit"] = limit
    _, manifests = front_door(config)
    [client] = by_kind(manifests.objects, "ClientTrafficPolicy").values()
    assert client["spec"]["connection"] == {"bufferLimit": str(expected)}
    script = by_kind(manifests.objects, "EnvoyExtensionPolicy")["model-router"]["spec"]["lua"][0]["inline"]
    assert f"local BODY_LIMIT = {expected}\n" in script
    assert_valid(manifests.objects)


@pytest.mark.parametrize("url, address, host", [
    ("http://10.0.0.7:8000/", {"ip": {"address": "10.0.0.7", "port": 8000}}, {"hostname": "10.0.0.7"}),
    ("http://[fd00::10]:8000/", {"ip": {"address": "fd00::10", "port": 8000}}, {}),
    ("https://LLM.Example.com:8443/", {"fqdn": {"hostname": "llm.example.com", "port": 8443},
                                       "hostname": "llm.example.com"},  # the Host of the hop's own check
     {"hostname": "llm.example.com"}),
])
def test_a_hand_made_endpoint_on_an_address_or_a_port_of_its_own(url, address, host):
    _, manifests = front_door(with_saas(url=url))
    upstream = by_kind(manifests.objects, "Backend")[child_name("saas", "upstream")]["spec"]
    assert upstream["endpoints"] == [address]
    assert ("tls" in upstream) == url.startswith("https")
    hop = by_kind(manifests.objects, "HTTPRoute")[child_name("saas", "hop")]
    assert [f.get("urlRewrite") for f in hop["spec"]["rules"][1].get("filters", [])] == ([host] if host else [])
    check = by_kind(manifests.objects, "BackendTrafficPolicy")[child_name("saas", "hop")]["spec"]["healthCheck"]
    assert check["active"]["http"]["path"] == "/v1/models"
    assert_valid(manifests.objects)


def test_an_endpoint_primary_in_one_service_and_fallback_in_another_gets_a_backend_per_tier():
    config = with_saas()
    config["modelServices"]["ml-team"]["saas-first"] = {"endpoints": [{"selector": {"matchLabels": {"provider": "saas"}}}]}
    _, manifests = front_door(config)
    backends = by_kind(manifests.objects, "Backend")
    assert backends["saas"]["spec"].get("fallback") is None
    assert backends[child_name("saas", "fallback")]["spec"]["fallback"] is True
    routes = by_kind(manifests.objects, "HTTPRoute")
    assert [r["name"] for r in routes["saas-first"]["spec"]["rules"][0]["backendRefs"]] == ["saas"]


def test_a_front_door_that_runs_envoy_gateway_already_installs_none():
    config = stack_config("demo")
    gateway = config["inferenceGateway"]
    gateway["cluster"] = {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}
    gateway["envoyGateway"] = {}
    gateway["preinstalled"] = ["envoyGateway"]
    fleet = load_fleet(config, origin="pulumi")
    stack = fd.front_door_stack(fleet)
    assert stack.releases == [] and stack.remote_manifests == []
    assert all(fd.waits_for(stack, o) == () for o in stack.objects)


# --- config ---------------------------------------------------------------------------------------------

def errors_of(config: dict) -> list[tuple[str, str]]:
    try:
        load_fleet(copy.deepcopy(config), origin="pulumi")
    except ConfigError as error:
        return [(str(issue).split(": ", 1)[0], issue.message) for issue in error.issues]
    return []


def _twice_aliased() -> dict:
    config = with_saas()
    config["modelServices"]["ml-team"]["other"] = {"alias": "mock", "endpoints": [{"selector": {"matchLabels": MOCK}}]}
    return config


def _fallback_on_traefik() -> dict:
    config = with_saas()
    config["inferenceGateway"] = {**GATEWAY, "backend": "Traefik", "traefik": {"version": "40.2.0"}}
    del config["inferenceGateway"]["envoyGateway"]
    return config


def _with_service_fallback(config: dict, fallback: dict, plain_entries: bool = False) -> dict:
    config["modelServices"]["ml-team"]["mock"]["fallback"] = fallback
    if plain_entries:  # only the service-level setting is wrong
        for entry in config["modelServices"]["ml-team"]["mock"]["endpoints"]:
            entry.pop("fallback", None)
    return config


BAD = {
    "an alias used twice": (_twice_aliased(), "modelplane:modelServices.ml-team.other.alias",
                            "'mock' is already the alias of ml-team/mock"),
    "an alias with a slash": ({**with_saas(), "modelServices": {"ml-team": {"mock": {
        "alias": "ml-team/x", "endpoints": [{"selector": {"matchLabels": MOCK}}]}}}},
        "modelplane:modelServices.ml-team.mock.alias", "no '/'"),
    "fallback on Traefik": (_fallback_on_traefik(), "modelplane:modelServices.ml-team.mock.endpoints[1].fallback",
                            "needs the front door on Envoy Gateway"),
    "a traefik block on Envoy Gateway": ({**with_saas(), "inferenceGateway": {**GATEWAY, "backend": "EnvoyGateway",
                                                                            "traefik": {"version": "40.2.0"}}},
                                         "modelplane:inferenceGateway.traefik", "only valid with backend: Traefik"),
    "an envoyGateway block on Traefik": ({**with_saas(False), "inferenceGateway": {
        **GATEWAY, "backend": "Traefik", "traefik": {"version": "40.2.0"}}},
        "modelplane:inferenceGateway.envoyGateway", "only valid with backend: EnvoyGateway"),
    "Traefik without its block": ({**with_saas(False), "inferenceGateway": {
        "clusterName": "control", "cluster": {"source": "Kind"}, "backend": "Traefik"}},
        "modelplane:inferenceGateway.traefik", "backend Traefik needs the 'traefik' block"),
    "a provider model name with a quote": (with_saas(model='gpt"4'), "modelplane:modelEndpoints.ml-team.saas.model",
                                           "is not a model name"),
    "fallback.when on Traefik": (_with_service_fallback(_fallback_on_traefik(), {"when": "AllPrimariesDown"},
                                                        plain_entries=True),
                                 "modelplane:modelServices.ml-team.mock.fallback", "needs the front door on Envoy Gateway"),
    "BelowHealthy without a percentage": (_with_service_fallback(with_saas(), {"when": "BelowHealthy"}),
                                          "modelplane:modelServices.ml-team.mock.fallback.healthyPercent",
                                          "is required with when: BelowHealthy"),
    "a percentage with AllPrimariesDown": (_with_service_fallback(with_saas(), {"healthyPercent": 50}),
                                           "modelplane:modelServices.ml-team.mock.fallback.healthyPercent",
                                           "only applies with when: BelowHealthy"),
    "a percentage of 0": (_with_service_fallback(with_saas(), {"when": "BelowHealthy", "healthyPercent": 0}),
                          "modelplane:modelServices.ml-team.mock.fallback.healthyPercent", "must be at least 1"),
    "an unknown fallback mode": (_with_service_fallback(with_saas(), {"when": "Sometimes"}),
                                 "modelplane:modelServices.ml-team.mock.fallback.when", "AllPrimariesDown"),
    "a body limit that is no size": ({**with_saas(), "inferenceGateway": {**GATEWAY, "envoyGateway": {
        **GATEWAY["envoyGateway"], "requestBodyLimit": "4MB"}}},
        "modelplane:inferenceGateway.envoyGateway.requestBodyLimit", "is not a size"),
    "a body limit too small for a prompt": ({**with_saas(), "inferenceGateway": {**GATEWAY, "envoyGateway": {
        **GATEWAY["envoyGateway"], "requestBodyLimit": "512"}}},
        "modelplane:inferenceGateway.envoyGateway.requestBodyLimit", "outside 1Ki..64Mi"),
    "preinstalled gatewayApi on Envoy Gateway": ({**with_saas(), "inferenceGateway": {
        **GATEWAY, "cluster": {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}},
        "envoyGateway": {}, "preinstalled": ["gatewayApi"]}},
        "modelplane:inferenceGateway.preinstalled[0]", "unknown component 'gatewayApi' for a front door on EnvoyGateway"),
}


@pytest.mark.parametrize("config, path, message", BAD.values(), ids=BAD.keys())
def test_config_mistakes_name_the_path_and_the_fix(config, path, message):
    found = errors_of(config)
    assert len(found) == 1, found
    assert found[0][0] == path and message in found[0][1], found


def warnings_of(config: dict) -> list[tuple[str, str]]:
    from modelplane.api.references import check_references

    _, warnings = check_references(load_fleet(copy.deepcopy(config), origin="pulumi"))
    return [(str(w).split(": ", 1)[0], w.message) for w in warnings]


def test_a_credential_on_a_traefik_front_door_is_called_readable():
    """Finding 10: Traefik cannot take a header value from a Secret, so the key sits in a Middleware's spec."""
    config = _fallback_on_traefik()
    config["modelServices"]["ml-team"]["mock"]["endpoints"][1].pop("fallback")
    config["modelEndpoints"]["ml-team"]["saas"]["auth"] = {"token": TOKEN}
    [(path, message)] = [w for w in warnings_of(config) if "Middleware" in w[1]]
    assert path == "modelplane:modelEndpoints.ml-team.saas.auth"
    assert "anyone who can read Middlewares in namespace 'ml-team'" in message and "EnvoyGateway" in message
    config["inferenceGateway"] = copy.deepcopy(GATEWAY)  # Envoy Gateway: the key is in a Secret, nothing to say
    assert not [w for w in warnings_of(config) if "Middleware" in w[1]]


def test_a_fallback_setting_without_a_fallback_endpoint_is_called_useless():
    config = _with_service_fallback(with_saas(fallback=False), {"when": "AllPrimariesDown"})
    assert warnings_of(config) == [("modelplane:modelServices.ml-team.mock.fallback",
                                    "has no effect: none of the service's endpoints is `fallback: true`")]


def test_a_reference_config_with_a_traefik_block_keeps_traefik():
    config = fleet_config(inferenceGateway={"clusterName": "control", "cluster": {"source": "Kind"},
                                            "traefik": {"version": "40.2.0"}})
    assert load_fleet(config).inference_gateway.proxy == "Traefik"
    config["inferenceGateway"] = {"clusterName": "control", "cluster": {"source": "Kind"}}
    assert load_fleet(config).inference_gateway.proxy == "EnvoyGateway"


@pytest.mark.parametrize("stack, sent, served", [
    ("cloud", "ml-team/chat", "qwen3-8b"), ("cloud", "qwen3-8b", "qwen3-8b"),
    ("cloud", "ml-team/llama", "meta-llama/Llama-3.3-70B-Instruct"),
    ("demo", "ml-team/mock", "mock"), ("demo", "mock", "mock"),
])
def test_every_routed_name_reaches_its_engines_under_the_name_they_answer(stack, sent, served):
    """Finding 4: `ml-team/chat` went to replicas started with --served-model-name=qwen3-8b (vLLM answers 404)."""
    from envoy_lua import FakeHandle, on_request as _on_request

    _, manifests = front_door(stack_config(stack))
    script = by_kind(manifests.objects, "EnvoyExtensionPolicy")["model-router"]["spec"]["lua"][0]["inline"]
    handle = FakeHandle("/v1/chat/completions", body=json.dumps({"model": sent, "messages": []}).encode())
    _on_request(script)(handle)
    assert handle.route_cleared and json.loads(handle.buffer.data)["model"] == served
