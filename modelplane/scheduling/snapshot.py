"""The scheduler's view of the fleet: published pools per cluster, and what each deployment asks for.

Built once per plan from the validated Fleet. Published capacity is the declared `nodeCount`
(conservative: an autoscaler ceiling is not capacity we can count on).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..api import Fleet, NamespacedName
from ..api.inference_cluster import Taint
from ..api.model_deployment import ModelDeployment, Toleration
from ..api.scheduling import Failback
from ..api.storage import rwx_storage_class
from ..devices import device_key


@dataclass(frozen=True)
class DeviceKind:
    name: str
    claim: str  # DRA | Synthetic
    device_class_name: str
    count: int
    key: str  # what selectors can see of it (memoisation key)
    driver: str = ""


@dataclass(frozen=True)
class Pool:
    name: str
    class_name: str
    nodes: int
    devices: tuple[DeviceKind, ...]


@dataclass(frozen=True)
class Cluster:
    name: str
    labels: dict
    taints: tuple[Taint, ...]
    pools: tuple[Pool, ...]
    rwx_storage: bool = False  # a ReadWriteMany StorageClass, where a ModelCache can stage

    @cached_property
    def class_names(self) -> frozenset[str]:
        """The InferenceClasses of its pools."""
        return frozenset(pool.class_name for pool in self.pools)

    def pool(self, name: str) -> Pool | None:
        return next((p for p in self.pools if p.name == name), None)

    def published_pool(self, name: str) -> Pool:
        """A pool a filter already found published (a kept replica's pinned pool)."""
        found = self.pool(name)
        if found is None:
            raise LookupError(f"cluster {self.name} publishes no pool {name}")
        return found


@dataclass(frozen=True)
class Request:
    name: str
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class Member:
    role: str
    pods: int
    requests: tuple[Request, ...]
    index: int


@dataclass(frozen=True)
class Engine:
    name: str
    copies: int
    phase: str | None
    members: tuple[Member, ...]
    index: int


@dataclass(frozen=True)
class Workload:
    """One ModelDeployment as the scheduler needs it."""

    key: NamespacedName
    replicas: int
    engines: tuple[Engine, ...]
    selector: dict  # clusterSelector.matchLabels, less the keys its ModelCache's selector sets
    cache_selector: dict  # the referenced ModelCache's clusterSelector.matchLabels (its footprint)
    tolerations: tuple[Toleration, ...]
    cache: str | None = None  # the ModelCache it mounts (it stages only on clusters with RWX storage)
    # Preference tiers: per tier, the labels a cluster needs (sorted pairs; empty: every cluster).
    # No tiers: every cluster is in tier 0.
    tiers: tuple[tuple[tuple[str, str], ...], ...] = ()
    failback: Failback = "Never"
    max_moves: int = 1  # failback WhenRoom: replicas moved per plan, at most

    def tier_of(self, labels: dict) -> int | None:
        """The first tier whose labels the cluster has (0 without tiers), or None: no tier takes it."""
        if not self.tiers:
            return 0
        return next((i for i, pairs in enumerate(self.tiers) if all(labels.get(k) == v for k, v in pairs)), None)

    def engine(self, name: str) -> Engine | None:
        return next((e for e in self.engines if e.name == name), None)

    def kept_engine(self, name: str) -> Engine:
        """An engine a filter already found in the deployment (a kept replica's)."""
        found = self.engine(name)
        if found is None:
            raise LookupError(f"deployment {self.key} has no engine {name}")
        return found

    @cached_property  # asked for twice per deployment per plan
    def signature(self) -> tuple:
        """What decides where it fits, names aside: deployments with equal signatures fit alike."""
        return tuple(
            (e.copies, tuple((m.role, m.pods, m.requests, m.index) for m in e.members), e.index) for e in self.engines
        )


def clusters_of(fleet: Fleet) -> tuple[Cluster, ...]:
    """Every InferenceCluster, sorted by name, with pools in declared order."""
    clusters = []
    for name in sorted(fleet.inference_clusters):
        spec = fleet.inference_clusters[name]
        pools = []
        for pool in spec.node_pools:
            cls = fleet.inference_classes[pool.class_name]
            devices = tuple(
                DeviceKind(d.name, d.claim, d.device_class_name or "", d.count, device_key(d), d.driver)
                for d in cls.devices
            )
            pools.append(Pool(pool.name, pool.class_name, pool.node_count, devices))
        clusters.append(
            Cluster(name, dict(spec.labels), tuple(spec.taints), tuple(pools), rwx_storage_class(spec) is not None)
        )
    return tuple(clusters)


def workloads_of(fleet: Fleet) -> tuple[Workload, ...]:
    """Every ModelDeployment in (namespace, name) order."""
    return tuple(workload_of(fleet, key, fleet.model_deployments[key]) for key in sorted(fleet.model_deployments))


def workload_of(fleet: Fleet, key: NamespacedName, deployment: ModelDeployment) -> Workload:
    spec = deployment.spec
    engines = []
    for e, engine in enumerate(spec.engines):
        members = []
        for m, member in enumerate(engine.members):
            requests = tuple(
                Request(r.name, r.count, tuple(s.cel for s in r.selectors))
                for r in (member.node_selector.devices if member.node_selector else ())
            )
            members.append(Member(member.role, member.pods, requests, m))
        engines.append(Engine(engine.name, engine.copies, engine.phase, tuple(members), e))
    cache_selector: dict = {}
    if spec.model_cache_ref is not None:
        cache = fleet.model_caches.get(NamespacedName(key.namespace, spec.model_cache_ref.name))
        if cache is not None and cache.cluster_selector and cache.cluster_selector.match_labels:
            cache_selector = dict(cache.cluster_selector.match_labels)
    selector = dict(spec.cluster_selector.match_labels or {}) if spec.cluster_selector else {}
    # The reference merges the two with the cache winning a clash (spec §4.2): the deployment's own
    # pairs count only where the cache does not set the key.
    selector = {k: v for k, v in selector.items() if k not in cache_selector}
    cache_name = spec.model_cache_ref.name if spec.model_cache_ref is not None else None
    default = fleet.scheduling.placement if fleet.scheduling is not None else None
    policy = [p for p in (deployment.placement, default) if p is not None]
    preferences = next((p.preferences for p in policy if p.preferences is not None), None) or ()
    failback: Failback = next((p.failback for p in policy if p.failback is not None), "Never")
    moves = next((p.max_moves_per_plan for p in policy if p.max_moves_per_plan is not None), 1)
    tiers = tuple(tuple(sorted(p.labels.items())) for p in preferences)
    return Workload(
        key,
        deployment.replicas,
        tuple(engines),
        selector,
        cache_selector,
        tuple(spec.tolerations or ()),
        cache_name,
        tiers,
        failback,
        moves,
    )
