"""The Python SDK's own debug messages, not sent: they held the program up for half of an unchanged `up`.

For every resource the SDK sends the engine three or four debug messages of its own ("registering
resource", "resource registration prepared", "… successful", "register resource outputs …"), each a
synchronous `Engine.Log` RPC made on the program's event loop: nothing else of the program runs until
the engine has answered. At fleet size the engine is busy, so those answers are slow. Sampled on the
4 x 20 fleet (`scripts/e2e.sh --scale` with MODELPLANE_E2E_PROGRAM_PROFILE), the program's loop spent
55 % of an unchanged preview waiting on them. The engine spent about 8 % of its CPU handling them, and
it shows them only under `pulumi up --debug`.

`drop_sdk_debug_messages` stops the messages whose caller is the SDK's runtime (`pulumi.runtime.*`).
A debug message of the program's own, or of a provider, is still sent. MODELPLANE_SDK_DEBUG=1 keeps
the SDK's messages too, for debugging the SDK itself (docs/pulumi.md).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pulumi.log as sdk_log

KEEP_VARIABLE = "MODELPLANE_SDK_DEBUG"
SDK_RUNTIME = "pulumi.runtime"


def drop_sdk_debug_messages(env: Mapping[str, str] = os.environ) -> bool:
    """Stop sending the SDK runtime's debug messages (idempotent); False if KEEP_VARIABLE asks to keep them."""
    if env.get(KEEP_VARIABLE, "").lower() in ("1", "true", "yes"):
        return False
    if not getattr(sdk_log.debug, "drops_sdk_messages", False):
        sdk_log.debug = _dropping_sdk_callers(sdk_log.debug)
    return True


def _dropping_sdk_callers(send: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(send)
    def debug(msg: str, *args: Any, **kwargs: Any) -> None:
        if sys._getframe(1).f_globals.get("__name__", "").startswith(SDK_RUNTIME):
            return
        send(msg, *args, **kwargs)

    debug.drops_sdk_messages = True  # type: ignore[attr-defined]
    return debug
