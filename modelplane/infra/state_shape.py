"""What each resource carries into the stack's state besides its own fields: the program's frames only.

With every registration the Python SDK sends the whole Python stack that made it, and the engine
keeps it in state for every resource. Under the engine that is about 19 frames, 5 of them
modelplane's and the rest asyncio, gRPC and threading: at fleet size a third of the state file
(4 clusters x 20 deployments: 32 % of 5.3 MB, `scripts/e2e.sh --scale`). The file backend rewrites
the whole file after every step of an `up`, so its size multiplies the time of every step.

`trim_stack_traces` keeps each trace down to its first run of frames in modelplane's own code (the
source position and how the program got there) and drops the runtime's frames below them. A trace with no frame of
modelplane's is sent as it is. The SDK function it replaces is private: if a new SDK lacks it, nothing
is trimmed (tests/test_state_shape.py fails, and the state is merely larger).

`program_trace` builds that trimmed trace itself rather than trimming the SDK's: the SDK formats every
frame of the stack (its source line read, its file name made a URI) to send five, and that cost
was 9 % of the program's CPU at fleet size (issue 27). tests/test_state_shape.py checks that both
give the same trace for every resource of a stack.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pulumi.runtime.resource as sdk_resource
from pulumi.runtime.proto import source_pb2

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


def program_trace(sdk_trace: Callable[[], Any]) -> Any:
    """`program_frames(sdk_trace())` (`sdk_trace`: the SDK's `_get_stack_trace`), formatting only the frames kept.

    As the SDK does: the frames outside the third `__init__` from the innermost (Resource's,
    CustomResource's or ComponentResource's, then the resource class's), each as its file's URI
    and line; none if there is no frame outside it.
    """
    if getattr(sys, "tracebacklimit", None) is not None:  # the SDK's trace is cut short: leave it to the SDK
        return program_frames(sdk_trace())
    frame: FrameType | None = sys._getframe(1)
    inits = 0
    while frame is not None and inits < 3:
        inits += frame.f_code.co_name == "__init__"
        frame = frame.f_back
    frames: list[Any] = []
    in_program = False
    while frame is not None:
        position = _position(frame.f_code.co_filename, frame.f_lineno)
        ours = position is not None and position.uri.startswith(PACKAGE_URI)
        if in_program and not ours:
            break
        in_program = in_program or ours
        frames.append(source_pb2.StackFrame(pc=position))
        frame = frame.f_back
    return source_pb2.StackTrace(frames=frames)  # with no frame of modelplane's: every frame, as program_frames


@functools.cache
def _uri(filename: str) -> str | None:
    try:
        return Path(filename).as_uri()
    except ValueError:  # as the SDK: a frame whose file is no absolute path (`<string>`) has no position
        return None


def _position(filename: str, line: int | None) -> Any:
    """`sdk_resource._get_source_position_for_frame` of a frame in `filename` at `line`."""
    if filename == "" or line is None:
        return None
    uri = _uri(filename)
    return None if uri is None else source_pb2.SourcePosition(uri=uri, line=line)


def trim_stack_traces() -> bool:
    """Send only the program's frames with every registration from now on. Idempotent; False if the SDK changed."""
    original = getattr(sdk_resource, "_get_stack_trace", None)
    if original is None:
        return False
    if getattr(original, "modelplane_trimmed", False):
        return True

    @functools.wraps(original)
    def trimmed() -> Any:
        return program_trace(original)

    trimmed.modelplane_trimmed = True  # type: ignore[attr-defined]
    sdk_resource._get_stack_trace = trimmed
    return True
