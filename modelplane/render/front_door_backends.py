"""What the front door routes to, whatever its proxy: endpoints, their weights, each service's backends (spec §7.1-7.2).

* `FrontDoorEndpoint` — a backend a ModelService can route to: every placed replica (its URL is its
  workload cluster's gateway) and every hand-made ModelEndpoint (e.g. a SaaS provider).
* `route_backends` — a ModelService's endpoints with integer weights (`distribute_weights`).

The proxies (`front_door_envoy`, `front_door_traefik`) turn these into objects.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from typing import Literal
from urllib.parse import urlsplit

from ..api.fleet import Fleet
from ..api.model_service import EndpointAuth, ModelService
from ..api.references import CLUSTER_LABEL, DEPLOYMENT_LABEL, INDEX_LABEL
from ..scheduling import PlacedReplica, PlanResult
from .types import gateway_address_placeholder

AddressType = Literal["IPv4", "IPv6", "FQDN"]


@dataclass(frozen=True)
class Backend:
    """Where an endpoint's traffic goes, from its URL: only scheme, host and port are used."""

    scheme: str
    host: str
    port: int

    @property
    def address_type(self) -> AddressType:
        return ip_family(self.host) or "FQDN"


def ip_family(host: str) -> Literal["IPv4", "IPv6"] | None:
    """`IPv4` or `IPv6` for an IP address literal, None for a DNS name."""
    try:
        return "IPv6" if ipaddress.ip_address(host).version == 6 else "IPv4"
    except ValueError:
        return None


def parse_url(url: str) -> Backend:
    """Port: explicit, else 443 for https, else 80 (§7.1). Raises ValueError without a host or with a bad port."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"Invalid spec.url: {url}")
    try:
        explicit = parts.port
    except ValueError:
        raise ValueError(f"Invalid spec.url: {url}") from None
    scheme = parts.scheme.lower()
    port = explicit if explicit is not None else (443 if scheme == "https" else 80)
    return Backend(scheme=scheme, host=parts.hostname, port=port)


@dataclass(frozen=True)
class FrontDoorEndpoint:
    """A backend a ModelService can route to: a placed replica, or a hand-made ModelEndpoint."""

    namespace: str
    name: str
    url: str
    labels: dict[str, str]
    rewrite_path: str | None = None
    auth: EndpointAuth | None = None  # hand-made endpoints only
    replica: PlacedReplica | None = None  # set for a replica's endpoint
    model: str | None = None  # hand-made endpoints only: the name it serves the model under

    @property
    def backend(self) -> Backend:
        return parse_url(self.url)

    @property
    def host_rewrite(self) -> str | None:
        """The Host header a hand-made endpoint on a DNS name expects: a virtual-hosted SaaS API rejects the
        front door's own."""
        backend = self.backend
        return backend.host if self.replica is None and backend.address_type == "FQDN" else None


def replica_endpoint(fleet: Fleet, replica: PlacedReplica, gateway_addresses: dict[str, str]) -> FrontDoorEndpoint:
    """The endpoint of one placed replica: its workload cluster's gateway, path `/<ns>/<replica>/`.

    Labels: the deployment's template labels, then the managed ones (which win).
    """
    ns = replica.key.namespace
    address = gateway_addresses.get(replica.cluster) or gateway_address_placeholder(replica.cluster)
    deployment = fleet.model_deployments[replica.key]
    labels = {
        **deployment.labels,
        DEPLOYMENT_LABEL: replica.key.name,
        CLUSTER_LABEL: replica.cluster,
        INDEX_LABEL: str(replica.index),
    }
    return FrontDoorEndpoint(
        namespace=ns,
        name=replica.name,
        url=f"http://{address}/{ns}/{replica.name}/v1",
        labels=labels,
        rewrite_path=f"/{ns}/{replica.name}/",
        replica=replica,
    )


def fleet_endpoints(fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str]) -> list[FrontDoorEndpoint]:
    """Every endpoint of the fleet, sorted by (namespace, name): all placed replicas and every hand-made one."""
    endpoints = [replica_endpoint(fleet, r, gateway_addresses) for r in result.replicas()]
    endpoints += [
        FrontDoorEndpoint(
            namespace=key.namespace,
            name=key.name,
            url=e.url,
            labels=dict(e.labels),
            rewrite_path=e.rewrite_path,
            auth=e.auth,
            model=e.model,
        )
        for key, e in fleet.model_endpoints.items()
    ]
    seen: dict[tuple[str, str], FrontDoorEndpoint] = {}
    for endpoint in endpoints:
        key = (endpoint.namespace, endpoint.name)
        if key in seen:
            raise ValueError(
                f"two front-door endpoints are named {endpoint.namespace}/{endpoint.name} (a replica and "
                "a ModelEndpoint); rename the ModelEndpoint"
            )
        seen[key] = endpoint
    return [seen[key] for key in sorted(seen)]


# --- weights -------------------------------------------------------------------------------------

MAX_WEIGHT = 1_000_000


def distribute_weights(groups: list[tuple[int, int]]) -> list[int]:
    """Integer backendRef weights for (entry weight, number of its endpoints) groups, in order (§7.2).

    Each group's share is split evenly over its endpoints (the first ones get the remainder),
    scaled so that every endpoint gets at least 1, reduced by the gcd, and capped at 1,000,000
    (proportionally, with Python's banker's rounding, never below 1). Groups without endpoints
    get nothing.
    """
    groups = [(weight, count) for weight, count in groups if count > 0]
    if not groups:
        return []
    scale = max(1, max(math.ceil(count / weight) for weight, count in groups))
    weights: list[int] = []
    for weight, count in groups:
        base, rem = divmod(weight * scale, count)
        weights += [base + 1] * rem + [base] * (count - rem)
    divisor = reduce(math.gcd, weights)
    weights = [w // divisor for w in weights]
    highest = max(weights)
    if highest > MAX_WEIGHT:
        weights = [max(1, round(w / highest * 1e6)) for w in weights]
    return weights


@dataclass(frozen=True)
class RouteBackend:
    """One weighted backend of a service's route: an endpoint, in the tier the service puts it in."""

    endpoint: FrontDoorEndpoint
    weight: int
    fallback: bool = False  # from a `fallback: true` entry of the service (Envoy Gateway front door)

    @property
    def service(self) -> str:
        """The endpoint's name: its Service (Traefik) or Backend (Envoy Gateway), in the route's namespace."""
        return self.endpoint.name


def route_backends(namespace: str, service: ModelService, endpoints: Iterable[FrontDoorEndpoint]) -> list[RouteBackend]:
    """The service's endpoints (in its own namespace) with their weights.

    Each `spec.endpoints[i]` entry matches by labels; an endpoint matched by several entries
    counts for the first only. Within an entry endpoints go by name. Pass only the ready
    endpoints to route to ready ones only: weights are computed over what is passed.
    """
    candidates = sorted((e for e in endpoints if e.namespace == namespace), key=lambda e: e.name)
    taken: set[str] = set()
    groups: list[tuple[int, bool, list[FrontDoorEndpoint]]] = []
    for entry in service.endpoints:
        matched = [e for e in candidates if e.name not in taken and entry.selector.matches(e.labels)]
        taken.update(e.name for e in matched)
        groups.append((entry.weight, entry.fallback, matched))
    weights = distribute_weights([(weight, len(matched)) for weight, _, matched in groups])
    chosen = [(e, fallback) for _, fallback, matched in groups for e in matched]
    return [
        RouteBackend(endpoint=e, weight=w, fallback=fallback) for (e, fallback), w in zip(chosen, weights, strict=True)
    ]
