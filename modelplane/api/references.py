"""Checks across objects: references resolve, names do not clash, selectors can select something.

Returns (errors, warnings). Warnings are things that are legal but probably not what was meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from ..cel import selector_problem
from .errors import ConfigIssue, shown
from .fleet import Fleet, NamespacedName
from .front_door_checks import check_front_door
from .inference_cluster import ClusterSource
from .labels import missing_labels
from .model_deployment import ModelDeployment
from .serving_stack import FAKE_GPU_DRIVER
from .storage import rwx_storage_class

DEPLOYMENT_LABEL = "modelplane.ai/deployment"
CLUSTER_LABEL = "modelplane.ai/cluster"
INDEX_LABEL = "modelplane.ai/replica-index"


ANY = "*"  # in `broken`: every object of that key


def _is_broken(broken, key: str, name: object) -> bool:
    return (key, name) in broken or (key, ANY) in broken


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    if len(known) > 20:  # a fleet may define thousands: name a few
        return f"; known: {', '.join(known[:20])} and {len(known) - 20:,} more"
    return f"; known: {', '.join(known)}" if known else "; none are defined"


def check_references(
    fleet: Fleet, broken: AbstractSet[tuple[str, object]] = frozenset()
) -> tuple[list[ConfigIssue], list[ConfigIssue]]:
    """`broken` names objects that failed validation on their own: references to them are not
    reported again, so one mistake yields one error."""
    errors: list[ConfigIssue] = []
    warnings: list[ConfigIssue] = []
    _check_clusters(fleet, errors, warnings, broken)
    _check_preinstalled(fleet, errors)
    _check_gateway(fleet, errors, broken)
    _check_deployments(fleet, errors, warnings, broken)
    _check_services(fleet, errors, broken)
    _check_caches(fleet, warnings)
    front_door_errors, front_door_warnings = check_front_door(fleet)
    errors += front_door_errors
    warnings += front_door_warnings
    return errors, warnings


def _check_clusters(fleet: Fleet, errors: list[ConfigIssue], warnings: list[ConfigIssue], broken) -> None:
    """Long: one check after another on the same clusters, each appending its own issue."""
    for name, cluster in sorted(fleet.inference_clusters.items()):
        source = cluster.cluster.source
        for i, pool in enumerate(cluster.node_pools):
            at = ("inferenceClusters", name, "nodePools", i)
            cls = fleet.inference_classes.get(pool.class_name)
            if cls is None:
                if _is_broken(broken, "inferenceClasses", pool.class_name):
                    continue
                errors.append(
                    ConfigIssue(
                        at + ("className",),
                        f"InferenceClass {shown(pool.class_name)} is not defined in "
                        f"modelplane:inferenceClasses{_did_you_mean(pool.class_name, fleet.inference_classes)}",
                    )
                )
                continue
            if cluster.cluster.is_cloud:
                prov = cls.provisioning
                if prov is None or prov.provider != source:
                    has = f"it provisions on {prov.provider}" if prov else "it has no provisioning block"
                    errors.append(
                        ConfigIssue(
                            at + ("className",),
                            f"InferenceClass {shown(pool.class_name)} cannot provision "
                            f"node pools on {source} ({has}); add provisioning.provider: {source} with its "
                            f"'{source.lower()}' block, or use another class",
                        )
                    )
            if not cls.claimable:
                warnings.append(
                    ConfigIssue(
                        at + ("className",),
                        f"InferenceClass {shown(pool.class_name)} has only Synthetic "
                        "devices: no engine can be placed on this pool (one DRA device is needed)",
                    )
                )
            if source in ("EKS", "AKS") and pool.min_node_count == 0:
                warnings.append(
                    ConfigIssue(
                        at + ("minNodeCount",),
                        f"{source}'s cluster autoscaler cannot scale a DRA GPU "
                        "pool up from zero nodes; keep minNodeCount at 1 or more",
                    )
                )
    kind_names: dict[str, tuple] = {}
    # (config path, cluster, its kind cluster's name unless it sets clusterName)
    clusters: list[tuple[tuple[str, ...], ClusterSource, str]] = [
        (("inferenceClusters", n), c.cluster, n) for n, c in sorted(fleet.inference_clusters.items())
    ]
    if fleet.inference_gateway:
        gateway = fleet.inference_gateway
        clusters.append((("inferenceGateway",), gateway.cluster, gateway.cluster_name))
    for path, cluster_source, default_name in clusters:
        if cluster_source.kind is None:
            continue
        kind_name = cluster_source.kind.cluster_name or default_name
        if kind_name in kind_names:
            errors.append(
                ConfigIssue(
                    path + ("cluster", "kind", "clusterName"),
                    f"kind cluster name {shown(kind_name)} is "
                    f"already used by {'.'.join(map(str, kind_names[kind_name]))}; give each kind cluster its own",
                )
            )
        kind_names[kind_name] = path


def _check_preinstalled(fleet: Fleet, errors: list[ConfigIssue]) -> None:
    """`preinstalled` is per Existing cluster, and names the DRA driver the cluster's pools use."""
    if fleet.serving_stack is not None and fleet.serving_stack.preinstalled:
        errors.append(
            ConfigIssue(
                ("servingStack", "preinstalled"),
                "is per cluster: what a cluster already runs is "
                "a property of that cluster; move the list to "
                "modelplane:inferenceClusters.<name>.servingStack.preinstalled of each Existing "
                "cluster that runs these components",
            )
        )
    for name, cluster in sorted(fleet.inference_clusters.items()):
        preinstalled = cluster.serving_stack.preinstalled if cluster.serving_stack else []
        drivers = [(i, c) for i, c in enumerate(preinstalled) if c in ("nvidiaDraDriver", "draExampleDriver")]
        if not drivers or any(p.class_name not in fleet.inference_classes for p in cluster.node_pools):
            continue  # an undefined class is reported on its own; without it the driver is unknown
        used = "draExampleDriver" if fleet.uses_fake_gpus(name) else "nvidiaDraDriver"
        for i, component in drivers:
            if component == used:
                continue
            at = ("inferenceClusters", name, "servingStack", "preinstalled", i)
            if component == "draExampleDriver":
                why = (
                    f"no pool of this cluster has a class with {FAKE_GPU_DRIVER} DRA devices, so modelplane "
                    "installs no dra-example-driver here (it installs the NVIDIA DRA driver, nvidiaDraDriver)"
                )
            else:
                why = (
                    f"this cluster's pools have fake {FAKE_GPU_DRIVER} devices, so modelplane installs the "
                    "dra-example-driver here (draExampleDriver), not the NVIDIA DRA driver"
                )
            errors.append(
                ConfigIssue(
                    at,
                    f"{component} is not a driver this cluster uses: {why}; remove it, "
                    f"or list {used} if the cluster already runs that driver",
                )
            )


