"""The offline Kubernetes validator (tests/k8s_validation.py) accepts good objects and rejects bad ones.

Positive cases are realistic objects of every kind the project generates; negative cases mutate
one of them in one way and name the message that must come back. A validator that passes
everything would fail the negative half, one that rejects everything the positive half.
"""
from __future__ import annotations

import copy
import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fetch_crds
import jsonschema
import k8s_validation as kv
import pytest

NS = "inference"


def meta(name: str, namespace: str | None = NS, **labels: str) -> dict:
    m: dict[str, Any] = {"name": name}
    if namespace:
        m["namespace"] = namespace
    if labels:
        m["labels"] = dict(labels)
    return m


# --- built-in kinds ------------------------------------------------------------------------

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {**meta("vllm-llama"), "labels": {"app.kubernetes.io/name": "vllm", "app": "vllm-llama"}},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "vllm-llama"}},
        "template": {
            "metadata": {"labels": {"app": "vllm-llama"}},
            "spec": {
                "containers": [{
                    "name": "server",
                    "image": "vllm/vllm-openai:v0.10.1",
                    "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"],
                    "ports": [{"name": "http", "containerPort": 8000}],
                    "env": [{"name": "HF_HOME", "value": "/cache"}],
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi"},
                        "limits": {"memory": "64Gi"},
                        "claims": [{"name": "gpus"}],
                    },
                    "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5},
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                }],
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-h100"}],
                "volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}],
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    },
}

RESOURCE_CLAIM_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": meta("two-h100"),
    "spec": {"spec": {"devices": {"requests": [{
        "name": "gpus",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
            "selectors": [{"cel": {"expression":
                "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}],
        },
    }]}}},
}

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": meta("vllm-llama"),
    "spec": {
        "type": "ClusterIP",
        "selector": {"app": "vllm-llama"},
        "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
    },
}

ENDPOINT_SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {**meta("external-llm-1"), "labels": {"kubernetes.io/service-name": "external-llm"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.12"], "conditions": {"ready": True}}],
    "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
}

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"team": "ml"}}}

PVC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": meta("model-cache"),
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "fast-ssd",
        "resources": {"requests": {"storage": "200Gi"}},
    },
}

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": meta("download-llama"),
    "spec": {
        "backoffLimit": 3,
        "ttlSecondsAfterFinished": 600,
        "template": {"spec": {
            "restartPolicy": "OnFailure",
            "containers": [{
                "name": "download",
                "image": "python:3.11-slim",
                "command": ["huggingface-cli", "download", "meta-llama/Llama-3.1-8B-Instruct"],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
            }],
        }},
    },
}

SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": meta("hf-token"),
    "type": "Opaque",
    "data": {"token": "aGZfc2VjcmV0"},
    "stringData": {"note": "plain text is fine here"},
}

SERVICE_ACCOUNT = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("epp")}

ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": meta("epp"),
    "rules": [{"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"],
               "verbs": ["get", "list", "watch"]},
              {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
}

ROLE_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": meta("epp"),
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "epp"},
    "subjects": [{"kind": "ServiceAccount", "name": "epp", "namespace": NS}],
}

CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": meta("epp-config"),
    "data": {"config.yaml": "plugins: []\n"},
}

# --- custom resources ----------------------------------------------------------------------

GATEWAY_CLASS = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "GatewayClass",
    "metadata": meta("envoy", namespace=None),
    "spec": {
        "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
        "description": "Envoy Gateway",
        "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "proxy",
                          "namespace": "envoy-gateway-system"},
    },
}

GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": meta("inference-gateway"),
    "spec": {
        "gatewayClassName": "envoy",
        "listeners": [
            {"name": "http", "protocol": "HTTP", "port": 80,
             "allowedRoutes": {"namespaces": {"from": "Same"}}},
            {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": "llm.example.com",
             "tls": {"mode": "Terminate", "certificateRefs": [{"name": "llm-cert"}]}},
        ],
    },
}

HTTP_ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": meta("llama"),
    "spec": {
        "parentRefs": [{"name": "inference-gateway", "namespace": NS, "sectionName": "http"}],
        "hostnames": ["llm.example.com"],
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/v1"},
                         "headers": [{"name": "x-model", "value": "llama"}]}],
            "backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                             "name": "llama", "port": 8000}],
            "timeouts": {"request": "300s", "backendRequest": "120s"},
        }],
    },
}

INFERENCE_POOL = {
    "apiVersion": "inference.networking.k8s.io/v1",
    "kind": "InferencePool",
    "metadata": meta("llama"),
    "spec": {
        "selector": {"matchLabels": {"app": "vllm-llama"}},
        "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "llama-epp", "port": {"number": 9002}, "failureMode": "FailClose"},
    },
}

INFERENCE_OBJECTIVE = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
    "kind": "InferenceObjective",
    "metadata": meta("llama-interactive"),
    "spec": {"poolRef": {"name": "llama"}, "priority": 10},
}

LEADER_WORKER_SET = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": meta("deepseek"),
    "spec": {
        "replicas": 1,
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {
            "size": 2,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {"metadata": {"labels": {"role": "leader"}}, "spec": {"containers": [{
                "name": "leader", "image": "vllm/vllm-openai:v0.10.1",
                "ports": [{"containerPort": 8000}],
                "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "512Gi"}},
            }]}},
            "workerTemplate": {"spec": {"containers": [{
                "name": "worker", "image": "vllm/vllm-openai:v0.10.1",
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }]}},
        },
    },
}

IP_ADDRESS_POOL = {
    "apiVersion": "metallb.io/v1beta1",
    "kind": "IPAddressPool",
    "metadata": meta("lan", namespace="metallb-system"),
    "spec": {"addresses": ["192.168.10.240-192.168.10.250", "10.0.50.0/28"], "autoAssign": True},
}

L2_ADVERTISEMENT = {
    "apiVersion": "metallb.io/v1beta1",
    "kind": "L2Advertisement",
    "metadata": meta("lan", namespace="metallb-system"),
    "spec": {"ipAddressPools": ["lan"], "interfaces": ["eth0"]},
}

