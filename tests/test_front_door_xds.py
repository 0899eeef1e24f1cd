"""The front door's Envoy config checker (tests/e2e/front_door_xds.py): on small canned translations, then on egctl's own.

The canned part needs nothing: each case breaks one promise of a good translation (a few dicts in
egctl's shape) and names the words that must come back. The egctl part runs Envoy Gateway's real
translator (scripts/e2e-tools.sh builds it) on objects shaped like the front door's and skips
without it.
"""
from __future__ import annotations

import base64
import copy
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import k8s_validation
from e2e.front_door_xds import (
    EGCTL_VERSION, ExpectedBackend, ServiceRule, TranslateError, Translation, expected_from, find_egctl,
    front_door_problems, translate,
)

EG = "gateway.envoyproxy.io/v1alpha1"
GW = "gateway.networking.k8s.io/v1"
NS, SYS = "ml-team", "modelplane-system"
CLUSTER = f"httproute/{NS}/svc/rule/0"
ROUTE = f"{CLUSTER}/match/0/*"
LUA = "envoy.filters.http.lua/0"


def meta(name: str, namespace: str | None = NS) -> dict:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def backend(name: str, host: str | None, *, fallback: bool = False, address: dict | None = None) -> dict:
    endpoint: dict[str, Any] = address or {"fqdn": {"hostname": f"gateway-{name}.{SYS}.svc.cluster.local", "port": 80}}
    if host:
        endpoint = {**endpoint, "hostname": host}
    return {"apiVersion": EG, "kind": "Backend", "metadata": meta(name),
            "spec": {"endpoints": [endpoint], **({"fallback": True} if fallback else {})}}


def ref(name: str, weight: int | None = 1, **extra: Any) -> dict:
    return {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name,
            **({"weight": weight} if weight is not None else {}), **extra}


def ext(name: str) -> dict:
    return {"type": "ExtensionRef", "extensionRef": {"group": "gateway.envoyproxy.io", "kind": "HTTPRouteFilter", "name": name}}


# Envoy Gateway validates the policy by running envoy_on_request against a stand-in handle (v1.8.1's
# internal/gatewayapi/luavalidator/mocks.lua), which has no clearRouteCache and answers every header
# with "example_value": so the call sits in a branch the stand-in never takes. Called unconditionally,
# the policy is Invalid and every route answers 500.
LUA_ROUTER = """function envoy_on_request(handle)
  if handle:headers():get(":path") == "/v1/chat/completions" then
    handle:headers():replace("x-modelplane-model", "ml-team/svc")
    handle:clearRouteCache()
  end
end
"""