def _check_gateway(fleet: Fleet, errors: list[ConfigIssue], broken) -> None:
    gateway = fleet.inference_gateway
    if gateway and gateway.cluster_name in fleet.inference_clusters:
        errors.append(
            ConfigIssue(
                ("inferenceGateway", "clusterName"),
                f"{shown(gateway.cluster_name)} is also an "
                "InferenceCluster; the front door runs on its own cluster, give it another name",
            )
        )
    if gateway is None and fleet.model_services and not _is_broken(broken, "inferenceGateway", None):
        first = min(fleet.model_services)
        errors.append(
            ConfigIssue(
                ("modelServices", first.namespace, first.name),
                "a ModelService needs the front door: set modelplane:inferenceGateway (the cluster it runs on)",
            )
        )


def _check_deployments(fleet: Fleet, errors: list[ConfigIssue], warnings: list[ConfigIssue], broken) -> None:
    selected: dict[tuple, bool] = {}  # per selector: does any cluster match? (a fleet has few selectors)
    for key, deployment in sorted(fleet.model_deployments.items()):
        at = ("modelDeployments", key.namespace, key.name, "template", "spec")
        spec = deployment.spec
        selector = dict((spec.cluster_selector.match_labels or {}) if spec.cluster_selector else {})
        if spec.model_cache_ref is not None:
            ref = NamespacedName(key.namespace, spec.model_cache_ref.name)
            cache = fleet.model_caches.get(ref)
            if cache is None and _is_broken(broken, "modelCaches", ref):
                pass
            elif cache is None:
                elsewhere = sorted(k.namespace for k in fleet.model_caches if k.name == ref.name)
                hint = (
                    f"; a ModelCache of that name exists in {', '.join(elsewhere)}, but the reference is to the "
                    f"deployment's own namespace"
                    if elsewhere
                    else _did_you_mean(ref.name, [k.name for k in fleet.model_caches if k.namespace == key.namespace])
                )
                errors.append(
                    ConfigIssue(
                        at + ("modelCacheRef", "name"),
                        f"ModelCache {shown(ref.name)} is not defined in namespace '{key.namespace}'{hint}",
                    )
                )
            elif cache.cluster_selector and cache.cluster_selector.match_labels:
                selector.update(cache.cluster_selector.match_labels)  # the cache wins on a clash, as upstream
        wanted = tuple(sorted(selector.items()))
        if wanted not in selected:
            selected[wanted] = bool(fleet.clusters_matching(selector))
        if fleet.inference_clusters and not selected[wanted] and not broken:
            pairs = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
            warnings.append(
                ConfigIssue(
                    at + ("clusterSelector",),
                    f"no InferenceCluster has the labels {pairs} "
                    "(with the ModelCache's selector, if any): nothing will be scheduled",
                )
            )
        for e, engine in enumerate(spec.engines):
            for m, member in enumerate(engine.members):
                for r, request in enumerate(member.node_selector.devices if member.node_selector else []):
                    for s, selector_expr in enumerate(request.selectors):
                        problem = selector_problem(selector_expr.cel)
                        if problem:
                            errors.append(
                                ConfigIssue(
                                    at
                                    + ("engines", e, "members", m, "nodeSelector", "devices", r, "selectors", s, "cel"),
                                    problem,
                                )
                            )


