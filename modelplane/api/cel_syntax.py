"""Parse-only check of device-selector CEL, so a syntax error fails validation, not a deploy.

Full compilation (known functions and fields, Kubernetes' cost limit) belongs to
`modelplane.devices`; this layer only needs to know the expression is CEL at all.
"""
from __future__ import annotations

from functools import lru_cache

import celpy
from celpy.celparser import CELParseError


@lru_cache(maxsize=4096)
def cel_syntax_problem(expression: str) -> str | None:
    """None if `expression` parses as CEL, else a message with the line, column and a caret."""
    try:
        celpy.Environment().compile(expression)
    except CELParseError as error:
        where = ""
        if getattr(error, "line", None) is not None:
            where = f" at line {error.line}, column {error.column}"
        context = str(error.args[0]).rstrip("\n") if error.args else ""
        caret = "\n      " + context.replace("\n", "\n      ") if context else ""
        return f"CEL syntax error{where}{caret}"
    except Exception as error:  # noqa: BLE001 - the parser raises lark internals on odd input
        return f"CEL syntax error: {error}"
    return None
