"""The front door as Envoy Gateway itself translates it: statuses and Envoy config, checked against its promises.

Envoy Gateway's translator runs offline: ``egctl x translate --from gateway-api --to gateway-api,xds``
prints the input resources with the status conditions a controller would write (Accepted,
ResolvedRefs, with messages) and the Envoy xDS config it would send (clusters, routes, listeners).
scripts/e2e-tools.sh builds egctl at the version the fleet installs (v1.8.1).

* ``find_egctl()``: the egctl that scripts/e2e-tools.sh built, if any.
* ``translate(objects, egctl) -> Translation``: writes the objects egctl reads as one multi-document
  YAML file (other kinds, such as Deployments, are left out and listed in ``Translation.ignored``;
  a GatewayClass that a Gateway names but the objects lack is added, with Envoy Gateway's
  controller), runs egctl, parses its output.
* ``expected_from(objects) -> Expected``: what the objects themselves promise; see ``Expected``.
* ``front_door_problems(translation, expected) -> list[str]``: every way the translation breaks a
  promise, in words; empty when all hold:

  - every HTTPRoute, Backend and policy (BackendTrafficPolicy, EnvoyExtensionPolicy,
    ClientTrafficPolicy) of the input is Accepted (and ResolvedRefs, where reported) True; an
    HTTPRouteFilter through the routes that use it (a broken filter makes its route's
    ResolvedRefs False, and egctl answers the rule with a 500);
  - per service rule (an HTTPRoute rule whose backends are replica or endpoint Backends, those
    with endpoint host names): exactly one Envoy cluster holds all its backends, one locality per
    Backend with the rule's weight, fallback Backends at priority 1 and the others at 0; the
    cluster has an active HTTP health check on /health whose Host for each endpoint is its
    Backend's endpoint hostname, passive ejection (outlier detection), and a healthy panic
    threshold of 0; every Envoy route of the rule forwards to that cluster with
    ``autoHostRewrite``, one retry, the ``previous_hosts`` retry predicate (another backend),
    and retryOn including connect-failure and reset-before-request but nothing that fires after a
    request reached a backend (reset, 5xx, gateway-error, ...: a generation would run twice);
  - a service's HTTPRoute has one rule over its backends (each rule is its own Envoy cluster, with its
    own health checks and ejection state);
  - where an EnvoyPatchPolicy sets a service rule's overprovisioning factor (when the fallback tier
    takes traffic), the cluster's load assignment has it;
  - a route that adds a credential (credential injection) is only on an internal Gateway (one whose
    EnvoyProxy gives it a ClusterIP Service), never on a Gateway the internet reaches;
  - with a Lua EnvoyExtensionPolicy (the model router): each Gateway listener has the Lua filter
    among its HTTP filters and it is enabled on every route of the listener.

Field names are read as egctl prints them (protobuf JSON, camelCase), and in snake_case as well.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

EG_GROUP = "gateway.envoyproxy.io"
GATEWAY_GROUP = "gateway.networking.k8s.io"
EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
HEALTH_PATH = "/health"
RETRY_ON = ("connect-failure", "reset-before-request")
# Triggers that fire after the request reached a backend: a retry would run (and bill) the generation twice.
NEVER_RETRY_ON = ("reset", "5xx", "gateway-error", "retriable-4xx", "retriable-status-codes", "retriable-headers")
DEFAULT_OVERPROVISIONING = 140  # Envoy's, when the load assignment sets none
CREDENTIAL_FILTER = "envoy.filters.http.credential_injector"
PREVIOUS_HOSTS = "envoy.retry_host_predicates.previous_hosts"
LUA_FILTER = "envoy.filters.http.lua"

# (API group, kind) that egctl's translator reads (internal/gatewayapi/resource/supported_kind.go, v1.8.1);
# it refuses a file with any other kind.
TRANSLATED_KINDS = frozenset({
    ("", "ConfigMap"), ("", "Namespace"), ("", "Secret"), ("", "Service"),
    *((GATEWAY_GROUP, k) for k in ("GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute",
                                   "UDPRoute", "ReferenceGrant", "BackendTLSPolicy", "ListenerSet")),
    *((EG_GROUP, k) for k in ("Backend", "BackendTrafficPolicy", "ClientTrafficPolicy", "EnvoyExtensionPolicy",
                              "EnvoyPatchPolicy", "EnvoyProxy", "HTTPRouteFilter", "SecurityPolicy")),
})
POLICY_KINDS = ("BackendTrafficPolicy", "EnvoyExtensionPolicy", "ClientTrafficPolicy", "EnvoyPatchPolicy")
# egctl's output lists resources by kind under these keys
OUTPUT_KEYS = {"HTTPRoute": "httpRoutes", "Backend": "backends", "BackendTrafficPolicy": "backendTrafficPolicies",
               "EnvoyExtensionPolicy": "envoyExtensionPolicies", "ClientTrafficPolicy": "clientTrafficPolicies",
               "EnvoyPatchPolicy": "envoyPatchPolicies", "Gateway": "gateways"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


EGCTL_VERSION = "v1.8.1"  # scripts/e2e-tools.sh EGCTL_VERSION


class TranslateError(RuntimeError):
    """egctl refused the input or failed."""


def egctl_bin_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where scripts/e2e-tools.sh puts its binaries: $MODELPLANE_E2E_CACHE/bin, else ~/.cache/modelplane/e2e/bin."""
    cache = env.get("MODELPLANE_E2E_CACHE") or str(Path.home() / ".cache" / "modelplane" / "e2e")
    return Path(cache).expanduser() / "bin"


