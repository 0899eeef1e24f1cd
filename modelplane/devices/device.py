"""The `device` value a selector sees, built from an InferenceClass `devices[]` entry.

As Kubernetes builds it from a ResourceSlice: a name without '/' lives under the device's driver
as domain, `domain/id` under its own domain; versions are strict semver; capacities are
quantities in the canonical form the API server stores them in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..api.inference_class import DeviceSpec
from ..cel.errors import SelectorEvaluationError
from ..cel.interpreter import DeviceValue, DomainMap
from ..cel.quantity import Quantity, QuantityError
from ..cel.semver import Semver, SemverError

# Fields of a devices[] entry that a selector cannot see.
_INVISIBLE = ("name", "claim", "count", "deviceClassName")


def device_key(device: Mapping[str, Any] | DeviceSpec) -> str:
    """What a selector can see of a device, as a stable string: equal keys, equal answers."""
    data = device.to_config() if isinstance(device, DeviceSpec) else dict(device)
    visible = {k: v for k, v in data.items() if k not in _INVISIBLE}
    visible.setdefault("attributes", {})
    visible.setdefault("capacity", {})
    for empty in [k for k in ("attributes", "capacity") if visible[k] is None]:
        visible[empty] = {}
    return json.dumps(visible, sort_keys=True, separators=(",", ":"))


def device_value(device: Mapping[str, Any] | DeviceSpec) -> DeviceValue:
    return device_value_for_key(device_key(device))


@lru_cache(maxsize=4096)
def device_value_for_key(key: str) -> DeviceValue:
    data = json.loads(key)
    driver = data.get("driver") or ""
    attributes: DomainMap = DomainMap()
    for name, typed in (data.get("attributes") or {}).items():
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute(name, typed)
    capacity: DomainMap = DomainMap()
    for name, entry in (data.get("capacity") or {}).items():
        domain, ident = _split(name, driver)
        try:
            capacity.setdefault(domain, {})[ident] = Quantity.parse(str(entry["value"])).canonical()
        except (QuantityError, KeyError, TypeError) as error:
            raise SelectorEvaluationError(f"capacity {name}: invalid quantity: {error}") from None
    return DeviceValue(driver, attributes, capacity, bool(data.get("allowMultipleAllocations") or False))


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(name: str, typed: Mapping[str, Any]) -> object:
    if not isinstance(typed, Mapping) or len([v for v in typed.values() if v is not None]) != 1:
        raise SelectorEvaluationError(f"attribute {name}: unsupported attribute value")
    kind, value = next((k, v) for k, v in typed.items() if v is not None)
    if kind == "version":
        try:
            return Semver.parse(str(value))
        except SemverError as error:
            raise SelectorEvaluationError(f"attribute {name}: invalid version: {error}") from None
    expected = {"int": int, "bool": bool, "string": str}.get(kind)
    if expected is None or type(value) is not expected:
        raise SelectorEvaluationError(f"attribute {name}: unsupported attribute value")
    return value
