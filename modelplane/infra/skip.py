"""The program's side of `modelplane up` (unchanged_clusters.py): record each cluster's fingerprint, and leave
out the clusters the command found unchanged, after checking each of them again.

`modelplane up` hosts the program in its own process and tells it, in `MODELPLANE_UP`, the update's nonce and
the clusters it left out with their fingerprints. Under a plain `pulumi up` the variable is unset: every cluster
is registered, and no fingerprint is recorded, so the next `modelplane up` is a full one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from ..api import Fleet
from ..render.fingerprint import skippable_clusters, workload_fingerprints
from ..scheduling import PlanResult
from ..unchanged_clusters import ENV, OUTPUT, UpRun


@dataclass(frozen=True)
class SkippedCluster:
    """A cluster left out of this update: what the rest of the fleet reads of it, from the last update's outputs."""

    address: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]


def from_environment(env: Mapping[str, str] = os.environ) -> UpRun | None:
    text = env.get(ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
        skip = {str(k): str(v) for k, v in (value.get("skip") or {}).items()}
        return UpRun(str(value["update"]), skip, str(value.get("trusted") or ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise pulumi.RunError(f"{ENV} is not what `modelplane up` sets; unset it and run again") from None


def fingerprint_output(run: UpRun, fleet: Fleet, result: pulumi.Output[PlanResult], code: str) -> pulumi.Output[Any]:
    """The stack output `clusterFingerprints`: a secret (a fingerprint hashes the clusters' credentials)."""
    return pulumi.Output.secret(
        result.apply(lambda r: {"update": run.update, "clusters": workload_fingerprints(fleet, r, code)})
    )


def skipped_clusters(
    run: UpRun, fleet: Fleet, result: PlanResult, code: str, previous: Mapping[str, Any]
) -> dict[str, SkippedCluster]:
    """The clusters to leave out, each checked again: a stale decision stops the update before anything is registered.

    Stale: the config changed since (this run's fingerprint differs), or another update ran since (the engine,
    which holds the stack's lock now, reports other recorded fingerprints than the decision read)."""
    if not run.skip:
        return {}
    allowed = set(skippable_clusters(fleet))
    now = workload_fingerprints(fleet, result, code)
    value = previous.get(OUTPUT)
    recorded: dict[str, Any] = value if isinstance(value, dict) else {}
    same_update = bool(run.trusted) and recorded.get("update") == run.trusted
    recorded_clusters = recorded.get("clusters") or {}
    clusters, kubeconfigs = previous.get("clusters") or {}, previous.get("kubeconfigs") or {}
    out: dict[str, SkippedCluster] = {}
    for name, fingerprint in sorted(run.skip.items()):
        address = (clusters.get(name) or {}).get("gatewayAddress")
        unchanged = same_update and now.get(name) == fingerprint == recorded_clusters.get(name)
        if name not in allowed or not unchanged or address is None or name not in kubeconfigs:
            raise pulumi.RunError(
                f"cluster {name} or the stack changed after `modelplane up` decided to leave the cluster out of this "
                "update; nothing was changed: run `modelplane up` again"
            )
        out[name] = SkippedCluster(pulumi.Output.from_input(address), pulumi.Output.secret(kubeconfigs[name]))
    return out


__all__ = ["ENV", "OUTPUT", "SkippedCluster", "UpRun", "fingerprint_output", "from_environment", "skipped_clusters"]