def front_door(refs: list[dict] | None = None, backends: list[dict] | None = None, *, policy: bool = True) -> list[dict]:
    """Objects shaped like the front door's (modelplane/render/front_door_envoy.py), for one service `svc`."""
    refs = refs if refs is not None else [ref("r1", 3), ref("r2"), ref("saas-fallback")]
    backends = backends if backends is not None else [
        backend("r1", "r1.ml-team.replica.modelplane.internal"), backend("r2", "r2.ml-team.replica.modelplane.internal"),
        backend("saas-fallback", "saas.ml-team.endpoint.modelplane.internal", fallback=True)]
    gateway_ref = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "modelplane"}]
    parent = [{"name": "modelplane", "namespace": SYS}]
    objects = [
        {"apiVersion": GW, "kind": "GatewayClass", "metadata": meta("modelplane-front-door", None),
         "spec": {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}},
        {"apiVersion": GW, "kind": "Gateway", "metadata": meta("modelplane", SYS),
         "spec": {"gatewayClassName": "modelplane-front-door", "listeners": [
             {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}},
        {"apiVersion": EG, "kind": "ClientTrafficPolicy", "metadata": meta("front-door", SYS),
         "spec": {"targetRefs": gateway_ref, "connection": {"bufferLimit": "16Mi"}}},
        {"apiVersion": EG, "kind": "EnvoyExtensionPolicy", "metadata": meta("model-router", SYS),
         "spec": {"targetRefs": gateway_ref, "lua": [{"type": "Inline", "inline": LUA_ROUTER}]}},
        {"apiVersion": EG, "kind": "HTTPRouteFilter", "metadata": meta("unknown-model", SYS),
         "spec": {"directResponse": {"statusCode": 404, "contentType": "application/json",
                                     "body": {"type": "Inline", "inline": '{"error": "no such model"}'}}}},
        {"apiVersion": GW, "kind": "HTTPRoute", "metadata": meta("model-api", SYS),
         "spec": {"parentRefs": parent, "rules": [
             {"matches": [{"path": {"type": "Exact", "value": "/v1/chat/completions"}}], "filters": [ext("unknown-model")]}]}},
        *backends,
        {"apiVersion": EG, "kind": "HTTPRouteFilter", "metadata": meta("svc-path"),
         "spec": {"urlRewrite": {"hostname": {"type": "Backend"}, "path": {
             "type": "ReplaceRegexMatch", "replaceRegexMatch": {"pattern": "^/ml-team/svc/", "substitution": "/"}}}}},
        {"apiVersion": GW, "kind": "HTTPRoute", "metadata": meta("svc"), "spec": {"parentRefs": parent, "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/ml-team/svc/"}},
                         {"path": {"type": "Exact", "value": "/v1/chat/completions"},
                          "headers": [{"type": "Exact", "name": "x-modelplane-model", "value": "ml-team/svc"}]}],
             "filters": [ext("svc-path"), {"type": "RequestHeaderModifier",
                                           "requestHeaderModifier": {"remove": ["x-modelplane-model"]}}],
             "backendRefs": refs}]}},
        # the fallback tier takes traffic only when no primary is healthy
        {"apiVersion": EG, "kind": "EnvoyPatchPolicy", "metadata": meta("fallback.svc.ml-team", SYS), "spec": {
            "targetRef": gateway_ref[0], "type": "JSONPatch", "jsonPatches": [{
                "type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": CLUSTER,
                "operation": {"op": "add", "path": "/load_assignment/policy", "value": {"overprovisioning_factor": 1000000}}}]}},
        # the hand-made endpoint's hop: an internal Gateway (ClusterIP), its host there, to the SaaS upstream with
        # the credential (not a service rule)
        {"apiVersion": EG, "kind": "EnvoyProxy", "metadata": meta("modelplane-hop", SYS),
         "spec": {"provider": {"type": "Kubernetes", "kubernetes": {"envoyService": {"name": "modelplane-hop",
                                                                                     "type": "ClusterIP"}}}}},
        {"apiVersion": GW, "kind": "Gateway", "metadata": meta("modelplane-hop", SYS),
         "spec": {"gatewayClassName": "modelplane-front-door",
                  "infrastructure": {"parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy",
                                                       "name": "modelplane-hop"}},
                  "listeners": [{"name": "http", "protocol": "HTTP", "port": 80,
                                 "allowedRoutes": {"namespaces": {"from": "All"}}}]}},
        {"apiVersion": EG, "kind": "EnvoyExtensionPolicy", "metadata": meta("modelplane-hop", SYS),
         "spec": {"targetRefs": [{**gateway_ref[0], "name": "modelplane-hop"}],
                  "lua": [{"type": "Inline", "inline": "function envoy_on_request(handle) end\n"}]}},
        {"apiVersion": EG, "kind": "Backend", "metadata": meta("saas-upstream"),
         "spec": {"endpoints": [{"fqdn": {"hostname": "api.example.com", "port": 443}}],
                  "tls": {"wellKnownCACertificates": "System", "sni": "api.example.com"}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta("saas-auth"), "type": "Opaque",
         "data": {"credential": "QmVhcmVyIHNrLXRlc3Q="}},
        {"apiVersion": EG, "kind": "HTTPRouteFilter", "metadata": meta("saas-auth"),
         "spec": {"credentialInjection": {"header": "Authorization", "overwrite": True,
                                          "credential": {"valueRef": {"name": "saas-auth"}}}}},
        {"apiVersion": GW, "kind": "HTTPRoute", "metadata": meta("saas-hop"), "spec": {
            "parentRefs": [{"name": "modelplane-hop", "namespace": SYS}],
            "hostnames": ["saas.ml-team.endpoint.modelplane.internal"], "rules": [
                {"matches": [{"path": {"type": "Exact", "value": "/v1/chat/completions"}, "method": "POST"}],
                 "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "api.example.com"}}, ext("saas-auth")],
                 "backendRefs": [ref("saas-upstream", None)]}]}},
    ]
    if policy:
        objects.append({"apiVersion": EG, "kind": "BackendTrafficPolicy", "metadata": meta("svc"), "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "svc"}],
            "healthCheck": {"panicThreshold": 0,
                            "active": {"type": "HTTP", "interval": "2s", "timeout": "1s", "unhealthyThreshold": 2,
                                       "healthyThreshold": 1, "http": {"path": "/health", "expectedStatuses": [200]}},
                            "passive": {"consecutiveLocalOriginFailures": 1, "consecutiveGatewayErrors": 3,
                                        "splitExternalLocalOriginErrors": True, "interval": "2s",
                                        "baseEjectionTime": "10s", "maxEjectionPercent": 100}},
            "retry": {"numRetries": 1, "retryOn": {"triggers": ["connect-failure", "refused-stream",
                                                                 "reset-before-request"]}}}})
    return objects


# --- canned translations: one service rule, three backends (r1 weight 3, r2, a fallback) ----------

