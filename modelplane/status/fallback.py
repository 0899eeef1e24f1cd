"""What the front door does with each service's fallback tier, in words (`modelplane status` prints it).

The numbers are the ones the front door is rendered with (`render.envoy_policy.overprovisioning_factor`),
so what status says is what Envoy does.
"""

from __future__ import annotations

from ..api.fleet import Fleet
from ..render.envoy_policy import overprovisioning_factor, spill_threshold


def fallback_lines(fleet: Fleet) -> list[str]:
    """One line per ModelService with `fallback: true` endpoints (Envoy Gateway front door only)."""
    gateway = fleet.inference_gateway
    if gateway is None or gateway.proxy != "EnvoyGateway":
        return []
    lines = []
    for key, service in sorted(fleet.model_services.items()):
        if not any(entry.fallback for entry in service.endpoints):
            continue
        policy = service.fallback
        factor = overprovisioning_factor(policy)
        if policy is None or policy.when == "AllPrimariesDown":
            when = "only while none of its other endpoints is healthy (fallback.when: AllPrimariesDown)"
        else:
            when = (
                f"once fewer than {spill_threshold(factor):.2f}% of its other endpoints are healthy, a share of "
                f"100 - min(100, {factor} x healthy / total) percent (fallback.when: BelowHealthy "
                f"{policy.healthy_percent}%)"
            )
        lines.append(f"{key.namespace}/{key.name}: the front door sends requests to its fallback endpoints {when}")
    return lines
