"""DRA devices as selectors see them (pure): an InferenceClass devices[] entry as the CEL `device`
value, and selectors evaluated against devices. The CEL engine itself is `modelplane.cel`."""

from .device import device_key, device_value
from .evaluation import SelectorCache, evaluate

__all__ = ["SelectorCache", "device_key", "device_value", "evaluate"]
