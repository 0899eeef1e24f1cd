"""The Pulumi program: read config -> validate -> plan (retaining last run's placement) -> components -> outputs.

Stack outputs and warnings are views of the one scheduling result: `placement` (the document the
next run reads back), `deployments` (Scheduled N of M, conditions, replicas per cluster) and a
warning per deployment that is short, with the reason per cluster. `services` and
`gatewayAddress` say where to send requests.

The placement depends on this stack's previous outputs, which arrive as an Output: the
plan-dependent components are built inside `apply`. The engine reads those outputs during
`pulumi preview` too, so the preview shows every replica, endpoint and route.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await

from ..api import ConfigError, Fleet, ModelplaneError
from ..code_digest import code_digest
from ..render.fingerprint import infrastructure_fingerprints, provisioned_clusters
from ..render.front_door import service_address
from ..scheduling import PlanResult, load_previous, schedule
from ..views import shortfall_warning
from . import checkpoints, skip
from .config import load_fleet_from_pulumi
from .deploy import Infrastructure, Placement, build_infrastructure, build_placement
from .provider_tmpdir import warn_unless_private_temp_folder
from .release_adoption import adoptable_releases
from .sdk_debug import drop_sdk_debug_messages
from .sources import check_folder_mirror
from .state_shape import trim_stack_traces


def load_or_fail() -> Fleet:
    """Bad config fails the preview before any resource is registered, listing every problem."""
    try:
        fleet = load_fleet_from_pulumi()
    except ConfigError as error:
        for issue in error.issues:
            pulumi.log.error(str(issue))
        noun = "error" if len(error.issues) == 1 else "errors"
        raise pulumi.RunError(
            f"{len(error.issues)} {noun} in the modelplane stack config (listed above); nothing was changed"
        ) from None
    for warning in fleet.warnings:
        pulumi.log.warn(str(warning))
    return fleet


def previous_outputs() -> pulumi.Output[Any]:
    """This stack's own outputs from its last update (none on the first deployment).

    A stack reference to itself: during an update the engine still reports the previous outputs,
    and on a stack that was never deployed they are simply missing.
    """
    own = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    # Not `get_output`: it fails when the reference reports no outputs at all rather than an empty map.
    return pulumi.StackReference(own).outputs.apply(lambda outputs: outputs or {})


def previous_placement(previous: pulumi.Output[Any]) -> pulumi.Output[Any]:
    """The last update's `placement` output (None on the first deployment)."""
    # `outputs` is secret as a whole once any output is (`kubeconfigs`); `placement` is not, and must not
    # turn the plan and every output derived from it into secrets.
    return pulumi.Output.unsecret(previous.apply(lambda outputs: outputs.get("placement")))


def recorded_infrastructure(previous: pulumi.Output[Any]) -> object:
    """The last `up`'s `infrastructure` output (render/fingerprint.py), waited for before anything is registered."""
    return (_sync_await(previous.future()) or {}).get("infrastructure")


def check_checkpoint_skipping(fleet: Fleet, fingerprints: dict[str, str], recorded: object) -> None:
    """Under PULUMI_SKIP_CHECKPOINTS: refuse an `up` that builds a provisioned cluster (checkpoints.py)."""
    if checkpoints.skipping():
        checkpoints.check(fingerprints, recorded, provisioned_clusters(fleet), dry_run=pulumi.runtime.is_dry_run())


def plan(fleet: Fleet, previous: Any) -> PlanResult:
    try:
        document = load_previous(previous)
    except ModelplaneError as error:
        pulumi.log.error(f"the stack's previous `placement` output is unreadable: {error}")
        raise pulumi.RunError("cannot plan without the previous placement; nothing was changed") from None
    result = schedule(fleet, document)
    for deployment in result.deployments.values():
        if deployment.short:
            pulumi.log.warn(shortfall_warning(result, deployment))
    return result


def deployment_status(result: PlanResult) -> dict[str, Any]:
    return {
        str(key): {
            "replicas": p.desired,
            "scheduled": p.scheduled,
            "clusters": p.by_cluster(),
            "conditions": [c.to_dict() for c in p.conditions],
        }
        for key, p in result.deployments.items()
    }


def service_urls(fleet: Fleet, infra: Infrastructure) -> dict[str, pulumi.Output[str]]:
    if infra.gateway is None:
        return {}
    return {
        str(key): infra.gateway.address.apply(functools.partial(service_address, key=key))
        for key in sorted(fleet.model_services)
    }


@dataclass(frozen=True)
class Program:
    fleet: Fleet
    result: pulumi.Output[PlanResult]
    infrastructure: Infrastructure
    placement: pulumi.Output[Placement]


# Young collections as CPython's defaults; full ones (generation 2) never while the program registers.
REGISTRATION_GC_THRESHOLDS = (700, 10, 1_000_000_000)


