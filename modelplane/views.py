"""Text views of a plan: the placement table and the per-cluster verdicts (pure formatting)."""
from __future__ import annotations

from .scheduling.result import Explanation, PlanResult


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = [indent + "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [headers, *rows]]
    return lines


def plan_table(result: PlanResult) -> str:
    lines: list[str] = []
    for plan in result.deployments.values():
        condition = plan.conditions[0]
        lines.append(f"{plan.key}: {condition.message} ({condition.type}={condition.status} {condition.reason})")
        rows = [[r.name, r.cluster, str(r.index), ",".join(r.pools), str(r.node_cost()), r.status]
                for r in plan.replicas]
        if rows:
            lines += _table(["REPLICA", "CLUSTER", "INDEX", "POOLS", "NODES", "STATUS"], rows)
        for removed in plan.removed:
            lines.append(f"  - {removed.replica.name} leaves {removed.replica.cluster}: {removed.reason.summary} "
                         f"({removed.reason.detail})")
        lines.append("")
    for removed in result.orphans:
        lines.append(f"- {removed.replica.key}/{removed.replica.name} leaves {removed.replica.cluster}: "
                     f"{removed.reason.detail}")
    counts: dict[str, int] = {}
    for replica in result.replicas():
        counts[replica.cluster] = counts.get(replica.cluster, 0) + 1
    rows = []
    for cluster in result.clusters:
        pools = " ".join(f"{p.name} {p.nodes - result.ledger.free[(cluster.name, p.name)]}/{p.nodes}"
                         for p in cluster.pools)
        rows.append([cluster.name, str(counts.get(cluster.name, 0)), pools or "-"])
    lines.append("Clusters (nodes used/declared per pool):")
    lines += _table(["CLUSTER", "REPLICAS", "POOLS"], rows)
    return "\n".join(lines) + "\n"


def explain_table(explanation: Explanation) -> str:
    plan = explanation.plan
    condition = plan.conditions[0]
    lines = [f"{plan.key}: {condition.message} ({condition.type}={condition.status} {condition.reason})"]
    rows = []
    for verdict in explanation.verdicts:
        if verdict.available:
            text = "available"
        else:
            text = "; ".join(r.detail for r in verdict.reasons)
        rows.append([verdict.cluster, str(verdict.hosts), text])
    lines += _table(["CLUSTER", "HOSTS", "VERDICT FOR ONE MORE REPLICA"], rows)
    lines.append(explanation.summary)
    return "\n".join(lines) + "\n"
