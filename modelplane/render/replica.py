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

from collections.abc import Sequence
from typing import Any

from ..api.model_deployment import Member as MemberSpec
from ..api.model_deployment import ModelDeployment
from ..api.served_names import CACHE_MOUNT, serving_args
from ..scheduling import EngineAssignment, MemberAssignment, PlacedReplica
from ..scheduling.names import child_name
from .replica_routing import engine_flag, routing_objects
from .types import (
    ENGINE_PORT,
    GPU_TOLERATION,
    LWS_ROLE,
    MANAGED_BY,
    POOL_LABEL,
    SERVING,
    WORKLOAD,
    meta,
)

DECODE_PORT = 8001
PD_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"


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
    objects += routing_objects(replica, deployment, labels)
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
    value = engine_flag(spec.template.spec.engine.args or [], "--port")
    return int(value) if value and value.isdigit() else DECODE_PORT


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