BACKENDS = [("r1", 3, False), ("r2", 1, False), ("saas-fallback", 1, True)]
HOSTS = {"r1": "r1.ml-team.replica.modelplane.internal", "r2": "r2.ml-team.replica.modelplane.internal",
         "saas-fallback": "saas.ml-team.endpoint.modelplane.internal"}


def accepted(*kinds: str) -> list[dict]:
    return [{"type": k, "status": "True", "reason": k, "message": "fine"} for k in kinds]


def canned_input() -> list[dict]:
    """A one-rule service: the input of the canned translation below."""
    objects = [o for o in front_door() if o["kind"] != "HTTPRoute" or o["metadata"]["name"] == "svc"]
    objects = [o for o in objects if o["kind"] not in ("HTTPRouteFilter", "EnvoyPatchPolicy", "Secret")
               and o["metadata"]["name"] not in ("saas-upstream", "modelplane-hop")]
    svc = next(o for o in objects if o["kind"] == "HTTPRoute")
    svc["spec"]["rules"][0]["filters"] = []
    return objects


def canned_output() -> dict:
    """egctl's output for canned_input(), cut down to what the checker reads."""
    def status_obj(kind: str, name: str, namespace: str = NS, **status: Any) -> dict:
        return {"kind": kind, "metadata": {"name": name, "namespace": namespace}, "status": status}
    ancestors = [{"ancestorRef": {"name": "modelplane"}, "conditions": accepted("Accepted")}]
    localities = [{
        "lbEndpoints": [{"endpoint": {"address": {"socketAddress": {"address": f"gateway-{b}", "portValue": 80}},
                                      "healthCheckConfig": {"hostname": HOSTS[b]}, "hostname": HOSTS[b]},
                         "loadBalancingWeight": 1}],
        "loadBalancingWeight": w, "locality": {"region": f"{CLUSTER}/backend/{i}"},
        "metadata": {"filterMetadata": {"envoy-gateway": {"resources": [{"kind": "Backend", "name": b, "namespace": NS}]}}},
        **({"priority": 1} if fb else {})} for i, (b, w, fb) in enumerate(BACKENDS)]
    cluster = {"name": CLUSTER, "type": "STRICT_DNS", "commonLbConfig": {"healthyPanicThreshold": {}},
               "healthChecks": [{"httpHealthCheck": {"host": "*", "path": "/health"}, "interval": "2s"}],
               "outlierDetection": {"consecutive5xx": 5, "baseEjectionTime": "10s"},
               "loadAssignment": {"clusterName": CLUSTER, "endpoints": localities}}
    lua_code = {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute",
                "sourceCode": {"inlineString": "function envoy_on_request(handle) end"}}
    route = {"name": ROUTE, "match": {"pathSeparatedPrefix": "/ml-team/svc"},
             "route": {"cluster": CLUSTER, "autoHostRewrite": True, "retryPolicy": {
                 "numRetries": 1, "retryOn": "connect-failure,refused-stream,reset-before-request",
                 "retryHostPredicate": [{"name": "envoy.retry_host_predicates.previous_hosts"}]}},
             "typedPerFilterConfig": {LUA: lua_code}}
    listener = {"name": f"{SYS}/modelplane/http", "defaultFilterChain": {"filters": [{
        "name": "envoy.filters.network.http_connection_manager",
        "typedConfig": {"httpFilters": [{"name": LUA, "disabled": True}, {"name": "envoy.filters.http.router"}],
                        "rds": {"routeConfigName": f"{SYS}/modelplane/http"}}}]}}
    ready = {"name": "envoy-gateway-proxy-ready-0.0.0.0-19003", "filterChains": [{"filters": [{"typedConfig": {
        "httpFilters": [{"name": "envoy.filters.http.health_check"}], "routeConfig": {"name": "ready_route"}}}]}]}
    return {
        "httpRoutes": [status_obj("HTTPRoute", "svc", parents=[{"parentRef": {"name": "modelplane", "namespace": SYS},
                                                               "conditions": accepted("Accepted", "ResolvedRefs")}])],
        "backends": [status_obj("Backend", b, conditions=accepted("Accepted")) for b, _, _ in BACKENDS],
        "backendTrafficPolicies": [status_obj("BackendTrafficPolicy", "svc", ancestors=ancestors)],
        "envoyExtensionPolicies": [status_obj("EnvoyExtensionPolicy", "model-router", SYS, ancestors=ancestors)],
        "clientTrafficPolicies": [status_obj("ClientTrafficPolicy", "front-door", SYS, ancestors=ancestors)],
        "xds": {f"{SYS}/modelplane": {"configs": [
            {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump", "dynamicActiveClusters": [{"cluster": cluster}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump", "dynamicListeners": [
                {"activeState": {"listener": ready}}, {"activeState": {"listener": listener}}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump", "dynamicRouteConfigs": [{"routeConfig": {
                "name": f"{SYS}/modelplane/http", "virtualHosts": [{"name": "*", "domains": ["*"], "routes": [route]}]}}]},
        ]}},
    }


