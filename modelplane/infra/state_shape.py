"""What each resource carries into the stack's state besides its own fields: the program's frames only.

With every registration the Python SDK sends the whole Python stack that made it, and the engine
keeps it in state for every resource. Under the engine that is about 19 frames, 5 of them
modelplane's and the rest asyncio, gRPC and threading: at fleet size a third of the state file
(4 clusters x 20 deployments: 32 % of 5.3 MB, `scripts/e2e.sh --scale`). The file backend rewrites
the whole file after every step of an `up`, so its size multiplies the time of every step.

`trim_stack_traces` keeps each trace down to its first run of frames in modelplane's own code (the
source position and how the program got there) and drops the runtime's frames below them. A trace with no frame of
modelplane's is sent as it is. The SDK function it wraps is private: if a new SDK lacks it, nothing
is trimmed (tests/test_state_shape.py fails, and the state is merely larger).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pulumi.runtime.resource as sdk_resource

# The package folder as the SDK spells it in a frame's URI (`file:///…/modelplane/`).
PACKAGE_URI = Path(__file__).resolve().parents[1].as_uri() + "/"


def program_frames(trace: Any) -> Any:
    """`trace` (an RPC StackTrace, innermost frame first) cut after its first run of modelplane frames.

    Frames before that run stay: a resource class of a provider SDK can add its own (its `__init__`
    calls `_internal_init`), and the source position is the first frame.
    """
    ours = [frame.pc.uri.startswith(PACKAGE_URI) for frame in trace.frames]
    if True not in ours:
        return trace
    end = ours.index(True)
    while end < len(ours) and ours[end]:
        end += 1
    del trace.frames[end:]
    return trace


def trim_stack_traces() -> bool:
    """Send only the program's frames with every registration from now on. Idempotent; False if the SDK changed."""
    original = getattr(sdk_resource, "_get_stack_trace", None)
    if original is None:
        return False
    if getattr(original, "modelplane_trimmed", False):
        return True

    @functools.wraps(original)
    def trimmed() -> Any:
        return program_frames(original())

    trimmed.modelplane_trimmed = True  # type: ignore[attr-defined]
    sdk_resource._get_stack_trace = trimmed
    return True
