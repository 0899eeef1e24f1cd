"""What every component shares: its type token, the cluster provider, releases and objects in order."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ...render.fleet import release_waits_for, waits_for
from ...render.types import ClusterStack, HelmRelease
from ..backends.base import ClusterAccess
from ..kube import apply_object, helm_release, release_id, remote_manifest, resource_name, substitute


def component_type(kind: str) -> str:
    return f"modelplane:index:{kind}"


def cluster_provider(cluster: str, access: ClusterAccess, parent: pulumi.Resource) -> k8s.Provider:
    """The one provider every object of `cluster` goes through; it waits for the backend's node pools.

    `deleteUnreachable` is left unset on purpose: with it on, a `pulumi refresh` or `destroy` while
    the cluster is merely unreachable (a network outage, a stopped control plane) silently drops
    every object of the cluster from state. Unset, those operations stop with the provider's error
    naming the resource, and an operator whose cluster is gone for good opts in for that run with
    `PULUMI_K8S_DELETE_UNREACHABLE=true` (docs/runbook.md). Found by the end-to-end suite.
    """
    return k8s.Provider(
        cluster,
        kubeconfig=access.kubeconfig,
        context=access.context,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(access.ready)),
    )


def selected_kubeconfig(access: ClusterAccess) -> pulumi.Output[str]:
    """The cluster's kubeconfig with its context selected (`current-context`), as `modelplane status` reads it. Secret."""
    if access.context is None:
        return access.kubeconfig
    return pulumi.Output.secret(access.kubeconfig.apply(lambda text: _with_context(text, access.context)))


def _with_context(text: str, context: str | None) -> str:
    config = yaml.safe_load(text) if text else None
    if not isinstance(config, dict):
        return text
    return yaml.safe_dump({**config, "current-context": context}, sort_keys=False)


def install_releases(
    cluster: str,
    releases: Iterable[HelmRelease],
    opts: pulumi.ResourceOptions,
    after: Mapping[str, list[pulumi.Resource]] | None = None,
    adopt: Collection[str] = (),
) -> dict[str, k8s.helm.v3.Release]:
    """Helm releases in dependency order; `after` adds non-release prerequisites per release name.

    A release whose `<namespace>/<name>` is in `adopt` is deployed already and maybe not in state:
    imported rather than installed (release_adoption.py).
    """
    installed: dict[str, k8s.helm.v3.Release] = {}
    pending = list(releases)
    while pending:
        ready = [r for r in pending if all(d in installed for d in r.depends_on)]
        if not ready:
            raise ValueError(
                f"releases on {cluster} depend on each other or on a missing release: "
                f"{', '.join(r.name for r in pending)}"
            )
        for release in ready:
            depends_on = [installed[d] for d in release.depends_on] + list((after or {}).get(release.name, []))
            installed[release.name] = helm_release(
                f"{cluster}/{release.name}",
                release,
                pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends_on)),
                adopt=release_id(release) in adopt,
            )
            pending.remove(release)
    return installed


