"""The Pulumi program: read config -> validate -> (plan -> build components) -> export outputs."""
from __future__ import annotations

import pulumi

from ..api import ConfigError, Fleet
from .config import load_fleet_from_pulumi


def load_or_fail() -> Fleet:
    """Bad config fails the preview before any resource is registered, listing every problem."""
    try:
        fleet = load_fleet_from_pulumi()
    except ConfigError as error:
        for issue in error.issues:
            pulumi.log.error(str(issue))
        noun = "error" if len(error.issues) == 1 else "errors"
        raise pulumi.RunError(f"{len(error.issues)} {noun} in the modelplane stack config (listed above); "
                              "nothing was changed") from None
    for warning in fleet.warnings:
        pulumi.log.warn(str(warning))
    return fleet


def run() -> Fleet:
    fleet = load_or_fail()
    pulumi.export("fleet", {"summary": fleet.summary(), "counts": fleet.counts()})
    return fleet
