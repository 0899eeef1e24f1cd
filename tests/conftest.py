"""One set of Pulumi mocks for the whole suite (set_mocks is process-global: the last call wins).

`RecordingMonitor` sees each registration as the engine would (parent, provider, dependencies,
which inputs are secret); `RecordingMocks` answers them. Output hooks per resource type stand in
for what a real provider computes (a cluster's kubeconfig, a Gateway's address).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cloud_mocks import CLOUD_OUTPUTS  # noqa: E402  (needs the path above)


@dataclass
class Registration:
    """One resource as the engine received it."""

    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str | None
    provider: str | None
    dependencies: list[str]
    custom: bool
    secret_inputs: set[str] = field(default_factory=set)  # top-level inputs sent as secrets

    @property
    def parent_name(self) -> str | None:
        return self.parent.rsplit("::", 1)[-1] if self.parent else None

    @property
    def provider_name(self) -> str | None:
        """The name of the explicit provider (`urn::id` in the request), or None for the default one."""
        return self.provider.split("::")[3] if self.provider else None


def _secret_keys(struct) -> set[str]:
    raw = json_format.MessageToDict(struct)
    return {key for key, value in raw.items()
            if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig}


# Outputs a real provider would compute, by resource type: inputs -> extra outputs.
def _gateway_status(inputs: dict) -> dict:
    """A programmed Gateway: the front door's and the workload clusters' get different addresses."""
    address = "172.18.255.193" if inputs["metadata"]["name"] == "modelplane" else "172.18.255.200"
    return {"status": {"addresses": [{"type": "IPAddress", "value": address}]}}


KIND_KUBECONFIG = ("apiVersion: v1\nkind: Config\nclusters:\n- name: kind\n  cluster:\n"
                   "    server: https://127.0.0.1:6443\nusers:\n- name: kind\n  user:\n"
                   "    client-key-data: c2VjcmV0LWtleQ==\n")
KIND_NETWORK = '[{"Subnet":"fc00:f853:ccd:e793::/64"},{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"}]'


def _local_command(inputs: dict) -> dict:
    """What `kind get kubeconfig` and `docker network inspect` print on a laptop with kind."""
    create = inputs.get("create", "")
    if "kind get kubeconfig" in create or create.startswith("kind get kubeconfig"):
        return {"stdout": KIND_KUBECONFIG, "stderr": ""}
    if "docker network inspect" in create:
        return {"stdout": KIND_NETWORK, "stderr": ""}
    return {"stdout": "", "stderr": ""}


OUTPUT_HOOKS: dict[str, Callable[[dict], dict]] = {
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": _gateway_status,
    "command:local:Command": _local_command,
    **CLOUD_OUTPUTS,
}


class RecordingMocks(pulumi.runtime.Mocks):
    """Echoes inputs back as outputs (plus OUTPUT_HOOKS); answers the self stack reference."""

    def __init__(self) -> None:
        self.created: list[tuple[str, str, dict]] = []
        self.stack_outputs: dict = {}  # what a stack reference to this stack reads (its last outputs)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.name, "outputs": self.stack_outputs, "secretOutputNames": []}
        self.created.append((args.typ, args.name, dict(args.inputs)))
        outputs = dict(args.inputs)
        if (hook := OUTPUT_HOOKS.get(args.typ)) is not None:
            outputs.update(hook(dict(args.inputs)))
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        if (hook := OUTPUT_HOOKS.get(args.token)) is not None:
            return hook(dict(args.args))
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            pulumi_mocks._ensure_event_loop()
            self.registrations.append(Registration(
                urn=response.urn, type=request.type, name=request.name,
                inputs=rpc.deserialize_properties(request.object), parent=request.parent or None,
                provider=request.provider or None, dependencies=list(request.dependencies),
                custom=bool(request.custom), secret_inputs=_secret_keys(request.object)))
        return response


MOCKS = RecordingMocks()
MONITOR = RecordingMonitor(MOCKS)
# preview=False: under preview, unknown outputs silently skip assertions inside apply().
pulumi.runtime.set_mocks(MOCKS, project="modelplane", stack="test", preview=False, monitor=MONITOR,
                         organization="organization")


@pytest.fixture
def mocks() -> RecordingMocks:
    MOCKS.created.clear()
    MOCKS.stack_outputs = {}
    MONITOR.registrations.clear()
    return MOCKS


@pytest.fixture
def monitor(mocks) -> RecordingMonitor:
    return MONITOR


@pytest.fixture
def repo() -> Path:
    return REPO