def _possible_endpoint_labels_match(
    deployment: ModelDeployment, name: str, clusters: set[str], wanted: dict[str, str]
) -> bool:
    """Could an endpoint of one of this deployment's replicas carry every label in `wanted`?"""
    for k, v in wanted.items():
        if k == DEPLOYMENT_LABEL:
            ok = v == name
        elif k == CLUSTER_LABEL:
            ok = v in clusters
        elif k == INDEX_LABEL:
            ok = v.isdigit() and str(int(v)) == v and int(v) < deployment.replicas
        else:
            ok = deployment.labels.get(k) == v
        if not ok:
            return False
    return True


def _check_aliases(fleet: Fleet, errors: list[ConfigIssue]) -> None:
    """A model alias names one service in the whole fleet; fallback tiers need the Envoy Gateway front door."""
    owners: dict[str, NamespacedName] = {}
    for key, service in sorted(fleet.model_services.items()):
        if service.alias is None:
            continue
        first = owners.setdefault(service.alias, key)
        if first != key:
            errors.append(
                ConfigIssue(
                    ("modelServices", key.namespace, key.name, "alias"),
                    f"{shown(service.alias)} is already the alias of {first.namespace}/{first.name}: "
                    "a request's `model` must name one service; choose another alias",
                )
            )
    gateway = fleet.inference_gateway
    if gateway is not None and gateway.proxy == "Traefik":
        for key, service in sorted(fleet.model_services.items()):
            for i, endpoint in enumerate(service.endpoints):
                if endpoint.fallback:
                    errors.append(
                        ConfigIssue(
                            ("modelServices", key.namespace, key.name, "endpoints", i, "fallback"),
                            "needs the front door on Envoy Gateway (Traefik cannot see a backend's "
                            "health): set modelplane:inferenceGateway.backend: EnvoyGateway, or "
                            "remove fallback",
                        )
                    )


def _check_services(fleet: Fleet, errors: list[ConfigIssue], broken) -> None:
    _check_aliases(fleet, errors)
    clusters = set(fleet.inference_clusters)
    unsure = {
        getattr(name, "namespace", name) for kind, name in broken if kind in ("modelDeployments", "modelEndpoints")
    }
    for key, service in sorted(fleet.model_services.items()):
        if key.namespace in unsure or ANY in unsure:
            continue  # a deployment or endpoint there is itself invalid; fix that first
        for i, endpoint in enumerate(service.endpoints):
            wanted = endpoint.selector.match_labels or {}
            could = any(
                _possible_endpoint_labels_match(d, k.name, clusters, wanted)
                for k, d in fleet.deployments_in(key.namespace)
            )
            could = could or any(
                not missing_labels(e.labels, wanted)
                for k, e in fleet.model_endpoints.items()
                if k.namespace == key.namespace
            )
            if not could:
                pairs = ", ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "(any)"
                names = [k.name for k, _ in fleet.deployments_in(key.namespace)]
                names += [k.name for k in fleet.model_endpoints if k.namespace == key.namespace]
                known = f" (there: {', '.join(sorted(names))})" if names else " (it has none)"
                errors.append(
                    ConfigIssue(
                        ("modelServices", key.namespace, key.name, "endpoints", i, "selector", "matchLabels"),
                        f"selects nothing: no ModelDeployment's replicas and no ModelEndpoint in namespace "
                        f"'{key.namespace}'{known} can carry the labels {pairs}; select e.g. "
                        f"{DEPLOYMENT_LABEL}: <deployment name>",
                    )
                )


def _check_caches(fleet: Fleet, warnings: list[ConfigIssue]) -> None:
    for key, cache in sorted(fleet.model_caches.items()):
        matched = fleet.clusters_matching(cache.cluster_selector.match_labels if cache.cluster_selector else None)
        with_storage = [c for c in matched if _has_rwx_storage(fleet, c)]
        if fleet.inference_clusters and not with_storage:
            warnings.append(
                ConfigIssue(
                    ("modelCaches", key.namespace, key.name),
                    "no matching InferenceCluster has "
                    "ReadWriteMany storage (cloud clusters do; an Existing cluster needs "
                    "existing.cache.storageClassName; Kind has none): the cache stages nowhere",
                )
            )


def _has_rwx_storage(fleet: Fleet, cluster: str) -> bool:
    return rwx_storage_class(fleet.inference_clusters[cluster]) is not None
