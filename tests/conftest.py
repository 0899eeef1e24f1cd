"""One set of Pulumi mocks for the whole suite (set_mocks is process-global: the last call wins)."""
from __future__ import annotations

import sys
from pathlib import Path

import pulumi
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every resource the program registers; echoes inputs back as outputs."""

    def __init__(self) -> None:
        self.created: list[tuple[str, str, dict]] = []
        self.stack_outputs: dict = {}  # what a stack reference to this stack reads (its last outputs)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.name, "outputs": self.stack_outputs, "secretOutputNames": []}
        self.created.append((args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


MOCKS = RecordingMocks()
# preview=False: under preview, unknown outputs silently skip assertions inside apply().
pulumi.runtime.set_mocks(MOCKS, project="modelplane", stack="test", preview=False, organization="organization")


@pytest.fixture
def mocks() -> RecordingMocks:
    MOCKS.created.clear()
    MOCKS.stack_outputs = {}
    return MOCKS


@pytest.fixture
def repo() -> Path:
    return REPO