def problems_of(change: Callable[[dict], Any] = lambda out: None, objects: list[dict] | None = None) -> list[str]:
    out = canned_output()
    change(out)
    return front_door_problems(Translation(out), expected_from(objects or canned_input()))


def dumps(out: dict) -> list[dict]:
    return out["xds"][f"{SYS}/modelplane"]["configs"]


def the_cluster(out: dict) -> dict:
    return dumps(out)[0]["dynamicActiveClusters"][0]["cluster"]


def the_route(out: dict) -> dict:
    return dumps(out)[2]["dynamicRouteConfigs"][0]["routeConfig"]["virtualHosts"][0]["routes"][0]


def the_listener(out: dict) -> dict:
    return dumps(out)[1]["dynamicListeners"][1]["activeState"]["listener"]


def locality(out: dict, backend: str) -> dict:
    return next(e for e in the_cluster(out)["loadAssignment"]["endpoints"]
                if e["metadata"]["filterMetadata"]["envoy-gateway"]["resources"][0]["name"] == backend)


def split(out: dict) -> None:
    the_route(out)["route"].pop("cluster")
    the_route(out)["route"]["weightedClusters"] = {"clusters": [
        {"name": f"{CLUSTER}/backend/{i}", "weight": w} for i, (_, w, _) in enumerate(BACKENDS)]}


def condition(obj_key: str, name: str, kind: str, status: str, reason: str, message: str) -> Callable[[dict], None]:
    def change(out: dict) -> None:
        obj = next(o for o in out[obj_key] if o["metadata"]["name"] == name)
        holders = obj["status"].get("parents") or obj["status"].get("ancestors") or [obj["status"]]
        for c in holders[0]["conditions"]:
            if c["type"] == kind:
                c.update(status=status, reason=reason, message=message)
    return change


