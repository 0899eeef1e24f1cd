"""What each resource carries into state besides its fields: only the program's own frames (infra/state_shape.py).

Without the trim every registration carries the whole Python stack (asyncio, gRPC, threading
frames below the program's): a third of the state file at fleet size, which the file backend
rewrites after every step of an `up`.
"""
from __future__ import annotations

import pytest
from pulumi.runtime.proto import source_pb2

from modelplane.infra import state_shape
from program_run import deploy, stack_config


def _trace(*uris: str) -> source_pb2.StackTrace:
    return source_pb2.StackTrace(frames=[source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=u, line=i + 1))
                                         for i, u in enumerate(uris)])


OURS = state_shape.PACKAGE_URI + "infra/kube.py"
CASES = [
    # (frames sent by the SDK, frames kept)
    ([OURS, OURS, "file:///usr/lib/python3/asyncio/events.py", "file:///usr/lib/python3/threading.py"], 2),
    ([OURS, OURS], 2),  # nothing below the program: kept whole
    (["file:///site-packages/pulumi_kubernetes/provider.py", OURS, OURS, "file:///asyncio/events.py", OURS], 3),
    (["file:///somewhere/else/__main__.py"], 1),  # not registered by modelplane: sent as it is
    ([], 0),
]


@pytest.mark.parametrize(("uris", "kept"), CASES)
def test_only_the_leading_modelplane_frames_are_kept(uris, kept):
    trimmed = state_shape.program_frames(_trace(*uris))
    assert [f.pc.uri for f in trimmed.frames] == uris[:kept]
    assert [f.pc.line for f in trimmed.frames] == list(range(1, kept + 1))  # the source position is unchanged


def test_the_program_sends_only_its_own_frames(monitor, mocks):
    """Every resource of the demo stack reaches the engine with modelplane frames only, the first where it was made."""
    deploy(monitor, mocks, stack_config("demo"))
    traces = {r.urn: monitor.stack_traces[r.urn] for r in monitor.registrations if r.urn in monitor.stack_traces}
    assert len(traces) > 50
    # each trace ends in modelplane's program (program.py), nothing of the runtime or the test harness below it
    assert all(t[-1].startswith(state_shape.PACKAGE_URI + "infra/program.py#") for t in traces.values())
    assert max(len(t) for t in traces.values()) <= 10
    objects = [t for urn, t in traces.items() if "kubernetes:apps/v1:Deployment" in urn]
    assert objects and all(t[0].startswith(state_shape.PACKAGE_URI + "infra/") for t in objects)


def test_trimming_twice_wraps_once():
    assert state_shape.trim_stack_traces() and state_shape.trim_stack_traces()
    wrapped = state_shape.sdk_resource._get_stack_trace
    assert wrapped.modelplane_trimmed and not getattr(wrapped.__wrapped__, "modelplane_trimmed", False)


def test_the_program_builds_the_trace_the_sdk_would_send_trimmed(monitor, mocks, monkeypatch):
    """`program_trace` formats only the frames it keeps; for every resource of the demo stack it gives exactly
    `program_frames` of the SDK's whole trace, taken at the same call."""
    current = state_shape.sdk_resource._get_stack_trace
    sdk_trace = getattr(current, "__wrapped__", current)
    compared = []

    def both():
        expected = state_shape.program_frames(sdk_trace())
        built = state_shape.program_trace(sdk_trace)
        compared.append((list(expected.frames), list(built.frames)))
        return built

    both.modelplane_trimmed = True  # the program keeps it (trim_stack_traces)
    monkeypatch.setattr(state_shape.sdk_resource, "_get_stack_trace", both)
    deploy(monitor, mocks, stack_config("demo"))
    assert len(compared) > 50 and any(expected for expected, _ in compared)
    assert [expected for expected, _ in compared] == [built for _, built in compared]


def test_a_trace_with_no_frame_of_the_program_is_built_whole():
    """Made outside modelplane (three `__init__`s deep, as a resource is): every frame outside them."""
    current = state_shape.sdk_resource._get_stack_trace
    sdk_trace = getattr(current, "__wrapped__", current)

    class Resource:
        def __init__(self):
            self.trace = Custom()

    class Custom:
        def __init__(self):
            self.trace = Concrete()

    class Concrete:
        def __init__(self):
            self.expected = state_shape.program_frames(sdk_trace())
            self.built = state_shape.program_trace(sdk_trace)

    made = Resource().trace.trace
    assert made.expected.frames and list(made.expected.frames) == list(made.built.frames)
