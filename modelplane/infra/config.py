"""Read the Fleet from the running Pulumi program's config (`pulumi.Config("modelplane")`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from ..api import Fleet, SecretValue, load_fleet
from ..api.errors import CONFIG_NAMESPACE


def read_config() -> dict[str, Any]:
    """Every `modelplane:` key the engine passed to the program, prefix removed.

    Structured values arrive as JSON text with secret leaves already decrypted; unknown keys are
    kept so the loader can reject typos. Read through the runtime rather than `Config.get_object`
    so a key holding one secret leaf does not warn on every read; secret-ness is restored per
    field by `secret_output`.
    """
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    prefix = f"{CONFIG_NAMESPACE}:"
    return {key[len(prefix) :]: runtime_config.get_config(key) for key in sorted(keys) if key.startswith(prefix)}


def secret_config_keys(keys: Iterable[str]) -> set[str]:
    """`modelplane:` keys (prefix removed) the engine marks secret: a key is marked as a whole when any
    leaf of it was set with `--secret`, and arrives decrypted, so no message may show its text."""
    prefix = f"{CONFIG_NAMESPACE}:"
    from_env = set(runtime_config.get_config_secret_keys_env())
    return {key for key in keys if runtime_config.is_config_secret(prefix + key) or prefix + key in from_env}


def load_fleet_from_pulumi() -> Fleet:
    config = read_config()
    return load_fleet(config, origin="pulumi", secret_keys=secret_config_keys(config))


def secret_output(value: SecretValue) -> pulumi.Output[str]:
    """A secret config field as a Pulumi secret: never shown in previews, outputs or state in clear."""
    if value.plaintext is None:
        raise ValueError("secret value is not available in this context")
    return pulumi.Output.secret(value.plaintext)
