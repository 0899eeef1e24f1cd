"""One placed replica as Kubernetes objects on its workload cluster (spec §6).

Per engine a Deployment (Standalone) or a LeaderWorkerSet (Leader + Worker), and a
ResourceClaimTemplate per claiming member; per replica the routing surface: InferencePool,
endpoint picker (ServiceAccount, Role, RoleBinding, ConfigMap, Deployment, Service) and two
HTTPRoutes on the cluster's inference gateway: `/<ns>/<replica>/` (as the reference), and the
replica's host name (`replica_host`), through which the front door routes and health-checks it.

Objects live in the deployment's own namespace (the reference uses `default`), so same-named
deployments in two namespaces can never collide on a cluster.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from typing import Any

import yaml

from ..api.model_deployment import Member as MemberSpec
from ..api.model_deployment import ModelDeployment
from ..api.served_names import CACHE_MOUNT, serving_args
from ..scheduling import EngineAssignment, MemberAssignment, PlacedReplica
from ..scheduling.names import child_name
from . import objects as k8s
from .types import (
    GPU_TOLERATION,
    MANAGED_BY,
    POOL_LABEL,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY,
    meta,
    replica_host,
)

ENGINE_PORT = 8000
DECODE_PORT = 8001
EPP_PORT, EPP_HEALTH_PORT = 9002, 9003
EPP_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"
PD_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"

SERVING, WORKLOAD, LWS_ROLE = ("modelplane.ai/serving", "modelplane.ai/workload", "modelplane.ai/lws-role")


def replica_labels(replica: PlacedReplica, deployment: ModelDeployment) -> dict[str, str]:
    """Template labels plus the managed ones (managed labels win)."""
    return {
        **deployment.labels,
        "modelplane.ai/deployment": replica.key.name,
        "modelplane.ai/cluster": replica.cluster,
        "modelplane.ai/replica-index": str(replica.index),
    }


def claim_template_name(replica: str, engine: str, role: str) -> str:
    return child_name(replica, engine, role.lower(), "devices")


def render_replica(
    replica: PlacedReplica, deployment: ModelDeployment, cache_claim: str | None
) -> list[dict[str, Any]]:
    """Every object of one replica; `cache_claim` is the ModelCache PVC name when the deployment uses one."""
    labels = {**replica_labels(replica, deployment), **MANAGED_BY}
    mode = deployment.spec.serving_mode
    objects: list[dict[str, Any]] = []
    specs = {e.name: e for e in deployment.spec.engines}
    for engine in replica.engines:
        members = specs[engine.name].members
        for assignment in engine.members:
            if assignment.device_requests:
                objects.append(_claim_template(replica, engine, assignment, labels))
        if engine.members[0].role == "Standalone":
            objects.append(_deployment(replica, engine, members[0], cache_claim, labels, mode))
        else:
            objects.append(_leader_worker_set(replica, engine, members, cache_claim, labels, mode))
    objects += _routing(replica, deployment, labels)
    return objects


def _claim_template(
    replica: PlacedReplica, engine: EngineAssignment, member: MemberAssignment, labels: dict[str, str]
) -> dict[str, Any]:
    requests = []
    for request in member.device_requests:
        exactly: dict[str, Any] = {"deviceClassName": request.device_class_name, "count": request.count}
        if request.selectors:
            exactly["selectors"] = [{"cel": {"expression": expression}} for expression in request.selectors]
        requests.append({"name": request.name, "exactly": exactly})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": meta(claim_template_name(replica.name, engine.name, member.role), replica.key.namespace, labels),
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


def _container(
    spec: MemberSpec,
    serving: bool,
    claims: bool,
    cache_claim: str | None,
    port: int,
    extra_env: list[dict] | None = None,
    leader_or_single: bool = True,
) -> dict[str, Any]:
    engine = spec.template.spec.engine
    container: dict[str, Any] = {"name": "engine", "image": engine.image}
    if engine.command:
        container["command"] = list(engine.command)
    # the serving member's args name the model: the same rule tells the front door which name it answers
    container["args"] = serving_args(engine, bool(cache_claim)) if leader_or_single else list(engine.args or [])
    env = list(extra_env or []) + [e.model_dump(by_alias=True, exclude_none=True) for e in engine.env or []]
    if env:
        container["env"] = env
    if serving:
        container["ports"] = [{"containerPort": port}]
        container["readinessProbe"] = _probe(port)
    if claims:
        container["resources"] = {"claims": [{"name": "devices"}]}
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if cache_claim:
        mounts.append({"name": "model-cache", "mountPath": CACHE_MOUNT})
    container["volumeMounts"] = mounts
    return container


def _probe(port: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": port},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }


def _pod_spec(
    replica: PlacedReplica,
    engine: EngineAssignment,
    member: MemberAssignment,
    spec: MemberSpec,
    container: dict[str, Any],
    cache_claim: str | None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"nodeSelector": {POOL_LABEL: member.node_pool}, "tolerations": [dict(GPU_TOLERATION)]}
    if member.device_requests:
        pod["resourceClaims"] = [
            {
                "name": "devices",
                "resourceClaimTemplateName": claim_template_name(replica.name, engine.name, member.role),
            }
        ]
    secrets = spec.template.spec.image_pull_secrets
    if secrets:
        pod["imagePullSecrets"] = [{"name": s.name} for s in secrets]
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if cache_claim:
        volumes.append({"name": "model-cache", "persistentVolumeClaim": {"claimName": cache_claim}})
    pod["volumes"] = volumes
    pod["containers"] = [container]
    return pod


def _pod_metadata(spec: MemberSpec, managed: dict[str, str]) -> dict[str, Any]:
    user = spec.template.metadata
    out: dict[str, Any] = {"labels": {**((user.labels or {}) if user else {}), **managed}}
    if user and user.annotations:
        out["annotations"] = dict(user.annotations)
    return out


def _deployment(
    replica: PlacedReplica,
    engine: EngineAssignment,
    spec: MemberSpec,
    cache_claim: str | None,
    labels: dict[str, str],
    mode: str,
) -> dict[str, Any]:
    name = child_name(replica.name, engine.name)
    member = engine.members[0]
    port = _serving_port(spec, engine, mode)
    container = _container(spec, True, bool(member.device_requests), cache_claim, port)
    pod = _pod_spec(replica, engine, member, spec, container, cache_claim)
    managed = {SERVING: replica.name, WORKLOAD: name, **_pd_labels(replica, engine, mode)}
    _decorate_prefill_decode(pod, engine, mode, port)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, replica.key.namespace, labels),
        "spec": {
            "replicas": engine.copies,
            "selector": {"matchLabels": {WORKLOAD: name}},
            "template": {"metadata": _pod_metadata(spec, managed), "spec": pod},
        },
    }


def _leader_worker_set(
    replica: PlacedReplica,
    engine: EngineAssignment,
    specs: Sequence[MemberSpec],
    cache_claim: str | None,
    labels: dict[str, str],
    mode: str,
) -> dict[str, Any]:
    name = child_name(replica.name, engine.name)
    roles = {m.role: (m, s) for m, s in zip(engine.members, specs, strict=True)}
    leader, leader_spec = roles["Leader"]
    worker, worker_spec = roles["Worker"]
    rank = [
        {"name": "MODELPLANE_LEADER_ADDRESS", "value": "$(LWS_LEADER_ADDRESS)"},
        {"name": "MODELPLANE_RANK", "value": "$(LWS_WORKER_INDEX)"},
    ]
    port = _serving_port(leader_spec, engine, mode)
    leader_pod = _pod_spec(
        replica,
        engine,
        leader,
        leader_spec,
        _container(leader_spec, True, bool(leader.device_requests), cache_claim, port, rank),
        cache_claim,
    )
    _decorate_prefill_decode(leader_pod, engine, mode, port)
    worker_container = _container(
        worker_spec, False, bool(worker.device_requests), cache_claim, port, rank, leader_or_single=False
    )
    if not worker_container["args"]:
        del worker_container["args"]  # LWS: args only when set
    worker_pod = _pod_spec(replica, engine, worker, worker_spec, worker_container, cache_claim)
    worker_template: dict[str, Any] = {"spec": worker_pod}
    if worker_spec.template.metadata:
        worker_template["metadata"] = _pod_metadata(worker_spec, {})
    managed = {SERVING: replica.name, LWS_ROLE: "leader", **_pd_labels(replica, engine, mode)}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta(name, replica.key.namespace, labels),
        "spec": {
            "replicas": engine.copies,
            "leaderWorkerTemplate": {
                "size": 1 + worker.pods,
                "leaderTemplate": {"metadata": _pod_metadata(leader_spec, managed), "spec": leader_pod},
                "workerTemplate": worker_template,
            },
        },
    }


def _serving_port(spec: MemberSpec, engine: EngineAssignment, mode: str) -> int:
    """PrefillDecode moves the decode engine off 8000 (its `--port`, else 8001); the sidecar takes 8000."""
    if mode != "PrefillDecode" or engine.phase != "Decode":
        return ENGINE_PORT
    value = _flag(spec.template.spec.engine.args or [], "--port")
    return int(value) if value and value.isdigit() else DECODE_PORT


def _flag(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _pd_labels(replica: PlacedReplica, engine: EngineAssignment, mode: str) -> dict[str, str]:
    if mode != "PrefillDecode":
        return {}
    return {"llm-d.ai/role": (engine.phase or "").lower(), "llm-d.ai/inference-serving": "true", "app": replica.name}


def _decorate_prefill_decode(pod: dict[str, Any], engine: EngineAssignment, mode: str, port: int) -> None:
    """§6.7: NIXL side channel on both engines; the decode engine gets the routing sidecar on 8000."""
    if mode != "PrefillDecode":
        return
    container = pod["containers"][0]
    env = container.setdefault("env", [])
    names = {e["name"] for e in env}
    if "VLLM_NIXL_SIDE_CHANNEL_HOST" not in names:
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if "VLLM_NIXL_SIDE_CHANNEL_PORT" not in names:
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5557"})
    if engine.phase == "Decode":
        pod["containers"].append(
            {
                "name": "pd-sidecar",
                "image": PD_SIDECAR_IMAGE,
                "args": ["--secure-proxy=false", "--kv-connector=nixlv2", f"--vllm-port={port}"],
                "ports": [{"containerPort": ENGINE_PORT}],
                "readinessProbe": _probe(ENGINE_PORT),
            }
        )


def _block_size(deployment: ModelDeployment) -> int:
    """The KV block size the prefix-cache scorer must match: the serving engine's --block-size/--page-size."""
    engines = deployment.spec.engines
    serving = next((e for e in engines if e.phase == "Decode"), engines[0])
    member = next((m for m in serving.members if m.role in ("Standalone", "Leader")), serving.members[0])
    args = member.template.spec.engine.args or []
    value = _flag(args, "--block-size") or _flag(args, "--page-size")
    return int(value) if value and value.isdigit() else 16


def epp_config(deployment: ModelDeployment) -> str:
    plugins: list[dict[str, Any]] = [
        {
            "type": "approx-prefix-cache-producer",
            "parameters": {
                "autoTune": False,
                "blockSizeTokens": _block_size(deployment),
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
    if deployment.spec.serving_mode == "PrefillDecode":
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


def _routing(replica: PlacedReplica, deployment: ModelDeployment, labels: dict[str, str]) -> list[dict[str, Any]]:
    ns, name = replica.key.namespace, replica.name
    pool, epp = f"{name}-pool", f"{name}-epp"
    config = epp_config(deployment)
    checksum = hashlib.sha256(config.encode()).hexdigest()
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool}
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
        k8s.service(
            epp,
            ns,
            labels,
            {
                "selector": {"app": epp},
                "ports": [{"name": "grpc-ext-proc", "port": EPP_PORT, "targetPort": EPP_PORT, "appProtocol": "http2"}],
            },
        ),
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