def apply_objects(
    cluster: str,
    objects: Iterable[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    depends_on: Callable[[dict[str, Any]], Sequence[pulumi.Resource]] = lambda obj: [],
    replacements: Mapping[str, pulumi.Input[str]] | None = None,
    read_back: Callable[[dict[str, Any]], tuple[str, ...]] = lambda obj: (),
) -> list[pulumi.CustomResource]:
    """Each object as a resource of `cluster`, after what `depends_on(obj)` names.

    `replacements` fills the renderer's placeholders; `read_back(obj)` names fields to read back
    from the cluster (e.g. a Gateway's `status`).
    """
    out = []
    for obj in objects:
        extra = pulumi.ResourceOptions(depends_on=depends_on(obj))
        out.append(
            apply_object(
                resource_name(cluster, obj),
                substitute(obj, replacements or {}),
                pulumi.ResourceOptions.merge(opts, extra),
                outputs=read_back(obj),
            )
        )
    return out


@dataclass
class Installed:
    manifests: dict[str, k8s.yaml.v2.ConfigFile]
    releases: dict[str, k8s.helm.v3.Release]
    gateway: pulumi.CustomResource  # created once it has an address

    @property
    def address(self) -> pulumi.Output[str]:
        return self.gateway.status.apply(first_address)  # type: ignore[attr-defined]

    @property
    def ready(self) -> list[pulumi.Resource]:
        """Every CRD manifest and every release (what the front door's objects wait for)."""
        return [*self.manifests.values(), *self.releases.values()]

    @property
    def by_name(self) -> dict[str, pulumi.Resource]:
        """Each CRD manifest and release by its rendered name (what `waits_for` and `replica_waits_for` name)."""
        return {**self.manifests, **self.releases}


def install_stack(
    stack: ClusterStack,
    opts: pulumi.ResourceOptions,
    replacements: Mapping[str, pulumi.Input[str]],
    adopt: Collection[str] = (),
) -> Installed:
    """A rendered cluster stack's remote manifests, charts and objects, in the order the cluster can take them.

    First the remote manifests (CRDs) and the objects nothing serves (namespaces, quotas: the
    charts' pods are admitted against them), then the releases in dependency order (each also
    after the manifests `release_waits_for` names), then the objects the releases or manifests
    serve, each after what `waits_for` names. The stack's Gateway is read back until it has an
    address (its await annotation is rendered).
    """
    cluster = stack.cluster
    manifests = {m.name: remote_manifest(cluster, m, opts) for m in stack.remote_manifests}

    def is_gateway(obj: dict[str, Any]) -> bool:
        return obj["kind"] == "Gateway" and obj["metadata"]["name"] == stack.gateway

    read_back = lambda obj: ("status",) if is_gateway(obj) else ()  # noqa: E731
    unserved = [o for o in stack.objects if not waits_for(stack, o)]
    base = apply_objects(cluster, unserved, opts, replacements=replacements, read_back=read_back)
    installed = install_releases(
        cluster,
        stack.releases,
        opts,
        after={r.name: base + [manifests[m] for m in release_waits_for(stack, r)] for r in stack.releases},
        adopt=adopt,
    )
    served = [o for o in stack.objects if waits_for(stack, o)]
    prerequisites = {**manifests, **installed}
    applied = apply_objects(
        cluster,
        served,
        opts,
        replacements=replacements,
        depends_on=lambda obj: [prerequisites[n] for n in waits_for(stack, obj)],
        read_back=read_back,
    )
    gateways = [r for o, r in zip(unserved + served, base + applied, strict=True) if is_gateway(o)]
    if len(gateways) != 1:
        raise ValueError(
            f"cluster {cluster}: the rendered stack has {len(gateways)} Gateways named {stack.gateway}; "
            "this is a modelplane bug, please report it"
        )
    return Installed(manifests, installed, gateways[0])


def first_address(status: Any) -> str | None:
    """A Gateway's address from its status (what `kubectl get gateway` shows under ADDRESS)."""
    addresses = (status or {}).get("addresses") or []
    return addresses[0].get("value") if addresses else None


def children(parent: pulumi.Resource, provider: pulumi.ProviderResource | None = None) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, provider=provider)


def children_after(
    parent: pulumi.Resource,
    provider: pulumi.ProviderResource | None,
    depends_on: pulumi.Input[Sequence[pulumi.Input[pulumi.Resource]]] | None,
) -> pulumi.ResourceOptions:
    """A component's children: parented to it, on its cluster's provider, after what the component waits for."""
    return pulumi.ResourceOptions.merge(children(parent, provider), pulumi.ResourceOptions(depends_on=depends_on))


def deployed_values(stack: ClusterStack, access: ClusterAccess) -> dict[str, pulumi.Input[str]]:
    """The stack's deploy-time placeholders (token -> value) from what the cluster's backend reports.

    A placeholder the backend has no value for is a modelplane bug: the run stops rather than
    deploy the placeholder.
    """
    values = access.deployed_values()
    out: dict[str, pulumi.Input[str]] = {}
    for placeholder in stack.placeholders:
        cluster, _, key = placeholder.name.partition(".")
        if cluster != stack.cluster or key not in values:
            raise ValueError(
                f"cluster {stack.cluster}: no deploy-time value for {placeholder.name}; this is a "
                "modelplane bug, please report it"
            )
        out[placeholder.token] = values[key]
    return out
