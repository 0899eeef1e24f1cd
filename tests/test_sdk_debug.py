"""The SDK's own debug messages are not sent to the engine; the program's and providers' are (infra/sdk_debug.py).

Each is a synchronous RPC on the program's event loop, three or four per resource: at fleet size the program
waited on them for half of an unchanged preview.
"""
from __future__ import annotations

import logging

import pulumi.log as sdk_log
import pytest
from program_run import deploy, stack_config

from modelplane.infra import sdk_debug


@pytest.fixture
def sent(monkeypatch):
    """The debug messages that reach the engine's Log, with the filter installed fresh."""
    messages: list[str] = []
    monkeypatch.setattr(sdk_log, "debug", lambda msg, *args, **kwargs: messages.append(msg))
    return messages


def _debug_from(module: str, message: str) -> None:
    exec("import pulumi.log\npulumi.log.debug(message)", {"__name__": module, "message": message})


@pytest.mark.parametrize(("caller", "dropped"), [
    ("pulumi.runtime.resource", True),
    ("pulumi.runtime.rpc_manager", True),
    ("modelplane.infra.backends.kind", False),  # the program's own
    ("pulumi_kubernetes.provider", False),
    ("__main__", False),
])
def test_only_the_sdk_runtime_messages_are_dropped(sent, caller, dropped):
    assert sdk_debug.drop_sdk_debug_messages(env={})
    _debug_from(caller, "hello")
    assert sent == ([] if dropped else ["hello"])


def test_installing_twice_wraps_once(sent):
    assert sdk_debug.drop_sdk_debug_messages(env={}) and sdk_debug.drop_sdk_debug_messages(env={})
    assert not getattr(sdk_log.debug.__wrapped__, "drops_sdk_messages", False)


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_the_environment_keeps_them(sent, value):
    assert not sdk_debug.drop_sdk_debug_messages(env={sdk_debug.KEEP_VARIABLE: value})
    _debug_from("pulumi.runtime.resource", "registering resource: ty=x")
    assert sent == ["registering resource: ty=x"]


def test_the_program_sends_no_sdk_debug_message_per_resource(monitor, mocks, caplog):
    """The demo stack under mocks: every resource registered, not one "registering resource" message to the engine."""
    with caplog.at_level(logging.DEBUG):
        deployed = deploy(monitor, mocks, stack_config("demo"))
    assert len(deployed.seen.all) > 50
    sdk_messages = [r.getMessage() for r in caplog.records
                    if r.getMessage().startswith(("registering resource", "resource registration", "register resource"))]
    assert sdk_messages == []