C = f"HTTPRoute {NS}/svc rule 0: Envoy cluster {CLUSTER}"
R = f"HTTPRoute {NS}/svc rule 0: Envoy route {ROUTE}"
CASES: list[tuple[str, Callable[[dict], Any], str]] = [
    ("split into a cluster per backend", split,
     f"HTTPRoute {NS}/svc rule 0: its 3 backends are split over 3 Envoy clusters ({CLUSTER}/backend/0, "),
    ("no health check", lambda o: the_cluster(o).pop("healthChecks"), f"{C}: no active HTTP health check on /health"),
    ("health check on another path", lambda o: the_cluster(o)["healthChecks"][0]["httpHealthCheck"].update(path="/"),
     f"{C}: no active HTTP health check on /health (it checks ['/'])"),
    ("health-check host of the gateway, not the replica",
     lambda o: locality(o, "r2")["lbEndpoints"][0]["endpoint"]["healthCheckConfig"].pop("hostname"),
     f"{C}: Backend {NS}/r2's endpoints are health-checked with Host [''], not their endpoint hostnames ['{HOSTS['r2']}']"),
    ("no outlier detection", lambda o: the_cluster(o).pop("outlierDetection"), f"{C}: no passive ejection of failing backends"),
    ("Envoy's default panic threshold", lambda o: the_cluster(o).pop("commonLbConfig"),
     f"{C}: healthy panic threshold is Envoy's default 50%, not 0"),
    ("a panic threshold of 10%", lambda o: the_cluster(o)["commonLbConfig"].update(healthyPanicThreshold={"value": 10}),
     f"{C}: healthy panic threshold is 10%, not 0"),
    ("fallback at priority 0", lambda o: locality(o, "saas-fallback").pop("priority"),
     f"{C}: Backend {NS}/saas-fallback is at priority 0; a fallback Backend, used only when all others are down, belongs at priority 1"),
    ("primary at priority 1", lambda o: locality(o, "r1").update(priority=1),
     f"{C}: Backend {NS}/r1 is at priority 1; a primary Backend belongs at priority 0"),
    ("weight lost", lambda o: locality(o, "r1").update(loadBalancingWeight=1), f"{C}: Backend {NS}/r1 has weight 1, the rule gives it 3"),
    ("a backend missing", lambda o: the_cluster(o)["loadAssignment"]["endpoints"].pop(1), f"{C}: lacks Backend {NS}/r2"),
    ("a backend twice", lambda o: the_cluster(o)["loadAssignment"]["endpoints"].append(copy.deepcopy(locality(o, "r2"))),
     f"{C}: Backend {NS}/r2 is in 2 localities, not one"),
    ("no Host rewrite", lambda o: the_route(o)["route"].pop("autoHostRewrite"),
     f"{R} does not set Host to the backend's endpoint hostname (autoHostRewrite is not true)"),
    ("no retry policy", lambda o: the_route(o)["route"].pop("retryPolicy"), f"{R} has no retry policy"),
    ("two retries", lambda o: the_route(o)["route"]["retryPolicy"].update(numRetries=2), f"{R} retries 2 times, not once"),
    ("retry on the same host", lambda o: the_route(o)["route"]["retryPolicy"].pop("retryHostPredicate"),
     f"{R} may retry on the backend that just failed (no envoy.retry_host_predicates.previous_hosts retry predicate)"),
    ("no retry before the request was sent", lambda o: the_route(o)["route"]["retryPolicy"].update(retryOn="connect-failure"),
     f"{R} does not retry on reset-before-request (retryOn: connect-failure)"),
    ("a retry after the request reached a backend",
     lambda o: the_route(o)["route"]["retryPolicy"].update(retryOn="connect-failure,reset-before-request,reset,5xx"),
     f"{R} retries on reset, 5xx, after the request reached a backend: a generation would run (and be billed) twice"),
    ("answered by Envoy", lambda o: (the_route(o).pop("route"), the_route(o).update(directResponse={"status": 500})),
     f"HTTPRoute {NS}/svc rule 0: Envoy answers it itself with HTTP 500 instead of forwarding"),
    ("rule not translated", lambda o: the_route(o).update(name="httproute/other/x/rule/0/match/0/*"),
     f"HTTPRoute {NS}/svc rule 0: no Envoy route (the rule is not translated)"),
    ("route not resolved", condition("httpRoutes", "svc", "ResolvedRefs", "False", "BackendNotFound", "Backend ml-team/r3\nnot found"),
     f"HTTPRoute {NS}/svc on Gateway {SYS}/modelplane: ResolvedRefs is False (BackendNotFound: Backend ml-team/r3 not found)"),
    ("route not accepted", condition("httpRoutes", "svc", "Accepted", "False", "NotAllowedByListeners", "no listener"),
     f"HTTPRoute {NS}/svc on Gateway {SYS}/modelplane: Accepted is False (NotAllowedByListeners: no listener)"),
    ("route attached nowhere", lambda o: o["httpRoutes"][0]["status"].update(parents=[]), f"HTTPRoute {NS}/svc: attached to no Gateway"),
    ("Backend refused", condition("backends", "r2", "Accepted", "False", "Invalid", "bad address"),
     f"Backend {NS}/r2: Accepted is False (Invalid: bad address)"),
    ("Backend not processed", lambda o: o["backends"].pop(0), f"Backend {NS}/r1: not in egctl's output"),
    ("policy refused", condition("backendTrafficPolicies", "svc", "Accepted", "False", "Invalid", "bad retry"),
     f"BackendTrafficPolicy {NS}/svc: Accepted is False (Invalid: bad retry)"),
    ("policy targets nothing", lambda o: o["clientTrafficPolicies"][0]["status"].update(ancestors=[]),
     f"ClientTrafficPolicy {SYS}/front-door: applies to nothing"),
    ("policy without Accepted", lambda o: o["envoyExtensionPolicies"][0]["status"]["ancestors"][0].update(conditions=[]),
     f"EnvoyExtensionPolicy {SYS}/model-router: no Accepted condition"),
    ("no Lua filter", lambda o: the_listener(o)["defaultFilterChain"]["filters"][0]["typedConfig"]["httpFilters"].pop(0),
     f"listener {SYS}/modelplane/http: the model router (Lua filter) is not among its HTTP filters"),
    ("Lua off on a route", lambda o: the_route(o).pop("typedPerFilterConfig"),
     f"listener {SYS}/modelplane/http: the model router (Lua) is off on route {ROUTE}"),
    ("Lua disabled per route", lambda o: the_route(o)["typedPerFilterConfig"].update({LUA: {"disabled": True}}),
     f"listener {SYS}/modelplane/http: the model router (Lua) is off on route {ROUTE}"),
]


def test_a_good_translation_has_no_problems() -> None:
    assert problems_of() == []


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in CASES], ids=[i for i, _, _ in CASES])
def test_each_broken_promise_is_reported(change: Callable[[dict], Any], expected: str) -> None:
    problems = problems_of(change)
    assert any(p.startswith(expected) for p in problems), "\n".join(problems) or "no problem reported"


def test_a_credential_on_a_public_gateway_is_reported() -> None:
    """Finding 1: whoever reaches the public listener must not be able to spend a credential."""
    def inject(out: dict) -> None:
        the_route(out)["typedPerFilterConfig"]["envoy.filters.http.credential_injector/ml-team/saas-auth"] = {}
    problems = problems_of(inject)
    assert [p for p in problems if "adds a credential" in p] == [
        f"Gateway {SYS}/modelplane: route {ROUTE} (virtual host *) adds a credential on a Gateway that is not internal: "
        "anyone reaching it spends that credential"]