def find_egctl(env: Mapping[str, str] = os.environ) -> Path | None:
    """The egctl built by scripts/e2e-tools.sh at EGCTL_VERSION; None if there is none (or another version)."""
    egctl = egctl_bin_dir(env) / "egctl"
    stamp = egctl.parent / ".egctl.version"
    if not (egctl.is_file() and os.access(egctl, os.X_OK)):
        return None
    if stamp.is_file() and stamp.read_text().strip() != EGCTL_VERSION:
        return None
    return egctl


# --- reading egctl's output ------------------------------------------------------------------

def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def get(obj: Any, *names: str | int, default: Any = None) -> Any:
    """``obj[names[0]][names[1]]...``; a string name also matches its snake_case spelling."""
    for name in names:
        if isinstance(name, int):
            if not isinstance(obj, list) or not -len(obj) <= name < len(obj):
                return default
            obj = obj[name]
            continue
        if not isinstance(obj, Mapping):
            return default
        if name in obj:
            obj = obj[name]
        elif _snake(name) in obj:
            obj = obj[_snake(name)]
        else:
            return default
    return obj


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _nn(obj: Mapping) -> str:
    meta = get(obj, "metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


@dataclass
class Translation:
    """egctl's output: the resources with status (``output``), and the xDS of each Gateway."""

    output: dict[str, Any]
    ignored: list[str] = field(default_factory=list)  # input objects egctl does not read ("Kind ns/name")
    added: list[str] = field(default_factory=list)  # objects translate() added (a missing GatewayClass)

    def resources(self, kind: str) -> dict[str, dict]:
        """The translated resources of ``kind``, by "namespace/name"."""
        found = self.output.get(OUTPUT_KEYS.get(kind, kind)) or []
        return {_nn(r): r for r in _items(found)}

    def _dumps(self, gateway: str | None = None) -> Iterator[dict]:
        for name, per_gateway in (self.output.get("xds") or {}).items():
            if gateway is None or name == gateway:
                yield from _items(get(per_gateway, "configs"))

    def gateways(self) -> list[str]:
        """The Gateways ("namespace/name") egctl printed xDS for."""
        return list(self.output.get("xds") or {})

    def gateway_routes(self, gateway: str) -> Iterator[tuple[dict, dict]]:
        """Every (virtual host, route) of one Gateway's route configurations."""
        for dump in self._dumps(gateway):
            if not str(dump.get("@type", "")).endswith("RoutesConfigDump"):
                continue
            for entry in _items(get(dump, "dynamicRouteConfigs")) + _items(get(dump, "staticRouteConfigs")):
                for vhost in _items(get(get(entry, "routeConfig") or {}, "virtualHosts")):
                    for route in _items(get(vhost, "routes")):
                        yield vhost, route

    def _dumps_of(self, suffix: str) -> Iterator[dict]:
        return (d for d in self._dumps() if str(d.get("@type", "")).endswith(suffix))

    def clusters(self) -> dict[str, dict]:
        out = {}
        for dump in self._dumps_of("ClustersConfigDump"):
            for entry in _items(get(dump, "dynamicActiveClusters")) + _items(get(dump, "staticClusters")):
                cluster = get(entry, "cluster") or {}
                out[str(get(cluster, "name"))] = cluster
        return out

    def load_assignments(self) -> dict[str, dict]:
        """EDS load assignments (of clusters whose endpoints are not inline), by cluster name."""
        out = {}
        for dump in self._dumps_of("EndpointsConfigDump"):
            for entry in _items(get(dump, "dynamicEndpointConfigs")) + _items(get(dump, "staticEndpointConfigs")):
                assignment = get(entry, "endpointConfig") or {}
                out[str(get(assignment, "clusterName"))] = assignment
        return out

    def route_configs(self) -> dict[str, dict]:
        out = {}
        for dump in self._dumps_of("RoutesConfigDump"):
            for entry in _items(get(dump, "dynamicRouteConfigs")) + _items(get(dump, "staticRouteConfigs")):
                config = get(entry, "routeConfig") or {}
                out[str(get(config, "name"))] = config
        return out

    def routes(self) -> Iterator[tuple[dict, dict]]:
        """Every (virtual host, route) of every route configuration."""
        for config in self.route_configs().values():
            for vhost in _items(get(config, "virtualHosts")):
                for route in _items(get(vhost, "routes")):
                    yield vhost, route

    def listeners(self) -> list[dict]:
        out = []
        for dump in self._dumps_of("ListenersConfigDump"):
            for entry in _items(get(dump, "dynamicListeners")):
                listener = get(entry, "activeState", "listener")
                if listener:
                    out.append(listener)
        return out


def translate(objects: Iterable[dict], egctl: Path, *, timeout: float = 300) -> Translation:
    """Envoy Gateway's translation of ``objects`` (the kinds egctl reads; see the module docstring)."""
    objects = [o for o in objects if isinstance(o, dict)]
    kept, ignored = [], []
    for obj in objects:
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        if (group, obj.get("kind")) in TRANSLATED_KINDS:
            kept.append(obj)
        else:
            ignored.append(f"{obj.get('kind')} {_nn(obj)}")
    classes = {get(o, "metadata", "name") for o in kept if o.get("kind") == "GatewayClass"}
    added = []
    for name in sorted({get(o, "spec", "gatewayClassName") for o in kept if o.get("kind") == "Gateway"} - classes):
        kept.insert(0, {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": name},
                        "spec": {"controllerName": EG_CONTROLLER}})
        added.append(f"GatewayClass {name}")
    with tempfile.TemporaryDirectory(prefix="front-door-xds-") as work:
        source = Path(work) / "objects.yaml"
        source.write_text(yaml.dump_all(kept, Dumper=_DUMPER, sort_keys=False))
        command = [str(egctl), "x", "translate", "--from", "gateway-api", "--to", "gateway-api,xds",
                   "-t", "all", "-o", "yaml", "-f", str(source)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise TranslateError(f"{' '.join(command)}: {error}") from None
    if done.returncode != 0:
        raise TranslateError(f"egctl x translate failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    output = yaml.load(done.stdout, Loader=_LOADER)
    if not isinstance(output, dict):
        raise TranslateError(f"egctl x translate printed no resources: {done.stdout[:200]!r}")
    return Translation(output, ignored, added)


# --- what the input promises -----------------------------------------------------------------

@dataclass(frozen=True)
class ExpectedBackend:
    backend: str  # "namespace/name" of the Backend
    weight: int  # the backendRef's weight (Gateway API default 1)
    fallback: bool  # Backend spec.fallback: Envoy priority 1
    hostnames: tuple[str, ...]  # its endpoints' hostname (the Host of traffic and health checks)


@dataclass(frozen=True)
class ServiceRule:
    route: str  # "namespace/name" of the HTTPRoute
    rule: int  # index in spec.rules
    backends: tuple[ExpectedBackend, ...]
    overprovisioning: int | None = None  # set by an EnvoyPatchPolicy on the rule's cluster

    def __str__(self) -> str:
        return f"HTTPRoute {self.route} rule {self.rule}"


@dataclass(frozen=True)
class Expected:
    """What ``front_door_problems`` checks, derived from the input (``expected_from``)."""

    routes: tuple[str, ...]  # every HTTPRoute: Accepted and ResolvedRefs
    backends: tuple[str, ...]  # every Backend: Accepted
    policies: tuple[tuple[str, str], ...]  # (kind, "namespace/name") of every policy: Accepted
    route_filters: Mapping[str, tuple[str, ...]]  # HTTPRoute -> the HTTPRouteFilters it uses (for messages)
    service_rules: tuple[ServiceRule, ...]
    lua: bool  # an EnvoyExtensionPolicy with Lua: the model router must run on every route
    internal_gateways: tuple[str, ...] = ()  # Gateways whose EnvoyProxy makes a ClusterIP Service ("ns/name")


def expected_from(objects: Iterable[dict], *, service_routes: Iterable[str] | None = None) -> Expected:
    """The promises of ``objects``: every HTTPRoute, Backend and policy among them, and the service rules.

    A service rule is an HTTPRoute rule with backendRefs of which at least one is a Backend with
    endpoint host names (a replica or a hand-made endpoint, as the front door renders them), on a
    Gateway that is not internal (a hop's route to its upstream is not a service). ``service_routes`` ("namespace/name") instead names the
    HTTPRoutes all of whose rules with backends are service rules.
    """
    objects = [o for o in objects if isinstance(o, dict)]
    by_kind: dict[str, dict[str, dict]] = {}
    for obj in objects:
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        if group in (EG_GROUP, GATEWAY_GROUP):
            by_kind.setdefault(str(obj.get("kind")), {})[_nn(obj)] = obj
    backends = by_kind.get("Backend", {})
    chosen = set(service_routes) if service_routes is not None else None
    rules, filters = [], {}
    internal = set(_internal_gateways(by_kind))
    for name, route in by_kind.get("HTTPRoute", {}).items():
        ns = name.partition("/")[0]
        parents = {f"{get(p, 'namespace') or ns}/{get(p, 'name')}" for p in _items(get(route, "spec", "parentRefs"))}
        used = []
        for i, rule in enumerate(_items(get(route, "spec", "rules"))):
            used += [f"{ns}/{get(f, 'extensionRef', 'name')}" for f in _items(get(rule, "filters"))
                     if get(f, "type") == "ExtensionRef" and get(f, "extensionRef", "kind") == "HTTPRouteFilter"]
            refs = []
            for ref in _items(get(rule, "backendRefs")):
                if get(ref, "kind", default="Service") != "Backend" or get(ref, "group", default="") != EG_GROUP:
                    continue
                key = f"{get(ref, 'namespace') or ns}/{get(ref, 'name')}"
                spec = get(backends.get(key), "spec") or {}
                refs.append(ExpectedBackend(
                    key, int(get(ref, "weight", default=1)), bool(get(spec, "fallback", default=False)),
                    tuple(str(e["hostname"]) for e in _items(get(spec, "endpoints")) if isinstance(e, dict) and e.get("hostname"))))
            on_internal = bool(parents) and parents <= internal
            is_service = (name in chosen) if chosen is not None else any(b.hostnames for b in refs) and not on_internal
            if refs and is_service:
                rules.append(ServiceRule(name, i, tuple(refs)))
        filters[name] = tuple(dict.fromkeys(used))
    lua = any(get(p, "spec", "lua") for p in by_kind.get("EnvoyExtensionPolicy", {}).values())
    factors = _patched_factors(by_kind.get("EnvoyPatchPolicy", {}).values())
    rules = [replace(r, overprovisioning=factors.get(f"httproute/{r.route}/rule/{r.rule}")) for r in rules]
    return Expected(
        routes=tuple(by_kind.get("HTTPRoute", {})), backends=tuple(backends),
        policies=tuple((kind, name) for kind in POLICY_KINDS for name in by_kind.get(kind, {})),
        route_filters=filters, service_rules=tuple(rules), lua=lua,
        internal_gateways=_internal_gateways(by_kind))


def _patched_factors(policies: Iterable[dict]) -> dict[str, int]:
    """Envoy cluster name -> the overprovisioning factor an EnvoyPatchPolicy gives its load assignment."""
    out = {}
    for policy in policies:
        for patch in _items(get(policy, "spec", "jsonPatches")):
            operation = get(patch, "operation") or {}
            if str(get(patch, "type", default="")).endswith("Cluster") and get(operation, "path") in (
                    "/load_assignment/policy", "/loadAssignment/policy"):
                factor = get(operation, "value", "overprovisioningFactor")
                if factor is not None:
                    out[str(get(patch, "name"))] = _int(factor)
    return out


def _internal_gateways(by_kind: Mapping[str, Mapping[str, dict]]) -> tuple[str, ...]:
    """Gateways whose own EnvoyProxy (infrastructure.parametersRef) gives them a ClusterIP Service only."""
    proxies = by_kind.get("EnvoyProxy", {})
    out = []
    for name, gateway in by_kind.get("Gateway", {}).items():
        ref = get(gateway, "spec", "infrastructure", "parametersRef") or {}
        proxy = proxies.get(f"{name.partition('/')[0]}/{get(ref, 'name')}") if get(ref, "kind") == "EnvoyProxy" else None
        if get(proxy, "spec", "provider", "kubernetes", "envoyService", "type") == "ClusterIP":
            out.append(name)
    return tuple(out)


# --- the checks ------------------------------------------------------------------------------

def _conditions(conditions: Any) -> dict[str, dict]:
    return {str(get(c, "type")): c for c in _items(conditions)}


def _condition_problems(who: str, conditions: Any, required: Iterable[str], optional: Iterable[str] = ()) -> list[str]:
    found = _conditions(conditions)
    out = []
    for kind in required:
        if kind not in found:
            out.append(f"{who}: no {kind} condition (Envoy Gateway did not process it)")
    for kind in (*required, *optional):
        c = found.get(kind)
        if c is not None and str(get(c, "status")) != "True":
            out.append(f"{who}: {kind} is {get(c, 'status')} ({get(c, 'reason')}: {' '.join(str(get(c, 'message') or '').split())})")
    return out


def _status_problems(t: Translation, e: Expected) -> list[str]:
    out = []
    routes = t.resources("HTTPRoute")
    for name in e.routes:
        uses = e.route_filters.get(name) or ()
        who = f"HTTPRoute {name}" + (f" (with HTTPRouteFilter {', '.join(uses)})" if uses else "")
        route = routes.get(name)
        if route is None:
            out.append(f"{who}: not in egctl's output")
            continue
        parents = _items(get(route, "status", "parents"))
        if not parents:
            out.append(f"{who}: attached to no Gateway (no status.parents)")
        for parent in parents:
            gateway = f"{get(parent, 'parentRef', 'namespace') or name.partition('/')[0]}/{get(parent, 'parentRef', 'name')}"
            out += _condition_problems(f"{who} on Gateway {gateway}", get(parent, "conditions"), ("Accepted", "ResolvedRefs"))
    translated = t.resources("Backend")
    for name in e.backends:
        if name not in translated:
            out.append(f"Backend {name}: not in egctl's output")
        else:
            out += _condition_problems(f"Backend {name}", get(translated[name], "status", "conditions"), ("Accepted",))
    for kind, name in e.policies:
        policy = t.resources(kind).get(name)
        if policy is None:
            out.append(f"{kind} {name}: not in egctl's output")
            continue
        ancestors = _items(get(policy, "status", "ancestors"))
        if not ancestors:
            out.append(f"{kind} {name}: applies to nothing (no status.ancestors: its targetRefs match no resource)")
        for ancestor in ancestors:
            out += _condition_problems(f"{kind} {name}", get(ancestor, "conditions"), ("Accepted",), ("ResolvedRefs",))
    return out


def _route_clusters(route: dict) -> list[str]:
    action = get(route, "route") or {}
    if get(action, "cluster"):
        return [str(get(action, "cluster"))]
    return [str(get(c, "name")) for c in _items(get(action, "weightedClusters", "clusters"))]


def _locality_backend(locality: dict) -> str | None:
    for resource in _items(get(locality, "metadata", "filterMetadata", "envoy-gateway", "resources")):
        if get(resource, "kind") == "Backend":
            return f"{get(resource, 'namespace')}/{get(resource, 'name')}"
    return None


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _rule_problems(t: Translation, rule: ServiceRule, clusters: dict[str, dict], assignments: dict[str, dict]) -> list[str]:
    prefix = f"httproute/{rule.route}/rule/{rule.rule}/match/"
    routes = [r for _, r in t.routes() if str(get(r, "name", default="")).startswith(prefix)]
    if not routes:
        return [f"{rule}: no Envoy route (the rule is not translated)"]
    out = []
    used: list[str] = []
    for route in routes:
        name = get(route, "name")
        if get(route, "directResponse") is not None:
            out.append(f"{rule}: Envoy answers it itself with HTTP {get(route, 'directResponse', 'status')} "
                       f"instead of forwarding (Envoy route {name}; a filter or backend it names is invalid)")
            continue
        used += [c for c in _route_clusters(route) if c not in used]
        action = get(route, "route") or {}
        if get(action, "autoHostRewrite") is not True:
            out.append(f"{rule}: Envoy route {name} does not set Host to the backend's endpoint hostname (autoHostRewrite is not true)")
        retry = get(action, "retryPolicy")
        if not isinstance(retry, dict):
            out.append(f"{rule}: Envoy route {name} has no retry policy")
            continue
        if _int(get(retry, "numRetries"), -1) != 1:
            out.append(f"{rule}: Envoy route {name} retries {get(retry, 'numRetries')} times, not once")
        predicates = [get(p, "name") for p in _items(get(retry, "retryHostPredicate"))]
        if PREVIOUS_HOSTS not in predicates:
            out.append(f"{rule}: Envoy route {name} may retry on the backend that just failed (no {PREVIOUS_HOSTS} retry predicate)")
        triggers = [s.strip() for s in str(get(retry, "retryOn") or "").split(",") if s.strip()]
        if missing := [x for x in RETRY_ON if x not in triggers]:
            out.append(f"{rule}: Envoy route {name} does not retry on {', '.join(missing)} (retryOn: {','.join(triggers) or 'none'})")
        if late := [x for x in NEVER_RETRY_ON if x in triggers]:
            out.append(f"{rule}: Envoy route {name} retries on {', '.join(late)}, after the request reached a backend: a "
                       "generation would run (and be billed) twice")
    if not used:
        return out
    if len(used) != 1:
        return out + [f"{rule}: its {len(rule.backends)} backends are split over {len(used)} Envoy clusters ({', '.join(used)}) "
                      "instead of one: health checks, retries on another backend and the fallback tier only work "
                      "within one cluster (Envoy Gateway splits a rule when a backendRef has filters of its own, "
                      "when IP and FQDN Backends are mixed, or when a backend is invalid)"]
    cluster = clusters.get(used[0])
    if cluster is None:
        return out + [f"{rule}: Envoy cluster {used[0]} is not in the xDS output"]
    out += _cluster_problems(rule, cluster, get(cluster, "loadAssignment") or assignments.get(used[0]) or {})
    return out


def _cluster_problems(rule: ServiceRule, cluster: dict, assignment: dict) -> list[str]:
    where = f"{rule}: Envoy cluster {get(cluster, 'name')}"
    out = []
    localities: dict[str, list[dict]] = {}
    for locality in _items(get(assignment, "endpoints")):
        localities.setdefault(_locality_backend(locality) or "<no Backend>", []).append(locality)
    expected = {b.backend: b for b in rule.backends}
    if missing := [b for b in expected if b not in localities]:
        out.append(f"{where}: lacks Backend {', '.join(missing)}")
    if extra := [b for b in localities if b not in expected]:
        out.append(f"{where}: has endpoints of {', '.join(extra)}, which the rule does not name")
    for name, b in expected.items():
        found = localities.get(name) or []
        if len(found) > 1:
            out.append(f"{where}: Backend {name} is in {len(found)} localities, not one")
        for locality in found[:1]:
            weight = _int(get(locality, "loadBalancingWeight"), 1)
            if weight != b.weight:
                out.append(f"{where}: Backend {name} has weight {weight}, the rule gives it {b.weight}")
            priority, want = _int(get(locality, "priority"), 0), 1 if b.fallback else 0
            if priority != want:
                role = "a fallback Backend, used only when all others are down," if b.fallback else "a primary Backend"
                out.append(f"{where}: Backend {name} is at priority {priority}; {role} belongs at priority {want}")
            checked = [str(get(lb, "endpoint", "healthCheckConfig", "hostname") or "")
                       for lb in _items(get(locality, "lbEndpoints"))]
            if sorted(checked) != sorted(b.hostnames):
                out.append(f"{where}: Backend {name}'s endpoints are health-checked with Host {checked}, "
                           f"not their endpoint hostnames {list(b.hostnames)}")
    if rule.overprovisioning is not None:
        factor = _int(get(assignment, "policy", "overprovisioningFactor"), DEFAULT_OVERPROVISIONING)
        if factor != rule.overprovisioning:
            out.append(f"{where}: overprovisioning factor is {factor}, not the {rule.overprovisioning} its EnvoyPatchPolicy "
                       f"sets: the fallback tier takes traffic below {10_000 / factor:.2f}% healthy primaries, not "
                       f"{10_000 / rule.overprovisioning:.2f}%")
    checks = [h for h in _items(get(cluster, "healthChecks")) if get(h, "httpHealthCheck") is not None]
    if not any(get(h, "httpHealthCheck", "path") == HEALTH_PATH for h in checks):
        paths = [get(h, "httpHealthCheck", "path") for h in checks]
        out.append(f"{where}: no active HTTP health check on {HEALTH_PATH}" + (f" (it checks {paths})" if paths else ""))
    if not get(cluster, "outlierDetection"):
        out.append(f"{where}: no passive ejection of failing backends (no outlierDetection)")
    panic = get(cluster, "commonLbConfig", "healthyPanicThreshold")
    if not isinstance(panic, dict):
        out.append(f"{where}: healthy panic threshold is Envoy's default 50%, not 0: with half the backends down, "
                   "Envoy would send requests to dead ones")
    elif float(get(panic, "value", default=0) or 0) != 0:
        out.append(f"{where}: healthy panic threshold is {get(panic, 'value')}%, not 0")
    return out


def _lua_problems(t: Translation) -> list[str]:
    out = []
    configs = t.route_configs()
    for listener in t.listeners():
        for chain in [*_items(get(listener, "filterChains")), get(listener, "defaultFilterChain") or {}]:
            for network_filter in _items(get(chain, "filters")):
                hcm = get(network_filter, "typedConfig") or {}
                config_name = get(hcm, "rds", "routeConfigName")
                if config_name is None:
                    continue  # Envoy Gateway's own listeners (ready, stats) have inline routes
                who = f"listener {get(listener, 'name')}"
                lua = [f for f in _items(get(hcm, "httpFilters")) if str(get(f, "name", default="")).startswith(LUA_FILTER)]
                if not lua:
                    out.append(f"{who}: the model router (Lua filter) is not among its HTTP filters")
                    continue
                for vhost in _items(get(configs.get(config_name), "virtualHosts")):
                    for route in _items(get(vhost, "routes")):
                        if not any(_lua_enabled(f, vhost, route) for f in lua):
                            out.append(f"{who}: the model router (Lua) is off on route {get(route, 'name')}")
    return out


def _lua_enabled(lua_filter: dict, vhost: dict, route: dict) -> bool:
    name = get(lua_filter, "name")
    enabled = not get(lua_filter, "disabled", default=False)
    for scope in (vhost, route):  # the route's setting overrides the virtual host's
        per = (get(scope, "typedPerFilterConfig") or {}).get(name)
        if isinstance(per, dict):
            enabled = not get(per, "disabled", default=False)
    return enabled


def front_door_problems(translation: Translation, expected: Expected) -> list[str]:
    """Every promise of ``expected`` that ``translation`` breaks (see the module docstring); empty: all hold."""
    out = _status_problems(translation, expected)
    clusters, assignments = translation.clusters(), translation.load_assignments()
    rules_per_route: dict[str, list[int]] = {}
    for rule in expected.service_rules:
        out += _rule_problems(translation, rule, clusters, assignments)
        rules_per_route.setdefault(rule.route, []).append(rule.rule)
    for route, rules in rules_per_route.items():
        if len(rules) > 1:
            out.append(f"HTTPRoute {route}: {len(rules)} rules over the service's backends (rules {rules}): each is its "
                       "own Envoy cluster, probing every backend with its own ejection state (one with no traffic is "
                       "probed only every 60 s)")
    out += _credential_problems(translation, expected)
    if expected.lua:
        out += _lua_problems(translation)
    return out


def _credential_problems(t: Translation, expected: Expected) -> list[str]:
    """A route that adds a credential must be on an internal Gateway only."""
    out = []
    for gateway in t.gateways():
        if gateway in expected.internal_gateways:
            continue
        for vhost, route in t.gateway_routes(gateway):
            per = get(route, "typedPerFilterConfig") or {}
            if any(str(name).startswith(CREDENTIAL_FILTER) for name in per):
                out.append(f"Gateway {gateway}: route {get(route, 'name')} (virtual host {get(vhost, 'name')}) adds a "
                           "credential on a Gateway that is not internal: anyone reaching it spends that credential")
    return out
