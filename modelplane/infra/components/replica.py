"""ModelReplica: one placed replica's objects on its workload cluster, created once its serving stack is up."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pulumi

from ...render.types import WORKLOAD_KINDS
from ...scheduling import PlacedReplica
from .common import apply_objects, children, component_type

# Engines pull large images and load weights: allow more than the provider's 10-minute default.
WORKLOAD_TIMEOUTS = pulumi.CustomTimeouts(create="45m", update="45m")


def component_name(namespace: str, name: str) -> str:
    """`<namespace>/<name>`: what users know (the namespace keeps equal names in two namespaces apart)."""
    return f"{namespace}/{name}"


class ModelReplica(pulumi.ComponentResource):
    """The replica's workloads, claim templates, endpoint picker and routing surface.

    Each object waits for what `after(obj)` names (its namespace, and the release or CRD manifest its
    kind needs); the workloads (Deployment, LeaderWorkerSet) also for every configuration object of the
    replica and for `mounts` (the cache volume). `workloads` are what the replica's front-door endpoint
    waits for: Pulumi creates a workload only once it is available, so an endpoint never points at a
    replica that is still starting (a LeaderWorkerSet has no built-in await: its rendered
    `pulumi.com/waitFor` annotation waits for the controller's Available condition).
    """

    def __init__(
        self,
        replica: PlacedReplica,
        objects: list[dict[str, Any]],
        provider: pulumi.ProviderResource,
        after: Callable[[dict[str, Any]], list[pulumi.Resource]],
        mounts: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            component_type("ModelReplica"), component_name(replica.key.namespace, replica.name), None, opts
        )
        self.replica = replica
        child = children(self, provider)
        config = [o for o in objects if o["kind"] not in WORKLOAD_KINDS]
        workloads = [o for o in objects if o["kind"] in WORKLOAD_KINDS]
        applied_config = apply_objects(replica.cluster, config, child, depends_on=after)
        self.workloads = apply_objects(
            replica.cluster,
            workloads,
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(custom_timeouts=WORKLOAD_TIMEOUTS)),
            depends_on=lambda obj: [*after(obj), *mounts, *applied_config],
        )
        self.register_outputs({"cluster": replica.cluster, "index": replica.index})