def test_a_service_split_over_two_rules_is_reported() -> None:
    """Finding 7: two rules are two Envoy clusters, each with its own health and ejection state."""
    objects = canned_input()
    svc = next(o for o in objects if o["kind"] == "HTTPRoute")
    svc["spec"]["rules"].append(copy.deepcopy(svc["spec"]["rules"][0]))
    assert f"HTTPRoute {NS}/svc: 2 rules over the service's backends (rules [0, 1])" in "\n".join(problems_of(objects=objects))


def test_the_fallback_tiers_overprovisioning_factor_is_checked() -> None:
    """Finding 6: with Envoy's default factor (140) the fallback tier took ~30% with one of two replicas down."""
    objects = canned_input() + [o for o in front_door() if o["kind"] == "EnvoyPatchPolicy"]
    [problem] = [p for p in problems_of(objects=objects) if "overprovisioning" in p]
    assert problem == (f"{C}: overprovisioning factor is 140, not the 1000000 its EnvoyPatchPolicy sets: the fallback "
                       "tier takes traffic below 71.43% healthy primaries, not 0.01%")
    patched = problems_of(lambda o: the_cluster(o)["loadAssignment"].update(policy={"overprovisioningFactor": 1000000}),
                          objects)
    assert not [p for p in patched if "overprovisioning" in p]


def test_lua_enabled_by_the_listener_needs_no_per_route_config() -> None:
    def on_everywhere(out: dict) -> None:
        the_listener(out)["defaultFilterChain"]["filters"][0]["typedConfig"]["httpFilters"][0].pop("disabled")
        the_route(out).pop("typedPerFilterConfig")
    assert problems_of(on_everywhere) == []


def test_without_a_lua_policy_lua_is_not_required() -> None:
    objects = [o for o in canned_input() if o["kind"] != "EnvoyExtensionPolicy"]
    assert problems_of(lambda o: (o.pop("envoyExtensionPolicies"), the_route(o).pop("typedPerFilterConfig")), objects) == []


def test_snake_case_field_names_are_read_too() -> None:
    def snake(out: dict) -> None:
        cluster = the_cluster(out)
        cluster["outlier_detection"] = cluster.pop("outlierDetection")
        cluster["common_lb_config"] = {"healthy_panic_threshold": {}}
        del cluster["commonLbConfig"]
        the_route(out)["route"]["auto_host_rewrite"] = the_route(out)["route"].pop("autoHostRewrite")
    assert problems_of(snake) == []


def test_endpoints_of_an_eds_cluster_are_read_from_the_endpoints_dump() -> None:
    def eds(out: dict) -> None:
        assignment = the_cluster(out).pop("loadAssignment")
        the_cluster(out).update(type="EDS", edsClusterConfig={"serviceName": CLUSTER})
        dumps(out).append({"@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
                           "dynamicEndpointConfigs": [{"endpointConfig": assignment}]})
    assert problems_of(eds) == []
    assert any("lacks Backend" in p for p in problems_of(lambda o: (eds(o), dumps(o).pop())))


def test_expected_is_derived_from_the_objects() -> None:
    expected = expected_from(front_door())
    hosts = {"r1": "r1.ml-team.replica.modelplane.internal", "r2": "r2.ml-team.replica.modelplane.internal"}
    backends = (ExpectedBackend(f"{NS}/r1", 3, False, (hosts["r1"],)), ExpectedBackend(f"{NS}/r2", 1, False, (hosts["r2"],)),
                ExpectedBackend(f"{NS}/saas-fallback", 1, True, ("saas.ml-team.endpoint.modelplane.internal",)))
    # the service's one rule, with the factor its EnvoyPatchPolicy sets; not the hop route (its upstream has no
    # endpoint host name), not the direct answers
    assert expected.service_rules == (ServiceRule(f"{NS}/svc", 0, backends, overprovisioning=1_000_000),)
    assert str(expected.service_rules[0]) == f"HTTPRoute {NS}/svc rule 0"
    assert expected.routes == (f"{SYS}/model-api", f"{NS}/svc", f"{NS}/saas-hop")
    assert expected.backends == (f"{NS}/r1", f"{NS}/r2", f"{NS}/saas-fallback", f"{NS}/saas-upstream")
    assert expected.policies == (("BackendTrafficPolicy", f"{NS}/svc"), ("EnvoyExtensionPolicy", f"{SYS}/model-router"),
                                 ("EnvoyExtensionPolicy", f"{SYS}/modelplane-hop"), ("ClientTrafficPolicy", f"{SYS}/front-door"),
                                 ("EnvoyPatchPolicy", f"{SYS}/fallback.svc.ml-team"))
    assert expected.route_filters[f"{NS}/svc"] == (f"{NS}/svc-path",)
    assert expected.internal_gateways == (f"{SYS}/modelplane-hop",)
    assert expected.lua
    named = expected_from(front_door(), service_routes=[f"{NS}/saas-hop"])
    assert [(r.route, r.rule, [b.backend for b in r.backends]) for r in named.service_rules] == [
        (f"{NS}/saas-hop", 0, [f"{NS}/saas-upstream"])]


