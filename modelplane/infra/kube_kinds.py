"""How one rendered object is registered: the one place that chooses, per kind, between a plain and a typed resource.

The engine receives a type token, a name, inputs and resource options; a typed pulumi-kubernetes
class (`k8s.apps.v1.Deployment`) is one way to send them, and a costly one per resource: its inputs
and outputs go through the SDK's input and output types (every nested field looked up and
translated), and its module is imported on first use. A `KubeObject` of the same type token, with
the object's camelCase fields as inputs and the options the typed class adds (the provider's
version, the class's aliases), sends the very same registration at about the SDK's own cost
(issue 27). tests/test_kube_kinds.py registers one object of each kind in `KINDS` both ways and
compares what the engine receives; a kind not in `KINDS` (a Secret: its class marks its data
secret) keeps its typed class.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities

# API groups pulumi-kubernetes has typed classes for (module name under pulumi_kubernetes).
_TYPED_GROUPS = {
    "": "core",
    "apps": "apps",
    "batch": "batch",
    "policy": "policy",
    "rbac.authorization.k8s.io": "rbac",
    "discovery.k8s.io": "discovery",
    "resource.k8s.io": "resource",
    "storage.k8s.io": "storage",
    "networking.k8s.io": "networking",
    "scheduling.k8s.io": "scheduling",
    "admissionregistration.k8s.io": "admissionregistration",
    "apiextensions.k8s.io": "apiextensions",
}


@dataclass(frozen=True)
class Kind:
    """What a typed class's `_internal_init` accepts and adds (pulumi-kubernetes 4.34), besides its type token."""

    fields: frozenset[str]  # the top-level fields it takes (camelCase), apiVersion and kind aside
    required: frozenset[str] = frozenset()  # the ones it raises TypeError without
    aliases: tuple[str, ...] = ()  # the earlier type tokens it aliases


def _kind(fields: str, required: str = "", aliases: tuple[str, ...] = ()) -> Kind:
    return Kind(frozenset(fields.split()), frozenset(required.split()), aliases)


_OBJECT = "metadata spec"  # a typical kind: metadata, spec and a status it never sends
# The built-in kinds the renderer emits, by type token.
KINDS: dict[str, Kind] = {
    "kubernetes:apps/v1:Deployment": _kind(
        _OBJECT,
        "spec",
        (
            "kubernetes:apps/v1beta1:Deployment",
            "kubernetes:apps/v1beta2:Deployment",
            "kubernetes:extensions/v1beta1:Deployment",
        ),
    ),
    "kubernetes:batch/v1:Job": _kind(_OBJECT),
    "kubernetes:core/v1:ConfigMap": _kind("binaryData data immutable metadata"),
    "kubernetes:core/v1:Namespace": _kind(_OBJECT),
    "kubernetes:core/v1:PersistentVolumeClaim": _kind(_OBJECT),
    "kubernetes:core/v1:ResourceQuota": _kind(_OBJECT),
    "kubernetes:core/v1:Service": _kind(_OBJECT),
    "kubernetes:core/v1:ServiceAccount": _kind("automountServiceAccountToken imagePullSecrets metadata secrets"),
    "kubernetes:discovery.k8s.io/v1:EndpointSlice": _kind(
        "addressType endpoints metadata ports", "addressType", ("kubernetes:discovery.k8s.io/v1beta1:EndpointSlice",)
    ),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": _kind(
        _OBJECT, aliases=("kubernetes:extensions/v1beta1:NetworkPolicy",)
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": _kind(
        "metadata rules",
        aliases=(
            "kubernetes:rbac.authorization.k8s.io/v1alpha1:Role",
            "kubernetes:rbac.authorization.k8s.io/v1beta1:Role",
        ),
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _kind(
        "metadata roleRef subjects",
        "roleRef",
        (
            "kubernetes:rbac.authorization.k8s.io/v1alpha1:RoleBinding",
            "kubernetes:rbac.authorization.k8s.io/v1beta1:RoleBinding",
        ),
    ),
    "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate": _kind(
        _OBJECT,
        "spec",
        tuple(
            f"kubernetes:resource.k8s.io/{version}:ResourceClaimTemplate"
            for version in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2")
        ),
    ),
    "kubernetes:storage.k8s.io/v1:StorageClass": _kind(
        "allowVolumeExpansion allowedTopologies metadata mountOptions parameters provisioner reclaimPolicy "
        "volumeBindingMode",
        "provisioner",
        ("kubernetes:storage.k8s.io/v1beta1:StorageClass",),
    ),
}


