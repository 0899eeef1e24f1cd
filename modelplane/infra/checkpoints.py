"""`PULUMI_SKIP_CHECKPOINTS`: allowed for an `up` that only changes replicas, refused for one that builds.

By default the engine saves the whole state after every step; at fleet size that is most of an
`up`'s time, and it grows with the square of the fleet (docs/pulumi.md, "At fleet size"). With
`PULUMI_SKIP_CHECKPOINTS=true` it saves once, at the end, so an engine killed in the middle
leaves the state of the previous `up`. The next `up` then applies again what the killed one had
created: a Kubernetes object is adopted (server-side apply), but a cluster would be created a
second time and a Helm release would fail to install ("cannot re-use a name that is still in
use"). So with the variable set, an `up` whose clusters or serving stacks differ from the last
recorded ones (`render/fingerprint.py`, the `infrastructure` stack output) stops before anything
is registered; a preview warns. An `up` that scales, drains or moves replicas goes ahead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pulumi

SKIP_CHECKPOINTS = "PULUMI_SKIP_CHECKPOINTS"


def skipping(environ: Mapping[str, str] = os.environ) -> bool:
    """What the engine reads: "1" or "true" in any case."""
    value = environ.get(SKIP_CHECKPOINTS, "")
    return value == "1" or value.lower() == "true"


def builds(now: Mapping[str, str], recorded: object) -> list[str]:
    """The clusters this update would create or change beyond replicas, each with why, compared with the last `up`."""
    before = recorded if isinstance(recorded, Mapping) else {}
    out = []
    for cluster, fingerprint in sorted(now.items()):
        if cluster not in before:
            out.append(f"{cluster} (new)")
        elif before[cluster] != fingerprint:
            out.append(f"{cluster} (its cluster or serving stack changed)")
    return out


def check(now: Mapping[str, str], recorded: object, dry_run: bool) -> None:
    """Under `PULUMI_SKIP_CHECKPOINTS`, stop an `up` that builds (warn in a preview); otherwise nothing."""
    changes = builds(now, recorded)
    if not changes:
        return
    message = (
        f"{SKIP_CHECKPOINTS} is set, and this update creates or changes what a second `pulumi up` could not "
        f"take over if this one were interrupted (a cluster, a Helm release): {', '.join(changes)}. Run it with "
        f"checkpoints (`env -u {SKIP_CHECKPOINTS} scripts/private-tmpdir.sh pulumi up`); keep {SKIP_CHECKPOINTS} for "
        "updates that only scale, drain or move replicas (docs/pulumi.md, 'At fleet size')."
    )
    if dry_run:
        pulumi.log.warn(message)
        return
    pulumi.log.error(message)
    raise pulumi.RunError(f"{SKIP_CHECKPOINTS} refused for this update (above); nothing was changed")