def fake_egctl(tmp_path: Path, output: dict, exit_code: int = 0) -> Path:
    """A stand-in egctl that saves its input file and arguments and prints ``output``."""
    script = tmp_path / "egctl"
    (tmp_path / "output.yaml").write_text(yaml.safe_dump(output))
    script.write_text(f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
open({str(tmp_path / 'args')!r}, "w").write(" ".join(args))
shutil.copyfile(args[args.index("-f") + 1], {str(tmp_path / 'input.yaml')!r})
sys.stdout.write(open({str(tmp_path / 'output.yaml')!r}).read())
sys.stderr.write("boom" if {exit_code} else "")
sys.exit({exit_code})
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_translate_feeds_egctl_the_kinds_it_reads(tmp_path: Path) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("x")}
    objects = [o for o in front_door() if o["kind"] != "GatewayClass"] + [deployment]
    translation = translate(objects, fake_egctl(tmp_path, canned_output()))
    assert (tmp_path / "args").read_text().startswith("x translate --from gateway-api --to gateway-api,xds -t all -o yaml -f ")
    fed = list(yaml.safe_load_all((tmp_path / "input.yaml").read_text()))
    assert fed[0] == {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                      "metadata": {"name": "modelplane-front-door"},
                      "spec": {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}}
    assert fed[1:] == objects[:-1]
    assert translation.ignored == [f"Deployment {NS}/x"] and translation.added == ["GatewayClass modelplane-front-door"]
    assert list(translation.clusters()) == [CLUSTER]
    with pytest.raises(TranslateError, match=r"exit 3\): boom"):
        translate(objects, fake_egctl(tmp_path, {}, exit_code=3))


def test_the_samples_are_valid_custom_resources() -> None:
    k8s_validation.assert_valid(front_door())


# --- Envoy Gateway's own translator ----------------------------------------------------------------

def needs_egctl() -> Path:
    """The egctl of scripts/e2e-tools.sh, else skip (one call site: `pytest -rs` folds the skips into one line)."""
    found = find_egctl()
    if found is None:
        pytest.skip(f"needs egctl {EGCTL_VERSION} (Envoy Gateway's translator) in $MODELPLANE_E2E_CACHE/bin or "
                    "~/.cache/modelplane/e2e/bin: scripts/e2e-tools.sh builds it")
    return found


def test_envoy_gateway_translates_the_front_door_as_promised() -> None:
    egctl = needs_egctl()
    objects = front_door()
    translation = translate(objects, egctl)
    assert translation.ignored == [] and translation.added == []
    assert front_door_problems(translation, expected_from(objects)) == []
    # and the translation really is what the checker says: one cluster, the fallback at priority 1
    cluster = translation.clusters()[CLUSTER]
    localities = {e["metadata"]["filterMetadata"]["envoy-gateway"]["resources"][0]["name"]: e
                  for e in cluster["loadAssignment"]["endpoints"]}
    assert {n: (e["loadBalancingWeight"], e.get("priority", 0)) for n, e in localities.items()} == {
        "r1": (3, 0), "r2": (1, 0), "saas-fallback": (1, 1)}


def test_a_backend_ref_with_its_own_filter_splits_the_service() -> None:
    egctl = needs_egctl()
    refs = [ref("r1", 3, filters=[{"type": "URLRewrite", "urlRewrite": {"hostname": "r1.example"}}]), ref("r2"), ref("saas-fallback")]
    objects = front_door(refs)
    problems = front_door_problems(translate(objects, egctl), expected_from(objects))
    assert any(p.startswith(f"HTTPRoute {NS}/svc rule 0: its 3 backends are split over 3 Envoy clusters") for p in problems), problems


def test_ip_and_fqdn_backends_together_split_the_service() -> None:
    egctl = needs_egctl()
    backends = [backend("r1", "r1.ml-team.replica.modelplane.internal"),
                backend("r2", "r2.ml-team.replica.modelplane.internal", address={"ip": {"address": "10.1.2.3", "port": 80}}),
                backend("saas-fallback", "saas.ml-team.endpoint.modelplane.internal", fallback=True)]
    objects = front_door(backends=backends)
    problems = front_door_problems(translate(objects, egctl), expected_from(objects))
    assert any(p.startswith(f"HTTPRoute {NS}/svc rule 0: its 3 backends are split over 3 Envoy clusters") for p in problems), problems


def test_without_the_traffic_policy_health_and_retries_are_missing() -> None:
    egctl = needs_egctl()
    objects = front_door(policy=False)
    problems = front_door_problems(translate(objects, egctl), expected_from(objects))
    for words in ("no active HTTP health check on /health", "no passive ejection", "Envoy's default 50%", "has no retry policy"):
        assert any(f"HTTPRoute {NS}/svc rule 0: " in p and words in p for p in problems), (words, problems)