ENVOY_PROXY = {
    "apiVersion": "gateway.envoyproxy.io/v1alpha1",
    "kind": "EnvoyProxy",
    "metadata": meta("proxy", namespace="envoy-gateway-system"),
    "spec": {
        "logging": {"level": {"default": "warn"}},
        "provider": {"type": "Kubernetes", "kubernetes": {
            "envoyDeployment": {"replicas": 2, "container": {
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}},
            "envoyService": {"type": "LoadBalancer", "annotations": {"metallb.io/address-pool": "lan"}},
        }},
    },
}

EG = "gateway.envoyproxy.io/v1alpha1"
BACKEND = {
    "apiVersion": EG, "kind": "Backend", "metadata": meta("llama-eu"),
    "spec": {"endpoints": [{"fqdn": {"hostname": "gateway-gpu-eu.modelplane-system.svc.cluster.local", "port": 80},
                            "hostname": "llama-eu.inference.replica.modelplane.internal"}]},
}
BACKEND_TRAFFIC_POLICY = {
    "apiVersion": EG, "kind": "BackendTrafficPolicy", "metadata": meta("llama"),
    "spec": {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "llama"}],
        "healthCheck": {
            "panicThreshold": 0,
            "active": {"type": "HTTP", "interval": "3s", "timeout": "1s", "http": {"path": "/health", "expectedStatuses": [200]}},
            "passive": {"consecutive5XxErrors": 3, "baseEjectionTime": "10s", "maxEjectionPercent": 100},
        },
        "retry": {"numRetries": 1, "retryOn": {"triggers": ["connect-failure", "reset"]}},
    },
}
HTTP_ROUTE_FILTER = {
    "apiVersion": EG, "kind": "HTTPRouteFilter", "metadata": meta("strip-llama"),
    "spec": {"urlRewrite": {"hostname": {"type": "Backend"},
                            "path": {"type": "ReplaceRegexMatch", "replaceRegexMatch": {"pattern": "^/llama/", "substitution": "/"}}}},
}
ENVOY_EXTENSION_POLICY = {
    "apiVersion": EG, "kind": "EnvoyExtensionPolicy", "metadata": meta("model-router"),
    "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"}],
             "lua": [{"type": "Inline", "inline": "function envoy_on_request(handle) end\n"}]},
}
CLIENT_TRAFFIC_POLICY = {
    "apiVersion": EG, "kind": "ClientTrafficPolicy", "metadata": meta("front-door"),
    "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"}],
             "connection": {"bufferLimit": "8Mi"}},
}

AI_GATEWAY_ROUTE = {
    "apiVersion": "aigateway.envoyproxy.io/v1beta1",
    "kind": "AIGatewayRoute",
    "metadata": meta("llm"),
    "spec": {
        "parentRefs": [{"name": "inference-gateway", "kind": "Gateway", "group": "gateway.networking.k8s.io"}],
        "rules": [{  # v0.7.0 (the version installed): rules have no `name` yet
            "matches": [{"headers": [{"type": "Exact", "name": "x-ai-eg-model", "value": "llama"}]}],
            "backendRefs": [{"name": "llama", "group": "inference.networking.k8s.io", "kind": "InferencePool"}],
            "timeouts": {"request": "300s", "backendRequest": "120s"},
        }],
    },
}

INGRESS_ROUTE = {
    "apiVersion": "traefik.io/v1alpha1",
    "kind": "IngressRoute",
    "metadata": meta("llm"),
    "spec": {
        "entryPoints": ["websecure"],
        "routes": [{"match": "Host(`llm.example.com`) && PathPrefix(`/v1`)", "kind": "Rule",
                    "services": [{"name": "vllm-llama", "port": 8000}],
                    "middlewares": [{"name": "strip-v1"}]}],
        "tls": {"secretName": "llm-cert"},
    },
}

MIDDLEWARE = {
    "apiVersion": "traefik.io/v1alpha1",
    "kind": "Middleware",
    "metadata": meta("strip-v1"),
    "spec": {"stripPrefix": {"prefixes": ["/v1"]}},
}

VALID = {
    "Deployment(resourceClaims)": DEPLOYMENT,
    "ResourceClaimTemplate(v1 exactly)": RESOURCE_CLAIM_TEMPLATE,
    "Service": SERVICE,
    "EndpointSlice": ENDPOINT_SLICE,
    "Namespace": NAMESPACE,
    "PersistentVolumeClaim": PVC,
    "Job": JOB,
    "Secret": SECRET,
    "ServiceAccount": SERVICE_ACCOUNT,
    "Role": ROLE,
    "RoleBinding": ROLE_BINDING,
    "ConfigMap": CONFIG_MAP,
    "GatewayClass": GATEWAY_CLASS,
    "Gateway": GATEWAY,
    "HTTPRoute": HTTP_ROUTE,
    "InferencePool(v1)": INFERENCE_POOL,
    "InferenceObjective": INFERENCE_OBJECTIVE,
    "LeaderWorkerSet": LEADER_WORKER_SET,
    "IPAddressPool": IP_ADDRESS_POOL,
    "L2Advertisement": L2_ADVERTISEMENT,
    "EnvoyProxy": ENVOY_PROXY,
    "Backend": BACKEND,
    "BackendTrafficPolicy": BACKEND_TRAFFIC_POLICY,
    "HTTPRouteFilter": HTTP_ROUTE_FILTER,
    "EnvoyExtensionPolicy": ENVOY_EXTENSION_POLICY,
    "ClientTrafficPolicy": CLIENT_TRAFFIC_POLICY,
    "AIGatewayRoute": AI_GATEWAY_ROUTE,
    "IngressRoute": INGRESS_ROUTE,
    "Middleware": MIDDLEWARE,
}


@pytest.mark.parametrize("obj", VALID.values(), ids=VALID.keys())
def test_valid_objects_pass(obj: dict) -> None:
    before = copy.deepcopy(obj)
    assert kv.validate_object(obj) == []
    assert obj == before, "validation must not modify (e.g. default) the caller's object"


def test_every_valid_sample_together_passes_assert_valid() -> None:
    kv.assert_valid(list(VALID.values()))


def test_v1beta1_gateway_api_and_rbac_path_segment_names_are_accepted() -> None:
    gateway = copy.deepcopy(GATEWAY)
    gateway["apiVersion"] = "gateway.networking.k8s.io/v1beta1"
    role = copy.deepcopy(ROLE)
    role["metadata"]["name"] = "system:modelplane:epp"
    assert kv.validate_object(gateway) == []
    assert kv.validate_object(role) == []


# --- negative cases ------------------------------------------------------------------------

