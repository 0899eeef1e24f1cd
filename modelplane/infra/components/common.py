"""What every component shares: its type token, the cluster provider, releases and objects in order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import pulumi
import pulumi_kubernetes as k8s

from ...render.types import HelmRelease
from ..backends.base import ClusterAccess
from ..kube import WAIT_FOR, apply_object, helm_release, resource_name, substitute, with_annotations

# A Gateway is created once it has an address: the front door's endpoints and URLs need it.
GATEWAY_WAIT = {WAIT_FOR: "jsonpath={.status.addresses[0].value}"}


def component_type(kind: str) -> str:
    return f"modelplane:index:{kind}"


def cluster_provider(cluster: str, access: ClusterAccess, parent: pulumi.Resource) -> k8s.Provider:
    """The one provider every object of `cluster` goes through.

    It waits for the backend's node pools. `delete_unreachable` lets `pulumi destroy` (or an
    update that drops the cluster) finish when the cluster is already gone, e.g. a kind cluster
    deleted by hand, instead of failing on every object in it.
    """
    return k8s.Provider(cluster, kubeconfig=access.kubeconfig, context=access.context, delete_unreachable=True,
                        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(access.ready)))


def install_releases(cluster: str, releases: Iterable[HelmRelease], opts: pulumi.ResourceOptions,
                     after: Mapping[str, list[pulumi.Resource]] | None = None) -> dict[str, k8s.helm.v3.Release]:
    """Helm releases in dependency order; `after` adds non-release prerequisites per release name."""
    installed: dict[str, k8s.helm.v3.Release] = {}
    pending = list(releases)
    while pending:
        ready = [r for r in pending if all(d in installed for d in r.depends_on)]
        if not ready:
            raise ValueError(f"releases on {cluster} depend on each other or on a missing release: "
                             f"{', '.join(r.name for r in pending)}")
        for release in ready:
            depends_on = [installed[d] for d in release.depends_on] + list((after or {}).get(release.name, []))
            installed[release.name] = helm_release(f"{cluster}/{release.name}", release,
                                                   pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                                       depends_on=depends_on)))
            pending.remove(release)
    return installed


def apply_objects(cluster: str, objects: Iterable[dict[str, Any]], opts: pulumi.ResourceOptions,
                  depends_on: Callable[[dict[str, Any]], list[pulumi.Resource]] = lambda obj: [],
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
        out.append(apply_object(resource_name(cluster, obj), substitute(obj, replacements or {}),
                                pulumi.ResourceOptions.merge(opts, extra), outputs=read_back(obj)))
    return out


@dataclass
class Installed:
    releases: dict[str, k8s.helm.v3.Release]
    gateway: pulumi.CustomResource  # created once it has an address

    @property
    def address(self) -> pulumi.Output[str]:
        return self.gateway.status.apply(first_address)  # type: ignore[attr-defined]


def install_stack(cluster: str, objects: list[dict[str, Any]], releases: list[HelmRelease],
                  opts: pulumi.ResourceOptions, *, served_by: Callable[[dict[str, Any]], tuple[str, ...]],
                  crds: pulumi.Resource, needs_crds: Callable[[dict[str, Any]], bool], crds_release: str,
                  gateway: str, replacements: Mapping[str, pulumi.Input[str]]) -> Installed:
    """A cluster's charts and the objects around them, in the order the cluster can take them.

    First the objects no release serves (namespaces, quotas: the charts' pods are admitted
    against them), then the releases in dependency order (`crds_release` also after the CRD
    manifest `crds`), then the objects the releases or CRDs serve, each after what serves it.
    The Gateway named `gateway` is awaited until it has an address.
    """
    def needs(obj: dict[str, Any]) -> bool:
        return bool(served_by(obj)) or needs_crds(obj)

    def is_gateway(obj: dict[str, Any]) -> bool:
        return obj["kind"] == "Gateway" and obj["metadata"]["name"] == gateway

    base = apply_objects(cluster, [o for o in objects if not needs(o)], opts, replacements=replacements)
    installed = install_releases(cluster, releases, opts,
                                 after={r.name: base + ([crds] if r.name == crds_release else []) for r in releases})
    served = [with_annotations(o, GATEWAY_WAIT) if is_gateway(o) else o for o in objects if needs(o)]
    applied = apply_objects(cluster, served, opts, replacements=replacements,
                            depends_on=lambda obj: [installed[r] for r in served_by(obj)] + ([crds] if needs_crds(obj) else []),
                            read_back=lambda obj: ("status",) if is_gateway(obj) else ())
    return Installed(installed, next(r for o, r in zip(served, applied) if is_gateway(o)))


def first_address(status: Any) -> str | None:
    """A Gateway's address from its status (what `kubectl get gateway` shows under ADDRESS)."""
    addresses = (status or {}).get("addresses") or []
    return addresses[0].get("value") if addresses else None


def children(parent: pulumi.Resource, provider: pulumi.ProviderResource | None = None) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, provider=provider)