def test_a_missing_backend_or_filter_is_reported_through_the_route() -> None:
    egctl = needs_egctl()
    objects = front_door([ref("r1", 3), ref("r2"), ref("saas-fallback"), ref("r3")])
    next(o for o in objects if o["metadata"]["name"] == "svc" and o["kind"] == "HTTPRoute")["spec"]["rules"][0]["filters"] += [ext("gone")]
    problems = front_door_problems(translate(objects, egctl), expected_from(objects))
    assert any(p.startswith(f"HTTPRoute {NS}/svc (with HTTPRouteFilter {NS}/svc-path, {NS}/gone) on Gateway {SYS}/modelplane: "
                            "ResolvedRefs is False") and f"Backend {NS}/r3 not found" in p for p in problems), problems
    assert any(p.startswith(f"HTTPRoute {NS}/svc rule 0: Envoy answers it itself with HTTP 500") for p in problems), problems


# --- the front door as modelplane renders it, through Envoy Gateway's translator ---------------------

def rendered_front_door(stack: str, token: str | None = None) -> list[dict]:
    """The front-door cluster's objects for a shipped stack, with gateway addresses as `pulumi up` would know them
    (and with `token`, the cloud stack's SaaS endpoint given it, as `pulumi config set --secret` does)."""
    from modelplane.api import load_fleet
    from modelplane.api.stackfile import read_stack_file
    from modelplane.render.front_door import front_door_parts
    from modelplane.scheduling import schedule

    config = read_stack_file(Path(__file__).resolve().parent.parent / "stacks" / f"Pulumi.{stack}.yaml").config
    if token is not None:
        config["modelEndpoints"]["ml-team"]["together"]["auth"] = {"token": token}
    fleet = load_fleet(config)
    addresses = {name: f"172.18.255.{200 + i}" for i, name in enumerate(sorted(fleet.inference_clusters))}
    objects = front_door_parts(fleet, schedule(fleet), addresses).manifests().objects
    for obj in objects:  # egctl reads a Secret's `data` only; the value is the render's placeholder
        if obj["kind"] == "Secret" and "stringData" in obj:
            obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in obj.pop("stringData").items()}
    return objects


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_envoy_gateway_translates_the_rendered_front_door_as_promised(stack: str) -> None:
    egctl = needs_egctl()
    objects = rendered_front_door(stack)
    translation = translate(objects, egctl)
    expected = expected_from(objects)
    assert front_door_problems(translation, expected) == []
    # one Envoy cluster per service, reached by both ways in, retried only before a request reached an engine
    services = {r.route for r in expected.service_rules}
    assert len(services) == len(expected.service_rules)
    for _, route in translation.gateway_routes(f"{SYS}/modelplane"):
        action = route.get("route") or {}
        if action.get("cluster", "").startswith("httproute/ml-team/"):
            assert action["retryPolicy"]["retryOn"] == "connect-failure,refused-stream,reset-before-request"


def test_the_hop_adds_the_credential_only_on_its_internal_gateway() -> None:
    """Finding 1, in Envoy's own config: a request with the hop's Host on the public listener meets no credential."""
    egctl = needs_egctl()
    translation = translate(rendered_front_door("cloud", token="sk-test"), egctl)
    assert set(translation.gateways()) == {f"{SYS}/modelplane", f"{SYS}/modelplane-hop"}
    public = [(vhost, route) for vhost, route in translation.gateway_routes(f"{SYS}/modelplane")]
    hop = [(vhost, route) for vhost, route in translation.gateway_routes(f"{SYS}/modelplane-hop")]
    assert public and hop
    credential = "envoy.filters.http.credential_injector"
    assert not [r["name"] for _, r in public if any(k.startswith(credential) for k in r.get("typedPerFilterConfig", {}))]
    assert all("endpoint.modelplane.internal" not in " ".join(v.get("domains", [])) for v, _ in public)
    injected = [r for v, r in hop if any(k.startswith(credential) for k in r.get("typedPerFilterConfig", {}))]
    assert injected and {v["domains"][0] for v, _ in hop if v.get("domains")} >= {
        "together.ml-team.endpoint.modelplane.internal"}


def test_the_fallback_tier_waits_for_every_primary_to_fail() -> None:
    """Finding 6, in Envoy's own config: the chat service's cluster has the factor that keeps SaaS traffic at 0%."""
    egctl = needs_egctl()
    clusters = translate(rendered_front_door("cloud"), egctl).clusters()
    policy = clusters["httproute/ml-team/chat/rule/0"]["loadAssignment"]["policy"]
    assert int(policy["overprovisioningFactor"]) == 1_000_000
