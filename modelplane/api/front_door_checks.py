"""What `validate` says about the front door as a whole: settings that do nothing, and a credential left readable."""

from __future__ import annotations

from .errors import ConfigIssue
from .fleet import Fleet


def check_front_door(fleet: Fleet) -> tuple[list[ConfigIssue], list[ConfigIssue]]:
    """(errors, warnings) about the front door's proxy and the services' fallback settings."""
    errors: list[ConfigIssue] = []
    warnings: list[ConfigIssue] = []
    gateway = fleet.inference_gateway
    traefik = gateway is not None and gateway.proxy == "Traefik"
    for key, service in sorted(fleet.model_services.items()):
        if service.fallback is None:
            continue
        at = ("modelServices", key.namespace, key.name, "fallback")
        if traefik:
            errors.append(
                ConfigIssue(
                    at,
                    "needs the front door on Envoy Gateway (Traefik has no fallback tiers): set "
                    "modelplane:inferenceGateway.backend: EnvoyGateway, or remove it",
                )
            )
        elif not any(entry.fallback for entry in service.endpoints):
            warnings.append(ConfigIssue(at, "has no effect: none of the service's endpoints is `fallback: true`"))
    if traefik:
        for key, endpoint in sorted(fleet.model_endpoints.items()):
            if endpoint.auth is not None:
                warnings.append(
                    ConfigIssue(
                        ("modelEndpoints", key.namespace, key.name, "auth"),
                        f"with backend: Traefik the credential is written into a Traefik Middleware's spec (Traefik "
                        f"cannot read a header value from a Secret): anyone who can read Middlewares in namespace "
                        f"'{key.namespace}' on the front-door cluster can read it. The Envoy Gateway front door "
                        "(inferenceGateway.backend: EnvoyGateway) keeps it in a Secret, reachable only from the front "
                        "door itself",
                    )
                )
    return errors, warnings
