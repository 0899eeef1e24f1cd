"""Read the Fleet from the running Pulumi program's config (`pulumi.Config("modelplane")`)."""
from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from ..api import Fleet, SecretValue, load_fleet
from ..api.errors import CONFIG_NAMESPACE
from ..devices import selector_problem


def read_config() -> dict[str, Any]:
    """Every `modelplane:` key the engine passed to the program, prefix removed.

    Structured values arrive as JSON text with secret leaves already decrypted; unknown keys are
    kept so the loader can reject typos. Read through the runtime rather than `Config.get_object`
    so a key holding one secret leaf does not warn on every read; secret-ness is restored per
    field by `secret_output`.
    """
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    prefix = f"{CONFIG_NAMESPACE}:"
    return {key[len(prefix):]: runtime_config.get_config(key)
            for key in sorted(keys) if key.startswith(prefix)}


def load_fleet_from_pulumi() -> Fleet:
    return load_fleet(read_config(), origin="pulumi", selector_problem=selector_problem)


def secret_output(value: SecretValue) -> pulumi.Output[str]:
    """A secret config field as a Pulumi secret: never shown in previews, outputs or state in clear."""
    if value.plaintext is None:
        raise ValueError("secret value is not available in this context")
    return pulumi.Output.secret(value.plaintext)
