"""MetalLB: the load balancer of clusters that have none (kind), and the one rule for its address ranges.

Every kind cluster of the fleet (the workload clusters and a front door on kind) runs MetalLB in L2
mode, so its Gateway's Service gets an address on the kind Docker network. All kind clusters share
that network, so each gets its own range: `kind_address_pools` carves them from the top of the
network, one `RANGE_SIZE` block per cluster in name order, and refuses a network whose upper half
cannot hold them (Docker hands node addresses out from the bottom).

That rule is computed once, here, and used twice: `modelplane render` applies it offline to kind's
default network (`KIND_NETWORK`, 172.18.0.0/16), and the Pulumi program's kind backend to the real
network it reads from `docker network inspect` (a range outside the real subnet makes requests time
out with no error). On a machine whose kind network is the default the two agree to the address.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ..api import Fleet
from ..api.errors import ModelplaneError
from . import objects as k8s
from .types import MANAGED_BY, HelmRelease, Placeholder, meta

KIND_NETWORK = "172.18.0.0/16"  # kind's default Docker network; the kind backend reads the real one
RANGE_SIZE = 16
NETWORK_ENV = "KIND_EXPERIMENTAL_DOCKER_NETWORK"  # kind's own switch for the Docker network it uses

METALLB_NAMESPACE = "metallb-system"
METALLB_RELEASE = "metallb"
METALLB_POOL = "modelplane"
METALLB_VERSION = "0.14.9"  # the chart on kind workload clusters (a front door sets its own, same default)
ADDRESS_POOL = "metallbAddressPool"  # the deploy-time value's name (see `types.Placeholder`)


class KindNetworkError(ModelplaneError):
    """The kind Docker network cannot hold the MetalLB ranges."""


def kind_cluster_names(fleet: Fleet) -> tuple[str, ...]:
    """Every kind cluster of the fleet, front door included, sorted: each carves its own range."""
    names = {name for name, cluster in fleet.inference_clusters.items() if cluster.cluster.source == "Kind"}
    if fleet.inference_gateway is not None and fleet.inference_gateway.cluster.source == "Kind":
        names.add(fleet.inference_gateway.cluster_name)
    return tuple(sorted(names))


def kind_address_pools(
    names: list[str] | tuple[str, ...], network: str = KIND_NETWORK, size: int = RANGE_SIZE
) -> dict[str, str]:
    """A MetalLB range per kind cluster, carved from the top of `network`, never overlapping.

    Raises KindNetworkError when the ranges do not fit in the network's upper half.
    """
    names = sorted(set(names))
    net = ipaddress.ip_network(network, strict=False)
    top = int(net.broadcast_address) - 1
    lowest = top - len(names) * size + 1
    if names and lowest < int(net.network_address) + net.num_addresses // 2:
        raise KindNetworkError(
            f"the kind network {network} is too small for {len(names)} MetalLB ranges "
            f"of {size} addresses in its upper half; use a larger network ({NETWORK_ENV})"
        )
    pools = {}
    for i, name in enumerate(names):
        last = top - i * size
        pools[name] = f"{ipaddress.ip_address(last - size + 1)}-{ipaddress.ip_address(last)}"
    return pools


def metallb(pool: str, version: str = METALLB_VERSION) -> tuple[list[dict], list[HelmRelease]]:
    """MetalLB in L2 mode handing out `pool` (a range or CIDR inside the nodes' network)."""
    release = HelmRelease(
        name=METALLB_RELEASE,
        namespace=METALLB_NAMESPACE,
        chart="metallb",
        repository="https://metallb.github.io/metallb",
        version=version,
    )
    # The speaker needs host networking and NET_RAW: privileged under Pod Security admission.
    privileged = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
    objects: list[dict[str, Any]] = [
        k8s.namespace(METALLB_NAMESPACE, {**MANAGED_BY, **privileged}),
        {
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": meta(METALLB_POOL, METALLB_NAMESPACE, labels=MANAGED_BY),
            "spec": {"addresses": [pool]},
        },
        {
            "apiVersion": "metallb.io/v1beta1",
            "kind": "L2Advertisement",
            "metadata": meta(METALLB_POOL, METALLB_NAMESPACE, labels=MANAGED_BY),
            "spec": {"ipAddressPools": [METALLB_POOL]},
        },
    ]
    return objects, [release]


def release_dependencies(obj: dict[str, Any]) -> tuple[str, ...]:
    """MetalLB's own custom resources wait for its release (the chart installs their CRDs)."""
    return (METALLB_RELEASE,) if obj["apiVersion"].rpartition("/")[0] == "metallb.io" else ()


def pool_placeholder(cluster: str, pool: str, network: str) -> Placeholder:
    """A kind cluster's MetalLB range as rendered from `network`: the program carves it from the real one."""
    default = ", kind's default" if network == KIND_NETWORK else ""
    return Placeholder(
        name=f"{cluster}.{ADDRESS_POOL}",
        token=pool,
        value=(
            f"the range the same rule carves from the kind Docker network `pulumi up` finds (`docker network "
            f"inspect kind`, or ${NETWORK_ENV}); rendered here from {network}{default}"
        ),
    )
