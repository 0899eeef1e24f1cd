"""The whole Pulumi program under the suite's recording mocks, as tests drive it: config in, registrations out."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.sync_await import _sync_await

from builders import floats, stack_config  # noqa: F401  (stack_config: for the tests that deploy a stack)
from modelplane.infra import program
from modelplane.scheduling import PlanResult

PROVIDER = "pulumi:providers:kubernetes"
RELEASE = "kubernetes:helm.sh/v3:Release"


def set_stack_config(config: dict, secret_keys: tuple[str, ...] = ()) -> None:
    """What the engine hands the program: `modelplane:` keys, structured values as JSON text."""
    pulumi.runtime.set_all_config(
        {f"modelplane:{k}": json.dumps(v) for k, v in config.items()}, [f"modelplane:{k}" for k in secret_keys]
    )





@dataclass
class Deployed:
    result: PlanResult
    seen: "Registered"
    outputs: dict


def deploy(monitor, mocks, config: dict, previous: PlanResult | None = None, recorded: dict | None = None) -> Deployed:
    """One `pulumi up` under mocks, returned once every resource is registered.

    `previous` is fed back as this stack's last `placement` output (numbers as floats, as a stack
    reference reads them); `recorded` adds other outputs of the last update.
    """
    captured = {}
    monitor.registrations.clear()
    mocks.stack_outputs = {"placement": floats(previous.document_data())} if previous is not None else {}
    mocks.stack_outputs.update(recorded or {})

    @pulumi.runtime.test
    def up():
        set_stack_config(config)
        ran = program.run()
        return ran.result.apply(lambda r: captured.setdefault("result", r))

    up()
    outputs = {key: _sync_await(pulumi.Output.from_input(value).future())
               for key, value in get_root_resource().outputs.items()}
    return Deployed(captured["result"], Registered(monitor.registrations), outputs)


class Registered:
    """Views of the monitor's registrations."""

    def __init__(self, registrations):
        self.all = list(registrations)
        self.by_urn = {r.urn: r for r in self.all}

    def of_type(self, type_: str):
        return [r for r in self.all if r.type == type_]

    def named(self, type_: str, name: str):
        matches = [r for r in self.all if r.type == type_ and r.name == name]
        assert len(matches) == 1, (type_, name, [r.name for r in self.of_type(type_)])
        return matches[0]

    def children(self, parent):
        return [r for r in self.all if r.parent == parent.urn]

    def ancestors(self, registration):
        out = []
        while registration.parent and registration.parent in self.by_urn:
            registration = self.by_urn[registration.parent]
            out.append(registration)
        return out

    def provider_of(self, registration) -> str | None:
        return registration.provider_name

    def engine_of(self, replica: str):
        """The replica's engine Deployment (the other Deployment is its endpoint picker, `-epp`)."""
        component = self.named("modelplane:index:ModelReplica", replica)
        [engine] = [r for r in self.children(component)
                    if r.type == "kubernetes:apps/v1:Deployment" and not r.name.endswith("-epp")]
        return engine
