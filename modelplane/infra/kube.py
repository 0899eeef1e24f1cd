"""Rendered Kubernetes objects, Helm releases and remote manifests as Pulumi resources, without writing any field here.

Objects come from `modelplane.render` as plain dicts, annotations (Pulumi's await hints) included.
Each object is registered as pulumi-kubernetes' class for its kind would register it: its type
token (by which the provider's await logic applies: a Deployment is created only once it is
available), its fields and the class's options (`kube_kinds` chooses how); a remote manifest
through a `yaml.v2.ConfigFile`. Placeholders the renderer leaves for values known only at deploy time
(secrets, a cloud's file system or network, a kind cluster's MetalLB range, a workload gateway's
address) are substituted with Outputs here (`substitute`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..render.secrets import PLACEHOLDER
from ..render.types import HelmRelease, RemoteManifest
from .kube_kinds import KubeObject, Typed, registration
from .sources import local_chart, manifest_file

# A deploy-time placeholder the renderer left (`render.types.deployed_placeholder`).
DEPLOYED = re.compile(r"<deployed: ([^<>]+)>")


def object_id(obj: Mapping[str, Any]) -> str:
    """`<namespace>/<name>` or `<name>`: how Kubernetes (and `kubectl`) names the object."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


def resource_name(cluster: str, obj: Mapping[str, Any]) -> str:
    """A stack-unique Pulumi name: the cluster, then the object's namespace/name (the type tells kinds apart)."""
    return f"{cluster}/{object_id(obj)}"


def apply_object(
    name: str, obj: Mapping[str, Any], opts: pulumi.ResourceOptions, outputs: tuple[str, ...] = ()
) -> pulumi.CustomResource:
    """One object as a Pulumi resource. `outputs` names extra top-level fields to read back (e.g. `status`).

    `kube_kinds.registration` chooses how; the resource is made here, not there, so that the
    frames the SDK records as its source (see `KubeObject`) are the same whichever way it is made.
    """
    how = registration(obj, outputs)
    if isinstance(how, Typed):
        return how.cls(name, opts=opts, **how.kwargs)
    return KubeObject(how.token, name, how.props, how.options(opts))


def remote_manifest(cluster: str, manifest: RemoteManifest, opts: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigFile:
    """A rendered remote manifest, applied as it is: `<cluster>/<name>`, its objects prefixed by the cluster."""
    return k8s.yaml.v2.ConfigFile(
        f"{cluster}/{manifest.name}", file=manifest_file(manifest), resource_prefix=cluster, opts=opts
    )


def release_id(release: HelmRelease) -> str:
    """The provider's ID of a Helm release: `<namespace>/<name>`."""
    return f"{release.namespace}/{release.name}"


def helm_release(
    name: str, release: HelmRelease, opts: pulumi.ResourceOptions, adopt: bool = False
) -> k8s.helm.v3.Release:
    """A Helm release as rendered: fixed release name (no random suffix), its namespace created by Helm.

    The chart comes from one of three places (`modelplane.render.sources` decides which):
    an http(s) Helm repository (`repository_opts`), an OCI registry (`chart` is the full
    `oci://.../<chart>` reference), or a local `.tgz` file of a folder mirror (`repository` is
    empty, `chart` is the file's absolute path; checked to exist here, so a missing file stops the
    preview with a clear message; Helm ignores `version` for a local file).

    `atomic` rolls a failed install back, so a retry starts clean; the provider waits for the
    release's resources to be ready before dependents are applied. `adopt`: the release is deployed
    already, maybe not in state; the engine imports it, then upgrades it to these inputs.
    """
    if adopt:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(import_=release_id(release)))
    repository = release.repository.rstrip("/")
    if not repository:
        chart, repository_opts = local_chart(release.chart), None
    elif repository.startswith("oci://"):
        chart, repository_opts = f"{repository}/{release.chart}", None
    else:
        chart, repository_opts = release.chart, k8s.helm.v3.RepositoryOptsArgs(repo=repository)
    return k8s.helm.v3.Release(
        name,
        name=release.name,
        namespace=release.namespace,
        create_namespace=True,
        chart=chart,
        repository_opts=repository_opts,
        version=release.version,
        values=release.values,
        atomic=True,
        timeout=900,
        opts=opts,
    )


def substitute(value: Any, replacements: Mapping[str, pulumi.Input[str]]) -> Any:
    """`value` with every occurrence of a placeholder string replaced by its (Output) value.

    Strings without placeholders stay plain; a string holding one becomes an Output (secret if the
    replacement is), so a secret token inside a header value stays secret in state and previews.
    """
    if isinstance(value, dict):
        return {key: substitute(item, replacements) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, replacements) for item in value]
    if isinstance(value, str):
        hits = [token for token in replacements if token in value]
        if hits:
            value = _concat(value, hits, replacements)
        elif (missing := PLACEHOLDER.search(value)) is not None:
            # Never deploy a placeholder where a credential belongs.
            raise ValueError(f"no value for {missing.group(1)}: set it with `pulumi config set --secret --path`")
        elif (missing := DEPLOYED.search(value)) is not None:
            raise ValueError(f"no deploy-time value for {missing.group(1)}; this is a modelplane bug, please report it")
    return value


def _concat(text: str, tokens: list[str], replacements: Mapping[str, pulumi.Input[str]]) -> pulumi.Output[str]:
    pattern = re.compile("|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True)))
    parts: list[pulumi.Input[str]] = []
    position = 0
    for match in pattern.finditer(text):
        parts += [text[position : match.start()], replacements[match.group(0)]]
        position = match.end()
    parts.append(text[position:])
    return pulumi.Output.concat(*[part for part in parts if part != ""])
