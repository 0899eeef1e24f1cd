"""A replica's routing on its workload cluster: the endpoint picker (EPP) and its config, the InferencePool,
and the HTTPRoutes by path (`/<ns>/<replica>/`, as the reference) and by host name (`replica_host`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
from typing import Any

import yaml

from ..api.model_deployment import ModelDeployment
from ..scheduling import PlacedReplica
from ..scheduling.names import child_name
from . import objects as k8s
from .types import (
    ENGINE_PORT,
    SERVING,
    SKIP_AWAIT,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY,
    meta,
    replica_host,
    with_annotations,
)

EPP_PORT, EPP_HEALTH_PORT = 9002, 9003
EPP_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"


def _block_size(deployment: ModelDeployment) -> int:
    """The KV block size the prefix-cache scorer must match: the serving engine's --block-size/--page-size."""
    engines = deployment.spec.engines
    serving = next((e for e in engines if e.phase == "Decode"), engines[0])
    member = next((m for m in serving.members if m.role in ("Standalone", "Leader")), serving.members[0])
    args = member.template.spec.engine.args or []
    value = engine_flag(args, "--block-size") or engine_flag(args, "--page-size")
    return int(value) if value and value.isdigit() else 16


def epp_config(deployment: ModelDeployment) -> str:
    return _epp_config(_block_size(deployment), deployment.spec.serving_mode == "PrefillDecode")


@functools.lru_cache(maxsize=64)
def _epp_config(block_size: int, prefill_decode: bool) -> str:
    """The text for a block size and serving mode: dumped once, not once per replica (a fleet has few)."""
    plugins: list[dict[str, Any]] = [
        {
            "type": "approx-prefix-cache-producer",
            "parameters": {
                "autoTune": False,
                "blockSizeTokens": block_size,
                "maxPrefixBlocksToMatch": 256,
                "lruCapacityPerServer": 31250,
            },
        },
        {"type": "prefix-cache-scorer"},
        {"type": "queue-scorer"},
        {"type": "max-score-picker"},
    ]
    scoring = [
        {"pluginRef": "max-score-picker"},
        {"pluginRef": "prefix-cache-scorer", "weight": 2},
        {"pluginRef": "queue-scorer", "weight": 1},
    ]
    if prefill_decode:
        plugins += [
            {"type": "disagg-headers-handler"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": 16}},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
        ]
        profiles = [
            {"name": phase, "plugins": [{"pluginRef": f"{phase}-filter"}, *copy.deepcopy(scoring)]}
            for phase in ("prefill", "decode")
        ]
    else:
        profiles = [{"name": "default", "plugins": scoring}]
    config = {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }
    return yaml.safe_dump(config, sort_keys=False)


def routing_objects(
    replica: PlacedReplica, deployment: ModelDeployment, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """A replica's routing surface: its endpoint picker, then its InferencePool and HTTPRoutes."""
    return [*_endpoint_picker(replica, deployment, labels), *_pool_and_routes(replica, labels)]


def _endpoint_picker(
    replica: PlacedReplica, deployment: ModelDeployment, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """The EPP: ServiceAccount, Role, RoleBinding, ConfigMap, Deployment and Service (apply order).

    Long: six object literals in apply order; splitting them would scatter one component.
    """
    ns, name = replica.key.namespace, replica.name
    pool, epp = f"{name}-pool", f"{name}-epp"
    config = epp_config(deployment)
    checksum = hashlib.sha256(config.encode()).hexdigest()
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(epp, ns, labels)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(epp, ns, labels),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
                {
                    "apiGroups": ["inference.networking.k8s.io"],
                    "resources": ["inferencepools"],
                    "verbs": ["get", "watch", "list"],
                },
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives"],
                    "verbs": ["get", "watch", "list"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(epp, ns, labels),
            "subjects": [{"kind": "ServiceAccount", "name": epp, "namespace": ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": epp},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(epp, ns, labels),
            "data": {"epp-config.yaml": config},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(epp, ns, labels),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": epp}},
                "template": {
                    "metadata": {
                        "labels": {"app": epp},
                        "annotations": {"modelplane.ai/epp-config-checksum": checksum},
                    },
                    "spec": {
                        "serviceAccountName": epp,
                        "containers": [
                            {
                                "name": "epp",
                                "image": EPP_IMAGE,
                                "args": [
                                    f"--pool-name={pool}",
                                    f"--pool-namespace={ns}",
                                    "--pool-group=inference.networking.k8s.io",
                                    "--config-file=/config/epp-config.yaml",
                                    f"--grpc-port={EPP_PORT}",
                                ],
                                "ports": [
                                    {"name": "grpc", "containerPort": EPP_PORT},
                                    {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT},
                                ],
                                "volumeMounts": [{"name": "config", "mountPath": "/config"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": epp}}],
                    },
                },
            },
        },
        # Not awaited: the provider would hold it until its Endpoints settle (10 s, and before the EPP's own
        # pods exist), delaying every replica's workloads; the EPP Deployment's await says the picker is up.
        with_annotations(
            k8s.service(
                epp,
                ns,
                labels,
                {
                    "selector": {"app": epp},
                    "ports": [
                        {"name": "grpc-ext-proc", "port": EPP_PORT, "targetPort": EPP_PORT, "appProtocol": "http2"}
                    ],
                },
            ),
            {SKIP_AWAIT: "true"},
        ),
    ]


def _pool_and_routes(replica: PlacedReplica, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The InferencePool over the replica's pods, and its HTTPRoutes by path and by host name."""
    ns, name = replica.key.namespace, replica.name
    pool, epp = f"{name}-pool", f"{name}-epp"
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool}
    return [
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": meta(pool, ns, labels),
            "spec": {
                "selector": {"matchLabels": {SERVING: name}},
                "targetPorts": [{"number": ENGINE_PORT}],
                "endpointPickerRef": {"name": epp, "port": {"number": EPP_PORT}, "failureMode": "FailOpen"},
            },
        },
        k8s.http_route(
            name,
            ns,
            labels,
            {
                "parentRefs": [{"name": WORKLOAD_GATEWAY, "namespace": SYSTEM_NAMESPACE}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": f"/{ns}/{name}/"}}],
                        "timeouts": {"request": "0s"},
                        "filters": [
                            {
                                "type": "URLRewrite",
                                "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                            }
                        ],
                        "backendRefs": [pool_ref],
                    }
                ],
            },
        ),
        # The same replica by host name, paths as they are: how the Envoy Gateway front door reaches it and
        # probes its /health (one Envoy cluster per service cannot give each backend its own path).
        k8s.http_route(
            host_route_name(name),
            ns,
            labels,
            {
                "parentRefs": [{"name": WORKLOAD_GATEWAY, "namespace": SYSTEM_NAMESPACE}],
                "hostnames": [replica_host(ns, name)],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                        "timeouts": {"request": "0s"},
                        "backendRefs": [pool_ref],
                    }
                ],
            },
        ),
    ]


def host_route_name(replica: str) -> str:
    """The replica's HTTPRoute by host name (`replica_host`) on its workload cluster's gateway."""
    return child_name(replica, "host")


def engine_flag(args: list[str], flag: str) -> str | None:
    """The value of `flag` in an engine's args (`--flag value` or `--flag=value`), None when absent."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
