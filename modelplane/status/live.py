"""Read the live clusters, all at once (threads), each within a short budget.

Per cluster and namespace of its replicas: the pods labelled `modelplane.ai/serving` and the
namespace's ResourceClaims (two requests, whatever the number of replicas); then the workload
Gateway `inference-gateway` in `modelplane-system` for its address. A dead cluster costs one failed
connection (at most `REQUEST_TIMEOUT`); a slow one at most `CLUSTER_BUDGET`.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from ..render.replica import SERVING
from ..render.types import SYSTEM_NAMESPACE, WORKLOAD_GATEWAY
from .kube_client import KubeClient, ReadError
from .kubeconfig import ClusterAccess
from .observations import ClusterReading, ReplicaPods, gateway_address, replica_pods

REQUEST_TIMEOUT = 5.0  # seconds per request
CLUSTER_BUDGET = 15.0  # seconds for all of one cluster's requests
MAX_PARALLEL_CLUSTERS = 16


def read_clusters(accesses: dict[str, ClusterAccess], namespaces: dict[str, set[str]],
                  timeout: float = REQUEST_TIMEOUT, budget: float = CLUSTER_BUDGET) -> dict[str, ClusterReading]:
    """Each cluster of `accesses`, reading the namespaces `namespaces[cluster]`."""
    if not accesses:
        return {}
    names = sorted(accesses)
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CLUSTERS, len(names))) as pool:
        readings = list(pool.map(lambda c: read_cluster(accesses[c], namespaces.get(c, set()), timeout, budget), names))
    return dict(zip(names, readings))


def read_cluster(access: ClusterAccess, namespaces: Iterable[str], timeout: float = REQUEST_TIMEOUT,
                 budget: float = CLUSTER_BUDGET) -> ClusterReading:
    client = KubeClient(access, timeout, budget)
    try:
        replicas: dict[tuple[str, str], ReplicaPods] = {}
        for namespace in sorted(namespaces):
            pods = _items(client.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": SERVING}))
            claims = []
            if any((p.get("spec") or {}).get("resourceClaims") for p in pods):
                claims = _items(client.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"))
            for replica, observed in replica_pods(pods, claims).items():
                replicas[(namespace, replica)] = observed
        gateway = client.get(f"/apis/gateway.networking.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/gateways/{WORKLOAD_GATEWAY}")
        return ClusterReading(access.cluster, gateway_address=gateway_address(gateway), replicas=replicas)
    except ReadError as error:
        return ClusterReading(access.cluster, error=error.message, error_kind=error.kind)
    finally:
        client.close()


def _items(listing: dict | None) -> list[dict]:
    items = (listing or {}).get("items") or []
    return [i for i in items if isinstance(i, dict)]
