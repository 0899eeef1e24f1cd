"""The status report as text, in `modelplane plan`'s style (pure formatting)."""

from __future__ import annotations

from ..render.types import HEALTH_PATH
from ..text_table import text_table as table
from .report import DEGRADED, UNREACHABLE, UNREADABLE, StatusReport

COLUMNS = ["REPLICA", "CLUSTER", "POOLS", "PODS", "CLAIMS", "ENDPOINT", "STATUS", "DRIFT"]


def status_table(report: StatusReport) -> str:
    lines = [
        f"stack {report.stack}: the live fleet, read from each cluster's API server now",
        f"endpoints probed from this machine the way the front door probes them: GET {HEALTH_PATH} on the "
        "replica's workload gateway, Host: the replica's virtual host, 200 expected"
        if report.probed
        else "endpoints not probed (--no-probe)",
        "",
    ]
    for deployment in report.deployments:
        lines.append(deployment.header)
        rows = [
            [
                r.replica.name,
                r.replica.cluster,
                ",".join(r.replica.pools) or "-",
                r.pods_text,
                r.claims_text,
                r.endpoint_text,
                r.health,
                r.replica.drift.text,
            ]
            for r in deployment.replicas
        ]
        if rows:
            lines += table(COLUMNS, rows)
        for replica in deployment.replicas:
            if replica.health == DEGRADED:  # an unreachable cluster's replicas: see the cluster below
                lines.append(f"  ! {replica.replica.name}: {'; '.join(replica.problems)}")
        lines.append("")
    if report.clusters:
        lines.append("Clusters:")
        rows = [
            [
                c.name,
                c.state if not c.detail or c.state == "ok" else f"{c.state} ({c.detail})",
                c.gateway_address or "-",
                str(c.replicas),
            ]
            for c in report.clusters
        ]
        lines += table(["CLUSTER", "API SERVER", "GATEWAY ADDRESS", "REPLICAS"], rows)
        for cluster in report.clusters:
            if cluster.state in (UNREACHABLE, UNREADABLE):
                lines.append(f"{cluster.name} is {cluster.state}: {cluster.advice}" + (":" if cluster.commands else ""))
                lines += [f"  {command}" for command in cluster.commands]
                lines += [f"  ({cluster.caveat})"] if cluster.caveat else []
        lines.append("")
    if report.fallbacks:
        lines += ["Fallback tiers:", *(f"  {line}" for line in report.fallbacks), ""]
    lines += [f"note: {note}" for note in report.notes]
    lines.append(report.summary())
    return "\n".join(lines) + "\n"
