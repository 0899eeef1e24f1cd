"""Registering an object through `KubeObject` sends the engine exactly what pulumi-kubernetes' class for its kind sends
(infra/kube_kinds.py): the same type token, inputs, secrets, dependencies and resource options, aliases included."""
from __future__ import annotations

import dataclasses
import inspect
import re

import pulumi
import pulumi_kubernetes as k8s
import pytest

from modelplane.infra import kube_kinds
from modelplane.infra.kube import apply_object

KUBECONFIG = "apiVersion: v1\nkind: Config\n"
METADATA = {"name": "demo", "namespace": "ml-team", "labels": {"app_name": "demo", "modelplane.ai/x": "y"},
            "annotations": {"pulumi.com/skipAwait": "true"}, "ownerReferences": []}
# A value for each top-level field a kind takes: nested camelCase keys, snake_case map keys, a secret.
VALUES = {
    "binaryData": {"blob_name": "aGVsbG8="}, "data": {"config_yaml": "a: 1"}, "immutable": True,
    "automountServiceAccountToken": False, "imagePullSecrets": [{"name": "pull"}], "secrets": [{"name": "s"}],
    "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
    "ports": [{"name": "http", "port": 80, "appProtocol": "http"}],
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "demo"},
    "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "ml-team"}],
    "allowVolumeExpansion": True, "allowedTopologies": [{"matchLabelExpressions": [{"key": "k", "values": ["v"]}]}],
    "mountOptions": ["nfsvers=4.1"], "parameters": {"fs_type": "nfs"}, "provisioner": "efs.csi.aws.com",
    "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}


POD = {"metadata": {"labels": {"app_name": "demo"}},
       "spec": {"serviceAccountName": "demo", "containers": [{"name": "c", "image": "busybox", "env": []}]}}
SPECS = {
    "Deployment": {"replicas": 2, "selector": {"matchLabels": {"app_name": "demo"}}, "template": POD},
    "Job": {"backoffLimit": 0, "template": POD},
    "Namespace": {"finalizers": ["kubernetes"]},
    "PersistentVolumeClaim": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    "ResourceQuota": {"hard": {"requests.nvidia.com/gpu": "4"}},
    "Service": {"selector": {"app_name": "demo"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
    "NetworkPolicy": {"podSelector": {"matchLabels": {"app_name": "demo"}}, "policyTypes": ["Ingress"]},
    "ResourceClaimTemplate": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression": "true"}}]}}]}}},
}


def _object(token: str) -> dict:
    _, type_path, kind = token.split(":")
    api_version = type_path.removeprefix("core/")
    fields = {name: SPECS[kind] if name == "spec" else VALUES[name]
              for name in sorted(kube_kinds.KINDS[token].fields - {"metadata"})}
    if "data" in fields:  # a secret inside an input: it stays secret, and marks the input secret
        fields["data"] = {**fields["data"], "token": pulumi.Output.secret("s3cret")}
    return {"apiVersion": api_version, "kind": kind, "metadata": METADATA, **fields}


def _register(monitor, make) -> dict:
    """What the engine receives for the resource `make(parent, provider, after)` registers, name and URN aside."""
    monitor.registrations.clear()
    seen = {}

    @pulumi.runtime.test
    def run():
        provider = k8s.Provider("rack", kubeconfig=KUBECONFIG)
        parent = pulumi.ComponentResource("modelplane:index:ModelReplica", "ml-team/demo")
        after = k8s.core.v1.Namespace("rack/ml-team", metadata={"name": "ml-team"},
                                      opts=pulumi.ResourceOptions(parent=parent, provider=provider))
        opts = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[after],
                                      custom_timeouts=pulumi.CustomTimeouts(create="20m"))
        resource = make(opts)
        return resource.urn.apply(lambda urn: seen.setdefault("urn", urn))

    run()
    [registered] = [r for r in monitor.registrations if r.urn == seen["urn"]]
    record = dataclasses.asdict(registered)
    assert record.pop("name") == "rack/ml-team/demo"
    record.pop("urn")
    record["dependencies"] = sorted(record["dependencies"])
    record["property_dependencies"] = {k: sorted(v) for k, v in record["property_dependencies"].items()}
    return record


@pytest.mark.parametrize("token", sorted(kube_kinds.KINDS))
def test_a_built_in_kind_is_registered_as_its_typed_class_registers_it(monitor, token):
    obj = _object(token)
    how = kube_kinds.registration(obj)
    assert isinstance(how, kube_kinds.Plain) and how.token == token
    cls = kube_kinds.typed_class(obj["apiVersion"], obj["kind"])
    assert cls is not None
    fields = {kube_kinds._snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    typed = _register(monitor, lambda opts: cls("rack/ml-team/demo", opts=opts, **fields))
    plain = _register(monitor, lambda opts: apply_object("rack/ml-team/demo", obj, opts))
    assert plain == typed
    assert len(typed["aliases"]) == len(kube_kinds.KINDS[token].aliases)


@pytest.mark.parametrize("token", sorted(kube_kinds.KINDS))
def test_a_kind_takes_the_fields_its_typed_class_takes(token):
    """`fields` and `required` are the typed class's; an object outside them goes to the class (which rejects it)."""
    _, type_path, kind = token.split(":")
    cls = kube_kinds.typed_class(type_path.removeprefix("core/"), kind)
    parameters = set(inspect.signature(cls._internal_init).parameters) - {"__self__", "resource_name", "opts",
                                                                          "__props__", "api_version", "kind"}
    known = kube_kinds.KINDS[token]
    assert {kube_kinds._snake(f) for f in known.fields} == parameters
    source = inspect.getsource(cls._internal_init)
    required = set(re.findall(r"Missing required property '(\w+)'", source))
    assert {kube_kinds._snake(f) for f in known.required} == required
    # a class that marks fields secret (a Secret) or adds other options is not in KINDS
    assert "Output.secret" not in source and "additional_secret_outputs" not in source
    assert source.count("pulumi.ResourceOptions(") == (1 if known.aliases else 0)
    obj = {**_object(token), "unknownField": 1}
    assert isinstance(kube_kinds.registration(obj), kube_kinds.Typed)
    for field in known.required:
        obj = {k: v for k, v in _object(token).items() if k != field}
        assert isinstance(kube_kinds.registration(obj), kube_kinds.Typed)


def test_a_custom_resource_is_registered_as_the_generic_custom_resource_registers_it(monitor):
    obj = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": METADATA,
           "spec": {"parentRefs": [{"name": "gw", "sectionName": "http"}], "rules": [{"backendRefs": []}]}}
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    typed = _register(monitor, lambda opts: k8s.apiextensions.CustomResource(
        "rack/ml-team/demo", api_version=obj["apiVersion"], kind=obj["kind"], opts=opts, **fields))
    plain = _register(monitor, lambda opts: apply_object("rack/ml-team/demo", obj, opts))
    assert plain == typed
    assert plain["type"] == "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"


def test_a_secret_keeps_its_typed_class():
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": METADATA, "stringData": {"token": "s3cret"}}
    how = kube_kinds.registration(obj)
    assert isinstance(how, kube_kinds.Typed) and how.cls is k8s.core.v1.Secret


def test_an_object_read_back_is_a_plain_resource_with_an_output_per_field():
    obj = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": METADATA, "spec": {}}
    how = kube_kinds.registration(obj, ("status",))
    assert isinstance(how, kube_kinds.Plain)
    assert how.props == {**obj, "status": None} and how.token == "kubernetes:gateway.networking.k8s.io/v1:Gateway"