def collect_only_young_garbage() -> None:
    """Every resource, output and rendered object stays alive until the program ends, so a full collection walks
    an ever larger graph and frees almost nothing: at 10 clusters x 50 deployments, 19 of them took 8 of 16 s and
    freed 1,291 objects (benchmarks/bench_program.py). Young collections still free the short-lived cycles.
    What an earlier run in this process left (a test session runs the program many times) is freed first.
    """
    gc.collect()
    gc.set_threshold(*REGISTRATION_GC_THRESHOLDS)


def start_registrations() -> None:
    """Let the queued registrations start before the SDK waits for them.

    The SDK waits as soon as the program returns; with no registration started yet (nothing has yielded to the
    event loop), it polls every pending output each time one resolves, and everything the plan adds is
    registered under that polling (at 50 x 500, 400,000 outputs polled 50 times). Once started, the SDK awaits
    them one at a time, and the plan-dependent registrations join that queue. `_sync_await` is how the SDK
    itself runs a synchronous invoke inside the program: one turn of the running event loop.
    """
    _sync_await(asyncio.sleep(0))


def run() -> Program:
    collect_only_young_garbage()
    trim_stack_traces()  # a third of the state file otherwise (state_shape.py)
    drop_sdk_debug_messages()  # three synchronous RPCs per resource otherwise (sdk_debug.py)
    fleet = load_or_fail()
    check_folder_mirror(fleet)  # every mirrored file present and as pinned, before anything is registered
    warn_unless_private_temp_folder()  # the Kubernetes provider leaves each kubeconfig in the engine's TMPDIR
    previous = previous_outputs()
    fingerprints = infrastructure_fingerprints(fleet)
    recorded = recorded_infrastructure(previous)
    check_checkpoint_skipping(fleet, fingerprints, recorded)
    up_run = skip.from_environment()  # set by `modelplane up` (unchanged_clusters.py)
    skipped: dict[str, skip.SkippedCluster] = {}
    if up_run is not None and up_run.skip:
        # The plan is needed before any cluster is registered, to check the clusters `modelplane up` left out.
        last = _sync_await(previous.future()) or {}
        planned = plan(fleet, last.get("placement"))
        skipped = skip.skipped_clusters(up_run, fleet, planned, code_digest(), last)
        result = previous_placement(previous).apply(lambda _: planned)  # not secret, as the plan it stands for
    else:
        result = previous_placement(previous).apply(lambda placement: plan(fleet, placement))
    # Helm releases an interrupted `up` installed but never recorded are imported, not installed again
    infrastructure = build_infrastructure(fleet, adoptable_releases(fleet, fingerprints, recorded), skipped)
    placement = result.apply(lambda r: build_placement(fleet, r, infrastructure))
    pulumi.export("fleet", {"summary": fleet.summary(), "counts": fleet.counts()})
    pulumi.export("placement", result.apply(lambda r: r.document_data()))
    pulumi.export("capacity", result.apply(lambda r: r.capacity_data()))  # free devices (or nodes) per pool
    # What an `up` could not take back by applying again, per cluster (render/fingerprint.py; checkpoints.py)
    pulumi.export("infrastructure", fingerprints)
    # Exported through the built placement, so the run waits until every component is registered.
    pulumi.export("deployments", pulumi.Output.all(result, placement).apply(lambda pair: deployment_status(pair[0])))
    pulumi.export("services", service_urls(fleet, infrastructure))
    if infrastructure.gateway is not None:
        pulumi.export("gatewayAddress", infrastructure.gateway.address)
    # What `modelplane status` reads the live clusters with (a secret: never shown without --show-secrets).
    kubeconfigs = {name: cluster.kubeconfig for name, cluster in infrastructure.clusters.items()}
    kubeconfigs.update({name: cluster.kubeconfig for name, cluster in skipped.items()})
    if infrastructure.gateway is not None:
        kubeconfigs[infrastructure.gateway.cluster] = infrastructure.gateway.kubeconfig
    pulumi.export("kubeconfigs", pulumi.Output.secret(kubeconfigs))
    pulumi.export(
        "clusters",
        {
            name: {
                "source": fleet.inference_clusters[name].cluster.source,
                "gatewayAddress": cluster.serving_stack.address,
            }
            for name, cluster in infrastructure.clusters.items()
        }
        | {
            name: {"source": fleet.inference_clusters[name].cluster.source, "gatewayAddress": cluster.address}
            for name, cluster in skipped.items()
        },
    )
    if up_run is not None:  # what the next `modelplane up` compares with (unchanged_clusters.py)
        pulumi.export(skip.OUTPUT, skip.fingerprint_output(up_run, fleet, result, code_digest()))
    start_registrations()
    return Program(fleet, result, infrastructure, placement)
