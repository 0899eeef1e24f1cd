"""Read the live clusters, all at once (threads), each within a hard deadline, all within another.

Per cluster and namespace of its replicas: the pods labelled `modelplane.ai/serving` and the
namespace's ResourceClaims (two requests, whatever the number of replicas); then the workload
Gateway `inference-gateway` in `modelplane-system` for its address. A dead cluster costs one failed
connection (at most `REQUEST_TIMEOUT`); a slow one, or one that trickles its answer, at most
`CLUSTER_BUDGET`; all clusters together at most `OVERALL_BUDGET`, whatever any of them does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..api import syntax
from ..render.types import GATEWAY_API, SERVING, SYSTEM_NAMESPACE, WORKLOAD_GATEWAY
from .deadline import gather
from .kube_client import KubeClient, ReadError
from .kubeconfig import ClusterAccess
from .observations import ClusterReading, ReplicaPods, gateway_address, replica_pods

REQUEST_TIMEOUT = 5.0  # seconds per read of one answer
CLUSTER_BUDGET = 15.0  # seconds for everything one cluster takes: credential plugin, connection, every answer
OVERALL_BUDGET = CLUSTER_BUDGET + 5.0  # seconds for all clusters, read together
MAX_PARALLEL_CLUSTERS = 64


def read_clusters(
    accesses: dict[str, ClusterAccess],
    namespaces: dict[str, set[str]],
    timeout: float = REQUEST_TIMEOUT,
    budget: float = CLUSTER_BUDGET,
    overall: float | None = None,
    on_done: Callable[[int], None] = lambda done: None,
) -> dict[str, ClusterReading]:
    """Each cluster of `accesses`, reading the namespaces `namespaces[cluster]`; `on_done(n)` as each is read."""
    names = sorted(accesses)
    overall = budget + (OVERALL_BUDGET - CLUSTER_BUDGET) if overall is None else overall
    readings = gather(
        lambda c: read_cluster(accesses[c], namespaces.get(c, set()), timeout, budget),
        names,
        MAX_PARALLEL_CLUSTERS,
        overall,
        late=lambda c: ClusterReading(
            c, error=f"not read within status's overall limit of {overall:g} s", error_kind="unreachable"
        ),
        failed=lambda c, e: ClusterReading(c, error=f"reading it failed ({type(e).__name__})", error_kind="unreadable"),
        on_done=on_done,
    )
    return dict(zip(names, readings, strict=True))


def read_cluster(
    access: ClusterAccess, namespaces: Iterable[str], timeout: float = REQUEST_TIMEOUT, budget: float = CLUSTER_BUDGET
) -> ClusterReading:
    if access.problem is not None:
        return ClusterReading(access.cluster, error=access.problem, error_kind="unreadable")
    client = KubeClient(access, timeout, budget)
    try:
        replicas: dict[tuple[str, str], ReplicaPods] = {}
        for namespace in sorted(namespaces):
            if syntax.dns_label_problem(namespace) is not None:  # never a path built from an unchecked name
                raise ReadError("unreadable", f"namespace {namespace!a} is not a valid namespace name")
            path = f"/api/v1/namespaces/{namespace}/pods"
            pods = _items(client.get(path, {"labelSelector": SERVING}), path)
            claims = []
            if any(_uses_claims(p) for p in pods):
                path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
                claims = _items(client.get(path), path)
            for replica, observed in replica_pods(pods, claims).items():
                replicas[(namespace, replica)] = observed
        gateway = client.get(f"/apis/{GATEWAY_API}/namespaces/{SYSTEM_NAMESPACE}/gateways/{WORKLOAD_GATEWAY}")
        return ClusterReading(access.cluster, gateway_address=gateway_address(gateway), replicas=replicas)
    except ReadError as error:
        return ClusterReading(access.cluster, error=error.message, error_kind=error.kind)
    finally:
        client.close()


def _uses_claims(pod: dict) -> bool:
    spec = pod.get("spec")
    return isinstance(spec, dict) and bool(spec.get("resourceClaims"))


def _items(listing: dict | None, path: str) -> list[dict]:
    """A list answer's objects; an answer that is not a list of objects makes the cluster unreadable."""
    if listing is None:
        return []
    items = listing.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise ReadError("unreadable", f"GET {path} answered with `items` that is not a list")
    return [i for i in items if isinstance(i, dict)]
