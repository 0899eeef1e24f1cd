"""ModelCache: a model staged once per matching cluster on shared (RWX) storage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ...api.fleet import NamespacedName
from .common import apply_objects, children_after, component_type
from .replica import component_name


class ModelCache(pulumi.ComponentResource):
    """Per cluster: the PVC, the token Secret (a Pulumi secret) and the hydration Job.

    The Job is not awaited (its rendered `pulumi.com/skipAwait` annotation): it downloads a model once
    (possibly for an hour) and removes itself when done; replicas that mount the volume wait for the
    files, not for Pulumi.
    """

    def __init__(
        self,
        key: NamespacedName,
        per_cluster: Mapping[str, tuple[list[dict[str, Any]], pulumi.ProviderResource, list[pulumi.Resource]]],
        secrets: Mapping[str, pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(component_type("ModelCache"), component_name(key.namespace, key.name), None, opts)
        self.resources: dict[str, list[pulumi.CustomResource]] = {}
        for cluster, (objects, provider, depends_on) in sorted(per_cluster.items()):
            child = children_after(self, provider, depends_on)
            self.resources[cluster] = apply_objects(cluster, objects, child, replacements=secrets)
        self.register_outputs({"clusters": sorted(per_cluster)})
