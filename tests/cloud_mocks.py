"""What cloud providers compute that the mocks must stand in for, by resource type or invoke token.

Each entry maps a type token (e.g. `eks:index:Cluster`) or an invoke token to a function from the
resource's inputs (or the invoke's args) to the extra outputs a real provider would report.
"""
from __future__ import annotations

from typing import Any, Callable

CLOUD_OUTPUTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
