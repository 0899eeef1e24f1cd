"""`PULUMI_SKIP_CHECKPOINTS`: allowed unless the `up` creates or changes a cluster the program provisions.

By default the engine saves the whole state after every step; at fleet size that is most of an
`up`'s time, and it grows with the square of the fleet (docs/pulumi.md, "At fleet size"). With
`PULUMI_SKIP_CHECKPOINTS=true` it saves once, at the end, so an engine killed in the middle
leaves the state of the previous `up`. The next `up` then applies again what the killed one had
created: a Kubernetes object is adopted (server-side apply), a Helm release is imported
(release_adoption.py), but a cloud or kind cluster would be created a second time. So with the
variable set, an `up` that would create or change a provisioned cluster (or its serving stack,
whose releases cannot be listed before the cluster's kubeconfig exists) stops before anything is
registered; a preview warns. Existing clusters, new or changed, and every replica change go ahead.
The last recorded state of each cluster is the `infrastructure` stack output (render/fingerprint.py).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import pulumi

SKIP_CHECKPOINTS = "PULUMI_SKIP_CHECKPOINTS"


def skipping(environ: Mapping[str, str] = os.environ) -> bool:
    """What the engine reads: "1" or "true" in any case."""
    value = environ.get(SKIP_CHECKPOINTS, "")
    return value == "1" or value.lower() == "true"


@dataclass(frozen=True)
class Unrecorded:
    """A cluster whose infrastructure the last `up` did not record as it is now."""

    cluster: str
    reason: Literal["new", "changed"]

    def __str__(self) -> str:
        return f"{self.cluster} ({'new' if self.reason == 'new' else 'its cluster or serving stack changed'})"


def builds(now: Mapping[str, str], recorded: object) -> list[Unrecorded]:
    """The clusters this update would create or change beyond replicas, compared with the last `up`."""
    before = recorded if isinstance(recorded, Mapping) else {}
    out = []
    for cluster, fingerprint in sorted(now.items()):
        if cluster not in before:
            out.append(Unrecorded(cluster, "new"))
        elif before[cluster] != fingerprint:
            out.append(Unrecorded(cluster, "changed"))
    return out


def check(now: Mapping[str, str], recorded: object, provisioned: Collection[str], dry_run: bool) -> None:
    """Under `PULUMI_SKIP_CHECKPOINTS`, stop an `up` that builds a provisioned cluster (warn in a preview)."""
    changes = [change for change in builds(now, recorded) if change.cluster in provisioned]
    if not changes:
        return
    message = (
        f"{SKIP_CHECKPOINTS} is set, and this update creates or changes a cluster the program provisions, which a "
        f"second `pulumi up` would create again if this one were interrupted: {', '.join(map(str, changes))}. Run it "
        f"with checkpoints (`env -u {SKIP_CHECKPOINTS} scripts/private-tmpdir.sh pulumi up`); keep {SKIP_CHECKPOINTS} "
        "for the rest (docs/pulumi.md, 'At fleet size')."
    )
    if dry_run:
        pulumi.log.warn(message)
        return
    pulumi.log.error(message)
    raise pulumi.RunError(f"{SKIP_CHECKPOINTS} refused for this update (above); nothing was changed")
