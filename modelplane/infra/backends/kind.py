"""Kind backend: one local kind cluster per request, every one on the shared kind Docker network.

Three `pulumi_command.local.Command`s, children of the cluster's component:

* `<name>-kind` runs `create_command` with `kind_config` on stdin (`--config -`); its delete is
  `kind delete cluster`. Everything the cluster is made of (name, image, config) is in its
  `triggers`, so a change replaces it, deleting the old cluster first (`delete_before_replace`:
  kind cannot reshape a cluster, and the new one usually has the same name). Scaling a pool's
  `nodeCount` therefore recreates the cluster.
* `<name>-kubeconfig` runs `kind get kubeconfig`; its stdout is a secret output and not logged.
* `<name>-kind-network` runs `docker network inspect` on the kind network (`kind`, or
  `$KIND_EXPERIMENTAL_DOCKER_NETWORK`) to get its real IPv4 subnet. Each kind cluster's MetalLB range
  is carved from it by the one rule `modelplane render` applies to kind's default network
  (`render.metallb.kind_address_pools`); the rendered range is replaced with this one. A range
  outside the real subnet makes front-door requests time out with no error (seed trap 5), so it
  is never assumed.

Re-runs: if a cluster of that name already exists when the create runs, Pulumi's state does not
know it (an interrupted `pulumi up`, or `kind create` killed mid-way), so it is deleted and created
again rather than adopted: an adopted cluster could lack the pool labels, and its pods would stay
Pending with no error. Do not give a kind cluster you want to keep the name of a modelplane cluster.

Nodes: one control-plane; `nodeCount` workers per pool, labelled with `GpuPool.labels()`; and, when
there is any pool worker, one `system` worker (`modelplane.ai/pool=system`, the `SYSTEM_POOL` every
provisioned cluster gets) for the serving stack. kind taints the control-plane as soon as a cluster
has workers; a cluster without workers (the front door's) is a lone control-plane, which kind
leaves untainted and without the exclude-from-external-load-balancers label (kind#3507, so MetalLB
announces from it), so it carries the system label itself. Pool workers are not tainted
`nvidia.com/gpu` as cloud GPU pools are: the dra-example-driver chart's kubelet plugin has no
tolerations, so a taint would leave the fake GPUs unpublished, and there is no costly node to guard.

Node image: `DEFAULT_KIND_NODE_IMAGE`, kindest/node v1.34.3 pinned by digest, one of the images
published with kind v0.31.0 (kind requires the digest to get an image built for that release, so
the laptop needs kind >= v0.31.0). Kubernetes 1.34 serves DRA GA, and 1.34.2 fixed the kubelet DRA
deadlock of 1.34.0/1.34.1 (seed trap 3). kind v0.31 images ship containerd 2.2, which the reference
avoided. What we found: containerd 2.2 fails to start the CRI plugin on some `containerdConfigPatches`
written for the old config layout (`registry.mirrors` next to `config_path`, openperouter#314), and
kind does not version its containerd patches (kind#3946). CDI, which dra-example-driver uses, is on
by default since containerd 2.0 (so kind#3530 was closed), which makes the `enable_cdi` patch in
dra-example-driver's own kind config unnecessary. So we send no containerd patch at all.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex

import pulumi
import pulumi_command as command
import yaml

from ...render.metallb import KIND_NETWORK, NETWORK_ENV, KindNetworkError, kind_address_pools
from ...render.types import POOL_LABEL
from .base import SYSTEM_POOL, ClusterAccess, ClusterRequest

KIND_API_VERSION = "kind.x-k8s.io/v1alpha4"
CREATE_WAIT = "5m"  # the control plane comes up in about a minute; slow laptops also pull the image
DEFAULT_NETWORK = "kind"


def kind_cluster_name(request: ClusterRequest) -> str:
    return request.block().cluster_name or request.name


def kind_network() -> str:
    """The Docker network kind puts its nodes on: what kind itself reads, in the same environment."""
    return os.environ.get(NETWORK_ENV) or DEFAULT_NETWORK


def kind_config(request: ClusterRequest) -> dict:
    workers = [
        {"role": "worker", "labels": pool.labels()} for pool in request.pools for _ in range(pool.pool.node_count)
    ]
    system = {POOL_LABEL: SYSTEM_POOL}
    if workers:
        nodes = [{"role": "control-plane"}, *workers, {"role": "worker", "labels": system}]
    else:
        nodes = [{"role": "control-plane", "labels": system}]
    return {"kind": "Cluster", "apiVersion": KIND_API_VERSION, "nodes": nodes}


def create_command(request: ClusterRequest) -> str:
    """The shell script that creates the cluster; it reads the kind config on stdin."""
    name = kind_cluster_name(request)
    create = [
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--image",
        request.block().node_image,
        "--config",
        "-",
        "--wait",
        CREATE_WAIT,
    ]
    leftover = f"kind cluster {name} exists but is not in the Pulumi state (an interrupted run?): recreating it"
    return "\n".join(
        [
            "set -eu",
            f"if kind get clusters | grep -qxF -- {shlex.quote(name)}; then",
            f"  echo {shlex.quote(leftover)} >&2",
            f"  {delete_command(name)}",
            "fi",
            shlex.join(create),
        ]
    )


def delete_command(name: str) -> str:
    return shlex.join(["kind", "delete", "cluster", "--name", name])  # succeeds if already gone


def kubeconfig_command(name: str) -> str:
    return shlex.join(["kind", "get", "kubeconfig", "--name", name])


def network_command(network: str) -> str:
    return shlex.join(["docker", "network", "inspect", network, "--format", "{{json .IPAM.Config}}"])


def ipv4_subnet(ipam_config: str, network: str) -> str:
    """The IPv4 subnet in `docker network inspect`'s IPAM.Config (kind's network is dual-stack)."""
    try:
        configs = json.loads(ipam_config)
    except json.JSONDecodeError:
        raise KindNetworkError(f"cannot read the IPAM config of Docker network '{network}': {ipam_config!r}") from None
    if isinstance(configs, list) and configs and isinstance(configs[0], dict) and "IPAM" in configs[0]:
        configs = configs[0]["IPAM"].get("Config")  # the whole `docker network inspect` document
    for entry in configs or []:
        subnet = entry.get("Subnet") if isinstance(entry, dict) else None
        if subnet and ipaddress.ip_network(subnet, strict=False).version == 4:
            return str(ipaddress.ip_network(subnet, strict=False))
    raise KindNetworkError(
        f"Docker network '{network}' has no IPv4 subnet (IPAM.Config: {json.dumps(configs)}); MetalLB needs one. "
        f"Delete every kind cluster and the network (docker network rm {network}) so kind recreates it, "
        f"or set {NETWORK_ENV} to a network with an IPv4 subnet"
    )


def metallb_pool(request: ClusterRequest, subnet: str) -> str:
    """This cluster's MetalLB range: every kind cluster of the fleet carves its own from `subnet`.

    The same rule render applies offline to kind's default network, so on that network the two agree.
    """
    return kind_address_pools(sorted(set(request.kind_clusters) | {request.name}), subnet)[request.name]


def provision(request: ClusterRequest, parent: pulumi.Resource) -> ClusterAccess:
    name, network = kind_cluster_name(request), kind_network()
    config = yaml.safe_dump(kind_config(request), sort_keys=False)
    create = create_command(request)
    cluster = command.local.Command(
        f"{request.name}-kind",
        create=create,
        delete=delete_command(name),
        stdin=config,
        triggers=[create, config, network],  # kind reads the network from the environment
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True),
    )
    # Both reads re-run when the cluster is recreated (new id): new API port, maybe a new network.
    kubeconfig = command.local.Command(
        f"{request.name}-kubeconfig",
        create=kubeconfig_command(name),
        triggers=[cluster.id],
        logging=command.local.Logging.STDERR,  # the kubeconfig holds a client key: never in the log
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster], additional_secret_outputs=["stdout"]),
    )
    inspect = command.local.Command(
        f"{request.name}-kind-network",
        create=network_command(network),
        triggers=[cluster.id],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster]),
    )
    return ClusterAccess(
        kubeconfig=pulumi.Output.secret(kubeconfig.stdout),
        ready=[cluster, kubeconfig],
        metallb_pool=inspect.stdout.apply(lambda out: metallb_pool(request, _subnet(out, network))),
    )


def _subnet(ipam_config: str | None, network: str) -> str:
    """The real subnet; kind's default only when docker never ran (a program run under mocks)."""
    if ipam_config is None:
        pulumi.log.debug(f"no `docker network inspect {network}` output; assuming kind's default {KIND_NETWORK}")
        return KIND_NETWORK
    return ipv4_subnet(ipam_config, network)
