"""One set of Pulumi mocks for the whole suite (set_mocks is process-global: the last call wins).

`RecordingMonitor` sees each registration as the engine would (parent, provider, dependencies,
which inputs are secret, and the resource options the request carries: retainOnDelete,
customTimeouts, ignoreChanges, deleteBeforeReplace, ...); `RecordingMocks` answers them. Output
hooks per resource type stand in for what a real provider computes (a cluster's kubeconfig, a
Gateway's address).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _sync_await

from cloud_mocks import CLOUD_OUTPUTS


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
    # Resource options, as the RegisterResource request carries them (wire names in comments).
    # Provider-specific settings travel as inputs instead (a kubernetes Provider's
    # kubeconfig), and await settings as annotations (`pulumi.com/waitFor`).
    protect: bool | None = None  # protect (unset: None)
    retain_on_delete: bool | None = None  # retainOnDelete (unset: None)
    delete_before_replace: bool | None = None  # deleteBeforeReplace, None unless deleteBeforeReplaceDefined
    ignore_changes: list[str] = field(default_factory=list)  # ignoreChanges (input paths, camelCase)
    replace_on_changes: list[str] = field(default_factory=list)  # replaceOnChanges
    custom_timeouts: dict[str, str] | None = None  # customTimeouts {create, update, delete, read} that are set
    additional_secret_outputs: list[str] = field(default_factory=list)  # additionalSecretOutputs
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)  # propertyDependencies
    providers: dict[str, str] = field(default_factory=dict)  # providers (a component's, by package)
    aliases: list[Any] = field(default_factory=list)  # aliases (specs as dicts) then aliasURNs
    deleted_with: str | None = None  # deletedWith
    replace_with: list[str] = field(default_factory=list)  # replace_with
    version: str | None = None  # version (the provider plugin's)
    plugin_download_url: str | None = None  # pluginDownloadURL
    import_id: str | None = None  # importId
    remote: bool = False  # remote (a provider-side component)
    hide_diffs: list[str] = field(default_factory=list)  # hideDiffs
    replacement_trigger: Any = None  # replacement_trigger, as plain data
    supports_partial_values: bool = False  # supportsPartialValues

    def depends_on(self, other: "Registration") -> bool:
        """Whether the engine orders this resource after `other` (an explicit or input dependency)."""
        return other.urn in self.dependencies or any(other.urn in urns for urns in self.property_dependencies.values())

    @property
    def parent_name(self) -> str | None:
        return self.parent.rsplit("::", 1)[-1] if self.parent else None

    @property
    def provider_name(self) -> str | None:
        """The name of the explicit provider (`urn::id` in the request), or None for the default one."""
        return self.provider.split("::")[3] if self.provider else None


def _plain(value: Any) -> Any:
    """A wire value as plain data: secrets unwrapped, resource references as their URN.

    (The SDK's own deserializer would rehydrate resource references as new resources, registering
    lookups from the monitor's thread.)
    """
    if isinstance(value, dict):
        sig = value.get(rpc._special_sig_key)
        if sig == rpc._special_secret_sig:
            return _plain(value.get("value"))
        if sig == rpc._special_resource_sig:
            return value.get("urn")
        if sig == rpc._special_output_value_sig:
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value == rpc.UNKNOWN:
        return None
    return value


def _holds_secret(value: Any) -> bool:
    if isinstance(value, dict):
        return value.get(rpc._special_sig_key) == rpc._special_secret_sig or any(map(_holds_secret, value.values()))
    return isinstance(value, list) and any(map(_holds_secret, value))


def _secret_keys(struct) -> set[str]:
    """Top-level inputs that are, or contain, a secret."""
    return {key for key, value in json_format.MessageToDict(struct).items() if _holds_secret(value)}


def _options(request) -> dict[str, Any]:
    """The resource options of a RegisterResource request, as `Registration` fields."""
    timeouts = None
    if request.HasField("customTimeouts"):
        t = request.customTimeouts
        timeouts = {key: value for key in ("create", "update", "delete", "read") if (value := getattr(t, key))}
    aliases: list[Any] = [json_format.MessageToDict(alias) for alias in request.aliases]
    aliases += list(request.aliasURNs)
    trigger = None
    if request.HasField("replacement_trigger"):
        trigger = _plain(json_format.MessageToDict(request.replacement_trigger))
    return dict(
        protect=request.protect if request.HasField("protect") else None,
        retain_on_delete=request.retainOnDelete if request.HasField("retainOnDelete") else None,
        delete_before_replace=request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
        ignore_changes=list(request.ignoreChanges),
        replace_on_changes=list(request.replaceOnChanges),
        custom_timeouts=timeouts,
        additional_secret_outputs=list(request.additionalSecretOutputs),
        property_dependencies={key: list(deps.urns) for key, deps in request.propertyDependencies.items()},
        providers=dict(request.providers),
        aliases=aliases,
        deleted_with=request.deletedWith or None,
        replace_with=list(request.replace_with),
        version=request.version or None,
        plugin_download_url=request.pluginDownloadURL or None,
        import_id=request.importId or None,
        remote=bool(request.remote),
        hide_diffs=list(request.hideDiffs),
        replacement_trigger=trigger,
        supports_partial_values=bool(request.supportsPartialValues),
    )


# Outputs a real provider would compute, by resource type: inputs -> extra outputs.
def gateway_status(inputs: dict) -> dict:
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
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": gateway_status,
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


class PlainMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, never rehydrating resource references.

    The SDK's own RegisterResource deserializes inputs with resource references (e.g. an EKS node
    group's `cluster`) into new resources on the monitor's thread and its own event loop: their
    registrations then run on a loop nobody drives while the program's loop waits for them, so a run
    now and then never ends (benchmarks/bench_program.py's `cloud` probe hung in 3 of 26 runs), and
    the next program run in the same process awaits them from another loop. Plain data with URNs is
    all mocks need.
    """

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        pulumi_mocks._ensure_event_loop()
        inputs = _plain(json_format.MessageToDict(request.object))
        args = pulumi.runtime.MockResourceArgs(typ=request.type, name=request.name, inputs=inputs,
                                               provider=request.provider, resource_id=request.importId,
                                               custom=request.custom or False)
        id_, state = self.mocks.new_resource(args)
        response_object = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, id_, state)
        self.registered(request, urn, inputs)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=response_object)

    def registered(self, request, urn: str, inputs: dict) -> None:
        """Told of each registration once the mocks answered it."""


class RecordingMonitor(PlainMonitor):
    """`PlainMonitor`, recording each registration."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.stack_traces: dict[str, list[str]] = {}  # urn -> the frames sent (URI#line), innermost first

    def registered(self, request, urn: str, inputs: dict) -> None:
        self.stack_traces[urn] = [f"{f.pc.uri}#{f.pc.line}" for f in request.stackTrace.frames]
        self.registrations.append(Registration(
            urn=urn, type=request.type, name=request.name, inputs=inputs, parent=request.parent or None,
            provider=request.provider or None, dependencies=list(request.dependencies),
            custom=bool(request.custom), secret_inputs=_secret_keys(request.object), **_options(request)))


MOCKS = RecordingMocks()
MONITOR = RecordingMonitor(MOCKS)
# preview=False: under preview, unknown outputs silently skip assertions inside apply().
pulumi.runtime.set_mocks(MOCKS, project="modelplane", stack="test", preview=False, monitor=MONITOR,
                         organization="organization")
