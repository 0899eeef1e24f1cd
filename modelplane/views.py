"""Text views of a plan (pure formatting): the placement table, the per-cluster verdicts, the lines an
edit prints for what it touched, and the warning for a deployment short of replicas."""

from __future__ import annotations

from .scheduling import DeploymentPlan, Explanation, PlacementDocument, PlanResult
from .text_table import text_table


def condition_line(plan: DeploymentPlan) -> str:
    condition = plan.conditions[0]
    return f"{plan.key}: {condition.message} ({condition.type}={condition.status} {condition.reason})"


def shortfall_warning(result: PlanResult, plan: DeploymentPlan) -> str:
    """'ns/name: Scheduled 1 of 3 replicas; 1/4 clusters are available: ...' for a short deployment."""
    return f"{plan.key}: {plan.conditions[0].message}; {result.summary(plan.key)}"


def _pools_used(result: PlanResult, cluster, separator: str, unit: str = "") -> str:
    """'p 3/8': nodes (WholeNode) or DRA devices (DeviceGranular) used of the pool's declared ones."""

    def used(pool) -> str:
        declared = result.declared(cluster, pool)
        return f"{pool.name} {declared - result.free[(cluster.name, pool.name)]}/{declared}{unit}"

    return separator.join(used(p) for p in cluster.pools)


def plan_table(result: PlanResult) -> str:
    lines: list[str] = []
    for plan in result.deployments.values():
        lines.append(condition_line(plan))
        whole_nodes = result.unit == "nodes"
        rows = [
            [
                r.name,
                r.cluster,
                str(r.index),
                ",".join(r.pools),
                str(r.node_cost() if whole_nodes else r.device_count()),
                r.status,
            ]
            for r in plan.replicas
        ]
        if rows:
            lines += text_table(
                ["REPLICA", "CLUSTER", "INDEX", "POOLS", "NODES" if whole_nodes else "DEVICES", "STATUS"], rows
            )
        for removed in plan.removed:
            lines.append(
                f"  - {removed.replica.name} leaves {removed.replica.cluster}: {removed.reason.summary} "
                f"({removed.reason.detail})"
            )
        lines.append("")
    for removed in result.orphans:
        lines.append(
            f"- {removed.replica.key}/{removed.replica.name} leaves {removed.replica.cluster}: {removed.reason.detail}"
        )
    counts: dict[str, int] = {}
    for replica in result.replicas():
        counts[replica.cluster] = counts.get(replica.cluster, 0) + 1
    rows = []
    for cluster in result.clusters:
        pools = _pools_used(result, cluster, " ")
        rows.append([cluster.name, str(counts.get(cluster.name, 0)), pools or "-"])
    lines.append(f"Clusters ({result.unit} used/declared per pool):")
    lines += text_table(["CLUSTER", "REPLICAS", "POOLS"], rows)
    return "\n".join(lines) + "\n"


def explain_table(explanation: Explanation) -> str:
    lines = [condition_line(explanation.plan)]
    tiers = explanation.tiers
    rows = []
    for verdict in explanation.verdicts:
        text = "available" if verdict.available else "; ".join(r.detail for r in verdict.reasons)
        tier_cell = [str(tiers[verdict.cluster] + 1) if verdict.cluster in tiers else "-"] if tiers else []
        rows.append([verdict.cluster, *tier_cell, str(verdict.hosts), text])
    lines += text_table(["CLUSTER", *(["TIER"] if tiers else []), "HOSTS", "VERDICT FOR ONE MORE REPLICA"], rows)
    lines.append(explanation.summary)
    if tiers:
        lines.append(f"Replicas by preference tier (failback: {explanation.failback}):")
        for replica in explanation.plan.replicas:
            better = explanation.why_not_better(replica.cluster)
            tier = tiers[replica.cluster]
            note = (
                " (the most preferred)" if tier == 0 else "" if better else " (no cluster of a better tier is usable)"
            )
            lines.append(f"  {replica.name} on {replica.cluster}: tier {tier + 1}{note}")
            lines += [f"    {line}" for line in better]
    return "\n".join(lines) + "\n"


def plan_lines(result: PlanResult, previous: PlacementDocument, command: str, target: str) -> list[str]:
    """What `scale`, `drain` and `undrain` print of the new plan: the scaled deployment, or the
    cluster and every deployment it touches (and every short one)."""
    if command == "scale":
        keys = [key for key in result.deployments if str(key) == target]
    else:
        before = {(r.namespace, r.deployment) for r in previous.replicas if r.cluster == target}
        keys = [
            key
            for key, plan in result.deployments.items()
            if (key.namespace, key.name) in before
            or plan.short
            or any(r.cluster == target for r in plan.replicas)
            or any(r.replica.cluster == target for r in plan.removed)
        ]
    lines = []
    for key in keys:
        plan = result.deployments[key]
        lines.append(condition_line(plan))
        lines += [f"  {r.name} on {r.cluster} ({r.status})" for r in plan.replicas]
        lines += [f"  {r.replica.name} leaves {r.replica.cluster}: {r.reason.summary}" for r in plan.removed]
        if plan.short:
            lines.append(f"  {result.explain(key).summary}")
    if command != "scale":
        on_cluster = sum(r.cluster == target for r in result.replicas())
        cluster = next(c for c in result.clusters if c.name == target)
        pools = _pools_used(result, cluster, ", ", f" {result.unit}")
        lines.append(
            f"{target}: {on_cluster} replica{'' if on_cluster == 1 else 's'}" + (f" ({pools})" if pools else "")
        )
    return lines