def mutated(obj: dict, change: Callable[[dict], Any]) -> dict:
    out = copy.deepcopy(obj)
    change(out)
    return out


def _container(o: dict) -> dict:
    return o["spec"]["template"]["spec"]["containers"][0]


def _request(o: dict) -> dict:
    return o["spec"]["spec"]["devices"]["requests"][0]


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Set a dotted path (integers index lists)."""
    def change(o: dict) -> None:
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in head:
            o = o[p]
        o[last] = value
    return change


def _drop(path: str) -> Callable[[dict], None]:
    def change(o: dict) -> None:
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in head:
            o = o[p]
        del o[last]
    return change


def _v1beta1_request(o: dict) -> None:
    req = _request(o)
    exactly = req.pop("exactly")
    req.update(deviceClassName=exactly["deviceClassName"], count=2)


def _both_exactly_and_first_available(o: dict) -> None:
    _request(o)["firstAvailable"] = [{"name": "h100", "deviceClassName": "gpu.nvidia.com"}]


def _duplicate_container(o: dict) -> None:
    spec = o["spec"]["template"]["spec"]
    spec["containers"].append({**spec["containers"][0], "ports": []})


def _duplicate_listener(o: dict) -> None:
    o["spec"]["listeners"].append({**o["spec"]["listeners"][0], "port": 8080})


def _two_inference_pools(o: dict) -> None:
    o["spec"]["rules"][0]["backendRefs"].append(
        {"name": "other", "group": "inference.networking.k8s.io", "kind": "InferencePool"})


D = "Deployment/inference/vllm-llama"
C0 = "spec.template.spec.containers[0]"
RCT = "ResourceClaimTemplate/inference/two-h100"
REQ0 = "spec.spec.devices.requests[0]"

# (case id, object, expected substring of one message: object, field path and the gist)
INVALID: list[tuple[str, dict, str]] = [
    # built-in kinds: schema
    ("unknown field", mutated(DEPLOYMENT, _set("spec.replica", 2)), f"{D}: spec: Additional properties are not allowed ('replica' was unexpected)"),
    ("unknown metadata field", mutated(SERVICE, _set("metadata.label", {"a": "b"})), "Service/inference/vllm-llama: metadata: Additional properties are not allowed ('label'"),
    ("wrong type replicas", mutated(DEPLOYMENT, _set("spec.replicas", "two")), f"{D}: spec.replicas: 'two' is not of type 'integer'"),
    ("wrong type containerPort", mutated(DEPLOYMENT, lambda o: _container(o)["ports"][0].update(containerPort="8000")), f"{D}: {C0}.ports[0].containerPort: '8000' is not of type 'integer'"),
    ("bad quantity 10GB", mutated(DEPLOYMENT, lambda o: _container(o)["resources"]["limits"].update(memory="10GB")), f'{D}: {C0}.resources.limits.memory: \'10GB\' is not a valid Kubernetes quantity'),
    ("bad quantity PVC 100Gb", mutated(PVC, _set("spec.resources.requests.storage", "100Gb")), "PersistentVolumeClaim/inference/model-cache: spec.resources.requests.storage: '100Gb' is not a valid Kubernetes quantity"),
    ("bad base64 Secret.data", mutated(SECRET, _set("data.token", "not base64!")), "Secret/inference/hf-token: data.token: 'not base64!' is not a 'byte'"),
    ("missing required selector", mutated(DEPLOYMENT, _drop("spec.selector")), f"{D}: spec: 'selector' is a required property"),
    ("missing container name", mutated(DEPLOYMENT, lambda o: _container(o).pop("name")), f"{D}: {C0}: 'name' is a required property"),
    ("missing metadata.name", mutated(CONFIG_MAP, _drop("metadata.name")), "ConfigMap/inference/<no name>: metadata.name: required"),
    ("duplicate container names", mutated(DEPLOYMENT, _duplicate_container), f"{D}: spec.template.spec.containers: duplicate entries in list-map (keys name='server')"),
    ("duplicate env names", mutated(DEPLOYMENT, lambda o: _container(o)["env"].append({"name": "HF_HOME", "value": "/x"})), f"{D}: {C0}.env: duplicate entries in list-map"),
    ("duplicate service ports (protocol defaulted)", mutated(SERVICE, lambda o: o["spec"]["ports"].append({"name": "again", "port": 8000})), "Service/inference/vllm-llama: spec.ports: duplicate entries in list-map (keys port=8000, protocol='TCP')"),
    ("v1beta1 shape under resource.k8s.io/v1", mutated(RESOURCE_CLAIM_TEMPLATE, _v1beta1_request), f"{RCT}: {REQ0}: Additional properties are not allowed ('count', 'deviceClassName' were unexpected)"),
    ("RCT count as string", mutated(RESOURCE_CLAIM_TEMPLATE, lambda o: _request(o)["exactly"].update(count="2")), f"{RCT}: {REQ0}.exactly.count: '2' is not of type 'integer'"),
    ("RCT missing deviceClassName", mutated(RESOURCE_CLAIM_TEMPLATE, lambda o: _request(o)["exactly"].pop("deviceClassName")), f"{RCT}: {REQ0}.exactly: 'deviceClassName' is a required property"),
    ("unknown kind", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta("w")}, "Widget/inference/w: unknown apiVersion/kind example.com/v1 Widget"),
    ("kind typo", mutated(DEPLOYMENT, _set("kind", "Deploymnet")), "Deploymnet/inference/vllm-llama: unknown apiVersion/kind apps/v1 Deploymnet"),
    ("built-in kind under a foreign group", mutated(DEPLOYMENT, _set("apiVersion", "apps.example.com/v1")), "unknown apiVersion/kind apps.example.com/v1 Deployment"),
    ("sub-type is not a kind", {"apiVersion": "v1", "kind": "PodTemplateSpec", "metadata": meta("x")}, "unknown apiVersion/kind v1 PodTemplateSpec"),
    ("resource.k8s.io/v1 needs a 1.34 kind", {**RESOURCE_CLAIM_TEMPLATE, "apiVersion": "resource.k8s.io/v1alpha9"}, "unknown apiVersion/kind resource.k8s.io/v1alpha9 ResourceClaimTemplate"),
    ("no apiVersion", {"kind": "ConfigMap", "metadata": meta("x")}, "ConfigMap/inference/x: apiVersion and kind are required"),
    # built-in kinds: server rules the OpenAPI schema lacks
    ("bad name", mutated(CONFIG_MAP, _set("metadata.name", "EPP_Config")), "ConfigMap/inference/EPP_Config: metadata.name: 'EPP_Config' is not a DNS-1123 subdomain"),
    ("service name not DNS-1035", mutated(SERVICE, _set("metadata.name", "1llama")), "Service/inference/1llama: metadata.name: '1llama' is not a DNS-1035 label"),
    ("bad label value", mutated(DEPLOYMENT, _set("metadata.labels.app", "not valid!")), f'{D}: metadata.labels.app: invalid label value'),
    ("bad label key", mutated(NAMESPACE, _set("metadata.labels", {"-team": "ml"})), 'Namespace/inference: metadata.labels["-team"]: invalid key'),
    ("selector does not match template", mutated(DEPLOYMENT, _set("spec.selector.matchLabels.app", "other")), f"{D}: spec.template.metadata.labels: selector matchLabels app='other' does not match"),
    ("container without image", mutated(DEPLOYMENT, lambda o: _container(o).pop("image")), f"{D}: {C0}.image: required"),
    ("containerPort out of range", mutated(DEPLOYMENT, lambda o: _container(o)["ports"][0].update(containerPort=70000)), f"{D}: {C0}.ports[0].containerPort: 70000 is not in 1-65535"),
    ("claim not in pod resourceClaims", mutated(DEPLOYMENT, lambda o: _container(o)["resources"]["claims"][0].update(name="gpu")), f"{D}: {C0}.resources.claims[0].name: 'gpu' is not one of the pod's resourceClaims"),
    ("pod claim with no source", mutated(DEPLOYMENT, lambda o: o["spec"]["template"]["spec"]["resourceClaims"][0].pop("resourceClaimTemplateName")), f"{D}: spec.template.spec.resourceClaims[0]: exactly one of resourceClaimName or resourceClaimTemplateName"),
    ("Job restartPolicy Always", mutated(JOB, _set("spec.template.spec.restartPolicy", "Always")), "Job/inference/download-llama: spec.template.spec.restartPolicy: 'Always' is not one of ['Never', 'OnFailure']"),
    ("Service type typo", mutated(SERVICE, _set("spec.type", "LoadBalacer")), "Service/inference/vllm-llama: spec.type: 'LoadBalacer' is not one of"),
    ("PVC without accessModes", mutated(PVC, _drop("spec.accessModes")), "PersistentVolumeClaim/inference/model-cache: spec.accessModes: at least one access mode is required"),
    ("EndpointSlice bad address", mutated(ENDPOINT_SLICE, _set("endpoints.0.addresses", ["10.0.0.300"])), "EndpointSlice/inference/external-llm-1: endpoints[0].addresses[0]: '10.0.0.300' is not a valid IPv4 address"),
    ("EndpointSlice missing addressType", mutated(ENDPOINT_SLICE, _drop("addressType")), "EndpointSlice/inference/external-llm-1: <root>: 'addressType' is a required property"),
    ("RCT exactly and firstAvailable", mutated(RESOURCE_CLAIM_TEMPLATE, _both_exactly_and_first_available), f"{RCT}: {REQ0}: exactly one of 'exactly' or 'firstAvailable' is required"),
    ("RCT bad allocationMode", mutated(RESOURCE_CLAIM_TEMPLATE, lambda o: _request(o)["exactly"].update(allocationMode="Some")), f"{RCT}: {REQ0}.exactly.allocationMode: 'Some' is not one of"),
    ("RCT selector CEL syntax", mutated(RESOURCE_CLAIM_TEMPLATE, lambda o: _request(o)["exactly"]["selectors"][0]["cel"].update(expression="device.driver ==")), f"{RCT}: {REQ0}.exactly.selectors[0].cel.expression: does not compile"),
    ("Role rule without verbs", mutated(ROLE, lambda o: o["rules"][0].pop("verbs")), "Role/inference/epp: rules[0]: 'verbs' is a required property"),
    ("ServiceAccount unknown field", mutated(SERVICE_ACCOUNT, _set("secret", [])), "ServiceAccount/inference/epp: <root>: Additional properties are not allowed ('secret' was unexpected)"),
    ("RoleBinding roleRef missing name", mutated(ROLE_BINDING, _drop("roleRef.name")), "RoleBinding/inference/epp: roleRef: 'name' is a required property"),
    # custom resources: schema
    ("CR unknown field", mutated(GATEWAY, _set("spec.listener", [])), "Gateway/inference/inference-gateway: spec: Additional properties are not allowed ('listener' was unexpected)"),
    ("CR unknown metadata field", mutated(GATEWAY, _set("metadata.annotation", {})), "Gateway/inference/inference-gateway: metadata: Additional properties are not allowed ('annotation'"),
    ("CR bad name", mutated(HTTP_ROUTE, _set("metadata.name", "Llama")), "HTTPRoute/inference/Llama: metadata.name: 'Llama' is not a DNS-1123 subdomain"),
    ("HTTPRoute invalid path match type", mutated(HTTP_ROUTE, lambda o: o["spec"]["rules"][0]["matches"][0]["path"].update(type="Prefix")), "HTTPRoute/inference/llama: spec.rules[0].matches[0].path.type: 'Prefix' is not one of ['Exact', 'PathPrefix', 'RegularExpression']"),
    ("HTTPRoute timeout pattern", mutated(HTTP_ROUTE, lambda o: o["spec"]["rules"][0]["timeouts"].update(request="5 min")), "HTTPRoute/inference/llama: spec.rules[0].timeouts.request: '5 min' does not match"),
    ("Gateway port 0", mutated(GATEWAY, _set("spec.listeners.0.port", 0)), "Gateway/inference/inference-gateway: spec.listeners[0].port: 0 is less than the minimum of 1"),
    ("Gateway duplicate listener names", mutated(GATEWAY, _duplicate_listener), "Gateway/inference/inference-gateway: spec.listeners: duplicate entries in list-map (keys name='http')"),
    ("GatewayClass missing controllerName", mutated(GATEWAY_CLASS, _drop("spec.controllerName")), "GatewayClass/envoy: spec: 'controllerName' is a required property"),
    ("InferencePool without targetPorts", mutated(INFERENCE_POOL, _drop("spec.targetPorts")), "InferencePool/inference/llama: spec: 'targetPorts' is a required property"),
    ("InferencePool targetPorts as int", mutated(INFERENCE_POOL, _set("spec.targetPorts", 8000)), "InferencePool/inference/llama: spec.targetPorts: 8000 is not of type 'array'"),
    ("InferenceObjective without poolRef", mutated(INFERENCE_OBJECTIVE, _drop("spec.poolRef")), "InferenceObjective/inference/llama-interactive: spec: 'poolRef' is a required property"),
    ("LWS restartPolicy enum", mutated(LEADER_WORKER_SET, _set("spec.leaderWorkerTemplate.restartPolicy", "Always")), "LeaderWorkerSet/inference/deepseek: spec.leaderWorkerTemplate.restartPolicy: 'Always' is not one of"),
    ("LWS size as string", mutated(LEADER_WORKER_SET, _set("spec.leaderWorkerTemplate.size", "2")), "LeaderWorkerSet/inference/deepseek: spec.leaderWorkerTemplate.size: '2' is not of type 'integer'"),
    ("LWS bad quantity in worker", mutated(LEADER_WORKER_SET, _set("spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.resources.limits.memory", "64GB")), "LeaderWorkerSet/inference/deepseek: spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.limits.memory: '64GB'"),
    ("LWS worker without image (1.34 PodTemplate)", mutated(LEADER_WORKER_SET, lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].pop("image")), "LeaderWorkerSet/inference/deepseek: spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image: required"),
    ("IPAddressPool addresses not a list", mutated(IP_ADDRESS_POOL, _set("spec.addresses", "10.0.0.0/24")), "IPAddressPool/metallb-system/lan: spec.addresses: '10.0.0.0/24' is not of type 'array'"),
    ("L2Advertisement pools not a list", mutated(L2_ADVERTISEMENT, _set("spec.ipAddressPools", "lan")), "L2Advertisement/metallb-system/lan: spec.ipAddressPools: 'lan' is not of type 'array'"),
    ("EnvoyProxy provider type enum", mutated(ENVOY_PROXY, _set("spec.provider.type", "Docker")), "EnvoyProxy/envoy-gateway-system/proxy: spec.provider.type: 'Docker' is not one of"),
    ("EnvoyProxy bad quantity", mutated(ENVOY_PROXY, _set("spec.provider.kubernetes.envoyDeployment.container.resources.requests.memory", "512MB")), "EnvoyProxy/envoy-gateway-system/proxy: spec.provider.kubernetes.envoyDeployment.container.resources.requests.memory: '512MB'"),
    ("Middleware prefixes not a list", mutated(MIDDLEWARE, _set("spec.stripPrefix.prefixes", "/v1")), "Middleware/inference/strip-v1: spec.stripPrefix.prefixes: '/v1' is not of type 'array'"),
    ("IngressRoute unknown field", mutated(INGRESS_ROUTE, _set("spec.entrypoints", ["web"])), "IngressRoute/inference/llm: spec: Additional properties are not allowed ('entrypoints' was unexpected)"),
    # custom resources: only the CEL rules catch these
    ("HTTPRoute path not starting with /", mutated(HTTP_ROUTE, lambda o: o["spec"]["rules"][0]["matches"][0]["path"].update(value="v1")), "HTTPRoute/inference/llama: spec.rules[0].matches[0].path: value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"),
    ("HTTPRoute backendRequest > request", mutated(HTTP_ROUTE, lambda o: o["spec"]["rules"][0]["timeouts"].update(backendRequest="600s")), "HTTPRoute/inference/llama: spec.rules[0].timeouts: backendRequest timeout cannot be longer than request timeout"),
    ("HTTPRoute duplicate parentRefs (namespace escaping)", mutated(HTTP_ROUTE, lambda o: o["spec"]["parentRefs"].append(dict(o["spec"]["parentRefs"][0]))), "HTTPRoute/inference/llama: spec.parentRefs: sectionName must be unique when parentRefs includes 2 or more references to the same parent"),
    ("Gateway HTTP listener with tls", mutated(GATEWAY, lambda o: o["spec"]["listeners"][0].update(tls={"mode": "Terminate", "certificateRefs": [{"name": "c"}]})), "Gateway/inference/inference-gateway: spec.listeners: tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"),
    ("InferencePool two targetPorts", mutated(INFERENCE_POOL, _set("spec.targetPorts", [{"number": 8000}, {"number": 8000}])), "InferencePool/inference/llama: spec.targetPorts: [{'number': 8000}, {'number': 8000}] is too long"),  # v1.0.1: one port
    ("InferencePool picker without port (CEL after defaulting kind)", mutated(INFERENCE_POOL, _drop("spec.endpointPickerRef.port")), "InferencePool/inference/llama: spec.endpointPickerRef: port is required when kind is 'Service'"),
    ("Backend fqdn mixed with ip", mutated(BACKEND, lambda o: o["spec"]["endpoints"].append({"ip": {"address": "10.0.0.7", "port": 80}})), "Backend/inference/llama-eu: spec.endpoints: fqdn addresses cannot be mixed with other address types"),
    ("Backend endpoint with fqdn and ip", mutated(BACKEND, _set("spec.endpoints.0.ip", {"address": "10.0.0.7", "port": 80})), "Backend/inference/llama-eu: spec.endpoints[0]: only one of fqdn, ip or unix can be specified"),
    ("BackendTrafficPolicy retry trigger typo", mutated(BACKEND_TRAFFIC_POLICY, _set("spec.retry.retryOn.triggers", ["connect-failures"])), "BackendTrafficPolicy/inference/llama: spec.retry.retryOn.triggers[0]: 'connect-failures' is not one of"),
    ("BackendTrafficPolicy targets a Service", mutated(BACKEND_TRAFFIC_POLICY, _set("spec.targetRefs.0", {"group": "", "kind": "Service", "name": "x"})), "BackendTrafficPolicy/inference/llama: spec: this policy can only have a targetRefs[*].kind of Gateway/HTTPRoute"),
    ("HTTPRouteFilter regex type without regex", mutated(HTTP_ROUTE_FILTER, _drop("spec.urlRewrite.path.replaceRegexMatch")), "HTTPRouteFilter/inference/strip-llama: spec.urlRewrite.path: If HTTPPathModifier type is ReplaceRegexMatch, replaceRegexMatch field needs to be set."),
    ("EnvoyExtensionPolicy inline Lua without code", mutated(ENVOY_EXTENSION_POLICY, lambda o: o["spec"]["lua"][0].pop("inline")), "EnvoyExtensionPolicy/inference/model-router: spec.lua[0]: Exactly one of inline or valueRef must be set"),
    ("ClientTrafficPolicy targets an HTTPRoute", mutated(CLIENT_TRAFFIC_POLICY, _set("spec.targetRefs.0.kind", "HTTPRoute")), "ClientTrafficPolicy/inference/front-door: spec: this policy can only have a targetRefs[*].kind of Gateway"),
    ("AIGatewayRoute two InferencePools", mutated(AI_GATEWAY_ROUTE, _two_inference_pools), "AIGatewayRoute/inference/llm: spec.rules[0]: only one InferencePool backend is allowed per rule"),
    ("AIGatewayRoute group without kind", mutated(AI_GATEWAY_ROUTE, lambda o: o["spec"]["rules"][0]["backendRefs"][0].pop("kind")), "AIGatewayRoute/inference/llm: spec.rules[0].backendRefs[0]: group and kind must be specified together"),
]


@pytest.mark.parametrize(("obj", "expected"), [(o, e) for _, o, e in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_objects_are_rejected(obj: dict, expected: str) -> None:
    problems = kv.validate_object(obj)
    assert problems, "the validator accepted a broken object"
    assert any(expected in p for p in problems), "\n".join(problems)


def test_every_valid_kind_has_a_negative_case() -> None:
    """Each kind is shown to be rejected at least once: the validator is not vacuous for it."""
    assert {obj["kind"] for obj in VALID.values()} <= {obj.get("kind") for _, obj, _ in INVALID}


def test_messages_name_object_and_field_path() -> None:
    [problem] = kv.validate_object(mutated(DEPLOYMENT, lambda o: _container(o)["resources"]["limits"].update(memory="10GB")))
    assert problem.startswith(f"{D}: {C0}.resources.limits.memory: ")


def test_all_problems_are_reported_not_only_the_first() -> None:
    def break_twice(o: dict) -> None:
        o["spec"]["replicas"] = "two"
        _container(o)["resources"]["requests"]["cpu"] = "lots"
    problems = kv.validate_object(mutated(DEPLOYMENT, break_twice))
    assert any("spec.replicas" in p for p in problems)
    assert any("resources.requests.cpu" in p for p in problems)


def test_assert_valid_lists_every_problem_of_every_object() -> None:
    kv.load_crds()  # the InferencePool's problem needs the CRDs (skips without them)
    bad_secret = mutated(SECRET, _set("data.token", "%%%"))
    bad_pool = mutated(INFERENCE_POOL, _drop("spec.targetPorts"))
    with pytest.raises(AssertionError) as info:
        kv.assert_valid([DEPLOYMENT, bad_secret, bad_pool, SERVICE])
    text = str(info.value)
    assert "2 problem(s) in 4 Kubernetes object(s)" in text
    assert "Secret/inference/hf-token: data.token" in text
    assert "InferencePool/inference/llama: spec: 'targetPorts' is a required property" in text


def test_assert_valid_rejects_two_objects_with_the_same_identity() -> None:
    with pytest.raises(AssertionError, match="objects 0 and 2 have the same group, kind, namespace and name"):
        kv.assert_valid([SERVICE, CONFIG_MAP, SERVICE])


def test_crd_defaults_are_applied_before_the_checks() -> None:
    # InferencePool.spec.endpointPickerRef.kind defaults to Service, and a CEL rule then requires
    # a port: without defaulting, the rule would see no kind and a broken object would pass.
    no_port = mutated(INFERENCE_POOL, _drop("spec.endpointPickerRef.port"))
    before = copy.deepcopy(no_port)
    assert any("port is required when kind is 'Service'" in p for p in kv.validate_object(no_port))
    assert no_port == before, "defaults are applied to a copy"
    no_port["spec"]["endpointPickerRef"]["kind"] = "Deployment"  # a non-Service picker needs no port
    assert kv.validate_object(no_port) == []


def test_pulumi_mock_floats_are_rejected_until_converted() -> None:
    floats = mutated(DEPLOYMENT, _set("spec.replicas", 2.5))
    assert any("spec.replicas" in p for p in kv.validate_object(floats))
    assert kv.validate_object(kv.integral_floats_to_int(mutated(INFERENCE_POOL, _set("spec.targetPorts", [{"number": 8000.0}])))) == []


# --- the CRD directory, the CRDs and the CEL rules ---------------------------------------

EXPECTED_CRD_KINDS = {
    ("gateway.networking.k8s.io/v1", "GatewayClass"), ("gateway.networking.k8s.io/v1", "Gateway"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1beta1", "GatewayClass"), ("gateway.networking.k8s.io/v1beta1", "Gateway"),
    ("gateway.networking.k8s.io/v1beta1", "HTTPRoute"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("metallb.io/v1beta1", "IPAddressPool"), ("metallb.io/v1beta1", "L2Advertisement"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy"), ("gateway.envoyproxy.io/v1alpha1", "Backend"),
    ("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy"), ("gateway.envoyproxy.io/v1alpha1", "HTTPRouteFilter"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyExtensionPolicy"), ("gateway.envoyproxy.io/v1alpha1", "ClientTrafficPolicy"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyPatchPolicy"),
    ("aigateway.envoyproxy.io/v1alpha1", "AIGatewayRoute"), ("aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute"),
    ("traefik.io/v1alpha1", "IngressRoute"), ("traefik.io/v1alpha1", "Middleware"),
}


def fake_pin(path: str, content: bytes) -> fetch_crds.Pin:
    return fetch_crds.Pin(path, f"{fetch_crds.UPSTREAM}/o/r/{'0' * 40}/{path}", "v1.0.0", hashlib.sha256(content).hexdigest())


FAKE = {"a/example.com_as.yaml": b"kind: A\n", "b/example.com_bs.yaml": b"kind: B\n"}
FAKE_PINS = [fake_pin(path, content) for path, content in FAKE.items()]
A, B = FAKE


def lookup(tmp_path: Path, *, shared: dict[str, bytes] = {}, cache: dict[str, bytes] = {},
           env_dir: bool = False, make_dirs: bool = True) -> kv.CRDSource:
    """find_crd_dir for a clone at tmp_path/modelplane, the fake pins, and these files in each place."""
    places = {"shared": tmp_path / "shared" / "k8s-crds", "cache": tmp_path / "cache"}
    for place, files in (("shared", shared), ("cache", cache)):
        if make_dirs:
            places[place].mkdir(parents=True, exist_ok=True)
        for path, content in files.items():
            (places[place] / path).parent.mkdir(parents=True, exist_ok=True)
            (places[place] / path).write_bytes(content)
    env = {"MODELPLANE_CRD_CACHE": str(places["cache"])}
    if env_dir:
        env["MODELPLANE_K8S_CRD_DIR"] = str(tmp_path / "elsewhere")
    return kv.find_crd_dir(env, repo=tmp_path / "modelplane", pins=FAKE_PINS)


def test_the_env_var_wins_even_when_its_directory_is_missing(tmp_path: Path) -> None:
    found = lookup(tmp_path, shared=FAKE, cache=FAKE, env_dir=True)
    assert (found.path, found.origin, found.missing) == (tmp_path / "elsewhere", "MODELPLANE_K8S_CRD_DIR", ())


@pytest.mark.parametrize(("shared", "cache", "expected"), [
    (FAKE, FAKE, "shared"),
    ({}, FAKE, "cache"),
    ({A: FAKE[A]}, FAKE, "cache"),  # the cache alone has every file: no need to mix
    (FAKE, {A: FAKE[A]}, "shared"),
    ({A: b"edited\n", B: FAKE[B]}, FAKE, "cache"),  # a good copy beats an edited one in an earlier place
], ids=["both complete: ../shared", "only the cache", "the cache has more", "../shared has more", "edited in ../shared"])
def test_one_place_with_every_file_is_the_directory(tmp_path: Path, shared: dict, cache: dict, expected: str) -> None:
    found = lookup(tmp_path, shared=shared, cache=cache)
    assert found.path == {"shared": tmp_path / "shared" / "k8s-crds", "cache": tmp_path / "cache"}[expected]
    assert found.missing == ()
    assert kv.pinned_files(found.path, FAKE_PINS) == [found.path / A, found.path / B]  # digests checked


def test_files_split_between_the_places_are_found_file_by_file(tmp_path: Path) -> None:
    found = lookup(tmp_path, shared={A: FAKE[A], B: b"edited\n"}, cache={B: FAKE[B]})
    assert found.path is not None and found.path.parent == Path(tempfile.gettempdir())
    assert found.origin == "per file: 1 from ../shared beside the repository, 1 from user cache"
    assert (found.path / A).resolve() == tmp_path / "shared" / "k8s-crds" / A
    assert (found.path / B).resolve() == tmp_path / "cache" / B  # the good copy, not the edited one
    assert kv.pinned_files(found.path, FAKE_PINS) == [found.path / A, found.path / B]


def test_files_found_nowhere_are_listed_and_the_others_used(tmp_path: Path) -> None:
    found = lookup(tmp_path, cache={A: FAKE[A]})
    assert (found.path, found.missing) == (tmp_path / "cache", (B,))
    assert found.origin == "user cache; 1 pinned files found nowhere, their custom resources skip"
    nothing = lookup(tmp_path / "empty", make_dirs=False)
    assert (nothing.path, nothing.origin, nothing.missing) == (None, "nowhere", (A, B))


def test_a_file_only_found_with_another_digest_is_used_so_that_loading_names_it(tmp_path: Path) -> None:
    found = lookup(tmp_path, shared={A: FAKE[A]}, cache={A: FAKE[A], B: b"edited\n"})
    assert found.path == tmp_path / "cache" and found.missing == ()
    with pytest.raises(kv.CRDDigestError, match=re.escape(str(tmp_path / "cache" / B)) + " is not the pinned"):
        kv.pinned_files(found.path, FAKE_PINS)


def test_copies_are_listed_good_first(tmp_path: Path) -> None:
    lookup(tmp_path, shared={A: b"edited\n"}, cache=FAKE)
    copies = kv.find_crd_files({"MODELPLANE_CRD_CACHE": str(tmp_path / "cache")}, repo=tmp_path / "modelplane", pins=FAKE_PINS)
    assert copies[A] == kv.CRDCopies((tmp_path / "cache" / A,), (tmp_path / "shared" / "k8s-crds" / A,))
    assert copies[B].chosen == tmp_path / "cache" / B


def test_kinds_of_files_found_nowhere_skip_and_the_rest_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The looked-up CRD_DIR may lack files: their groups' unknown kinds skip, other kinds are checked."""
    kv.load_crds()  # needs the real Gateway API CRDs (skips without)
    partial = tmp_path / "partial"
    kept = [pin for pin in kv.PINS if pin.path.startswith("gateway-api-v")]
    for pin in kept:
        (partial / pin.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kv.CRD_DIR / pin.path, partial / pin.path)
    missing = tuple(pin.path for pin in kv.PINS if pin not in kept)
    monkeypatch.setattr(kv, "CRD_DIR", partial)
    monkeypatch.setattr(kv, "CRD_SOURCE", kv.CRDSource(partial, "test", missing))
    assert kv.validate_object(GATEWAY, crd_dir=partial) == []
    assert "spec.listeners[0].port" in kv.validate_object(mutated(GATEWAY, _set("spec.listeners.0.port", 0)), crd_dir=partial)[0]
    with pytest.raises(pytest.skip.Exception) as skipped:
        kv.validate_object(BACKEND, crd_dir=partial)
    assert skipped.value.msg == kv.MISSING_CRDS
    with pytest.raises(pytest.skip.Exception):
        kv.require_all_crds(partial)
    assert "unknown apiVersion/kind" in kv.validate_object(mutated(GATEWAY, _set("kind", "Gateway2")), crd_dir=partial)[0]
    # Another directory with the same files is not the looked-up one: there, a missing file is an error.
    other = tmp_path / "other"
    shutil.copytree(partial, other)
    with pytest.raises(kv.CRDDirectoryMissingError, match=f"lacks {len(missing)} of the {len(kv.PINS)} pinned files"):
        kv.load_crds(other)