class KubeObject(pulumi.CustomResource):
    """A Kubernetes object registered as its type token, its fields (camelCase) as inputs.

    A class of its own, not `pulumi.CustomResource` itself: the SDK takes a resource's source
    position and stack trace from the frames above the third `__init__` (Resource's,
    CustomResource's, the concrete class's), so the frames sent are the caller's, as with a typed class.
    """

    def __init__(self, token: str, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(token, name, dict(props), opts)


@dataclass(frozen=True)
class Plain:
    """Register as a `KubeObject`: `under` merged under the caller's options, then `over` over them (as the class
    it stands for merges them: merging is not associative for every option, e.g. `depends_on`)."""

    token: str
    props: dict[str, Any]
    under: pulumi.ResourceOptions | None
    over: pulumi.ResourceOptions | None

    def options(self, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
        if self.under is not None:
            opts = pulumi.ResourceOptions.merge(self.under, opts)
        return opts if self.over is None else pulumi.ResourceOptions.merge(opts, self.over)


@dataclass(frozen=True)
class Typed:
    """Register through pulumi-kubernetes' class for the kind, the fields as its snake_case arguments."""

    cls: type[pulumi.CustomResource]
    kwargs: dict[str, Any]


def registration(obj: Mapping[str, Any], outputs: tuple[str, ...] = ()) -> Plain | Typed:
    """How to register `obj`; `outputs` names extra top-level fields to read back (e.g. `status`).

    The same registration as before issue 27: a built-in kind as its typed class would send it,
    a custom resource of metadata and spec as `k8s.apiextensions.CustomResource` would, and an
    object with fields to read back (or fields no class takes) as a plain resource of every field.
    """
    api_version, kind = obj["apiVersion"], obj["kind"]
    fields = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    head = {"apiVersion": api_version, "kind": kind}
    version = k8s_utilities.get_version()
    if not outputs:
        known = KINDS.get(f"kubernetes:{_type_path(api_version)}:{kind}")
        if known is not None and known.required <= fields.keys() <= known.fields:
            # _utilities.get_resource_opts_defaults() under the caller's options, then the class's aliases.
            under = pulumi.ResourceOptions(version=version, plugin_download_url=k8s_utilities.get_plugin_download_url())
            aliases = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=t) for t in known.aliases])
            token = f"kubernetes:{_type_path(api_version)}:{kind}"
            return Plain(token, {**head, **fields}, under, aliases if known.aliases else None)
        cls = typed_class(api_version, kind)
        if cls is not None:
            return Typed(cls, {_snake(key): value for key, value in fields.items()})
        if fields.keys() <= {"metadata", "spec"}:
            # k8s.apiextensions.CustomResource: its type token, the provider's version over the caller's options.
            return Plain(f"kubernetes:{api_version}:{kind}", {**head, **fields}, None, _at(version))
    # Every field, plus the ones to read back (e.g. a Gateway's `status`), gets an output.
    props = {**head, **fields, **dict.fromkeys(outputs)}
    return Plain(f"kubernetes:{_type_path(api_version)}:{kind}", props, None, _at(version))


def _at(version: str) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(version=version)


def typed_class(api_version: str, kind: str) -> type[pulumi.CustomResource] | None:
    group, _, version = api_version.rpartition("/")
    module = _TYPED_GROUPS.get(group)
    if module is None:
        return None
    try:
        cls: type[pulumi.CustomResource] = getattr(
            importlib.import_module(f"pulumi_kubernetes.{module}.{version}"), kind
        )
    except (ImportError, AttributeError):
        return None
    return cls


def _type_path(api_version: str) -> str:
    return api_version if "/" in api_version else f"core/{api_version}"


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