def test_without_crds_custom_resources_skip_and_built_in_kinds_are_still_checked() -> None:
    assert kv.validate_object(SERVICE, crd_dir=None) == []
    assert kv.validate_object(mutated(SECRET, _set("data.token", "%%%")), crd_dir=None) != []
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert "unknown apiVersion/kind" in kv.validate_object(widget, crd_dir=None)[0]  # not a pinned group
    for needs_crds in (lambda: kv.load_crds(None), lambda: kv.validate_object(GATEWAY, crd_dir=None),
                       lambda: kv.assert_valid([SERVICE, GATEWAY], crd_dir=None)):
        with pytest.raises(pytest.skip.Exception) as skipped:
            needs_crds()
        assert skipped.value.msg == kv.MISSING_CRDS
    assert "venv/bin/python scripts/fetch_crds.py" in kv.MISSING_CRDS and "MODELPLANE_K8S_CRD_DIR" in kv.MISSING_CRDS
    with pytest.raises(AssertionError, match="data.token"):  # the other objects' problems still fail the test
        kv.assert_valid([mutated(SECRET, _set("data.token", "%%%")), GATEWAY], crd_dir=None)


def test_a_named_but_missing_or_incomplete_crd_directory_is_an_error_not_a_skip(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(kv.CRDDirectoryMissingError, match="does not exist"):
        kv.load_crds(missing)
    with pytest.raises(kv.CRDDirectoryMissingError):
        kv.validate_object(SERVICE, crd_dir=missing)  # even for a built-in kind
    with pytest.raises(kv.CRDDirectoryMissingError):
        kv.assert_valid([GATEWAY], crd_dir=missing)
    with pytest.raises(kv.CRDDirectoryMissingError, match=f"lacks {len(kv.PINS)} of the {len(kv.PINS)} pinned files"):
        kv.load_crds(tmp_path)  # exists but is empty
    assert issubclass(kv.CRDDirectoryMissingError, FileNotFoundError)


def test_a_crd_file_with_another_digest_is_an_error_naming_it(tmp_path: Path) -> None:
    pins = FAKE_PINS
    for path, content in (("a/example.com_as.yaml", b"kind: A\n"), ("b/example.com_bs.yaml", b"kind: B, edited\n")):
        (tmp_path / path).parent.mkdir()
        (tmp_path / path).write_bytes(content)
    assert kv.pinned_files(tmp_path, pins[:1]) == [tmp_path / "a/example.com_as.yaml"]
    with pytest.raises(kv.CRDDigestError, match=re.escape(str(tmp_path / "b/example.com_bs.yaml")) + " is not the pinned"):
        kv.pinned_files(tmp_path, pins)


def test_the_pinned_crd_list_names_commits_and_digests() -> None:
    assert len(kv.PINS) == len({pin.path for pin in kv.PINS}) == 18
    for pin in kv.PINS:
        # A commit, not a tag or branch, so that the bytes behind the URL never change.
        assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+\.yaml", pin.url), pin.url
        assert Path(pin.url).name == Path(pin.path).name
        assert re.fullmatch(r"[0-9a-f]{64}", pin.sha256) and re.fullmatch(r"v\d+\.\d+\.\d+", pin.tag), pin.path
        # the folder names the release, so that a mirror can hold two releases of one project side by side
        assert pin.path.startswith("traefik/") or pin.path.split("/")[0].endswith(f"-{pin.tag}"), pin.path
    assert kv.PINNED_GROUPS == {api_version.rpartition("/")[0] for api_version, _ in EXPECTED_CRD_KINDS}


def test_every_expected_crd_kind_is_loaded_and_served() -> None:
    kv.require_all_crds()
    assert set(kv.crd_kinds()) == EXPECTED_CRD_KINDS


def test_the_found_crds_are_refused_when_one_is_edited(tmp_path: Path) -> None:
    kv.require_all_crds()
    copy_dir = tmp_path / "crds"
    shutil.copytree(kv.CRD_DIR, copy_dir)
    edited = copy_dir / kv.PINS[0].path
    edited.write_bytes(edited.read_bytes() + b"\n")
    with pytest.raises(kv.CRDDigestError, match=re.escape(str(edited))):
        kv.load_crds(copy_dir)


def test_converted_crd_schemas_are_valid_draft4() -> None:
    for cv in kv.load_crds().values():
        jsonschema.Draft4Validator.check_schema(kv.to_jsonschema(cv.schema))


def test_only_transition_rules_are_skipped() -> None:
    """Every CEL rule of the pinned CRDs runs, except rules on updates (oldSelf).

    When a CRD update brings a rule cel-python cannot run, this fails: add the function or list
    the rule here on purpose; never let it pass unnoticed.
    """
    kv.require_all_crds()
    skipped = {(r.api_version, r.kind, r.path, r.rule) for r in kv.skipped_cel_rules()}
    assert skipped == {
        ("gateway.networking.k8s.io/v1", "GatewayClass", "spec.controllerName", "self == oldSelf"),
        ("gateway.networking.k8s.io/v1beta1", "GatewayClass", "spec.controllerName", "self == oldSelf"),
    }
    assert all("oldSelf" in r.reason for r in kv.skipped_cel_rules())
    evaluated = sum(cv.rules["evaluated"] for cv in kv.load_crds().values() if cv.served)
    # Gateway 2x16, HTTPRoute 2x89 (v1.5.1), InferencePool 1 (v1.0.1), AIGatewayRoute 2x6 (v0.7.0), EnvoyProxy 167,
    # Backend 9, BackendTrafficPolicy 65, HTTPRouteFilter 7, EnvoyExtensionPolicy 44, ClientTrafficPolicy 15 (Envoy
    # Gateway v1.8.1), Middleware 1
    assert evaluated == 531


def test_cel_property_names_are_escaped_like_kubernetes() -> None:
    # HTTPRoute's parentRefs rules read p.__namespace__: the same Gateway name in two namespaces
    # is two parents, which only passes if 'namespace' is exposed under its escaped name.
    def two_namespaces(o: dict) -> None:
        o["spec"]["parentRefs"] = [{"name": "gw", "namespace": "a"}, {"name": "gw", "namespace": "b"}]
    assert kv.validate_object(mutated(HTTP_ROUTE, two_namespaces)) == []
    assert kv._cel_property_name("namespace") == "__namespace__"
    assert kv._cel_property_name("x-request-id") == "x__dash__request__dash__id"
    assert kv._cel_property_name("a.b/c") == "a__dot__b__slash__c"
    assert kv._cel_property_name("has space") is None
