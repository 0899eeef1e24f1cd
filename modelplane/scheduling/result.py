"""The scheduler's result: data that the plan, explain, stack outputs and warnings all read.

Frozen once planned. Explanations are part of it: each deployment's verdict per cluster for one
more replica, read from the verdicts the plan itself recorded (scheduling/diagnosis.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..api import NamespacedName
from ..api.scheduling import Failback, Packing
from .document import API_VERSION, KIND, PlacementDocument
from .packing import Unit, per_node
from .placement import DeploymentPlan, PlacedReplica, RemovedReplica
from .reasons import Reason
from .snapshot import Cluster, Pool


@dataclass(frozen=True)
class ClusterVerdict:
    """Why a cluster does or does not take one more replica of a deployment, right now."""

    cluster: str
    hosts: int  # replicas of this deployment on it
    available: bool  # could take one more
    reasons: tuple[Reason, ...]
    free: dict[str, int] = field(default_factory=dict)  # pool -> free nodes (WholeNode) or devices

    @property
    def primary(self) -> Reason | None:
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True)
class Explanation:
    key: NamespacedName
    plan: DeploymentPlan
    verdicts: tuple[ClusterVerdict, ...]
    summary: str  # "0/3 clusters are available: ...", the aggregate of the verdicts' primary reasons
    tiers: Mapping[str, int] | None = None  # each usable cluster's preference tier (0 first); None: no preferences
    failback: Failback = "Never"
    max_moves: int = 1

    def why_not_better(self, cluster: str) -> list[str]:
        """For a replica on `cluster`: why each cluster of a more preferred tier does not hold it."""
        if not self.tiers:
            return []
        lines = []
        for verdict in self.verdicts:
            tier = self.tiers.get(verdict.cluster)
            if tier is None or tier >= self.tiers[cluster]:
                continue
            if not verdict.available:
                why = verdict.reasons[0].detail if verdict.reasons else "not available"
            elif self.failback == "Never":
                why = "has room; failback: Never keeps replicas where they are"
            else:
                why = f"has room; failback: WhenRoom moves at most {self.max_moves} replica(s) per plan"
            lines.append(f"tier {tier + 1} {verdict.cluster}: {why}")
        return lines


class ExplanationSource(Mapping[NamespacedName, Explanation]):
    """Every deployment's explanation, on demand; `summary` is the one line a warning prints.

    An implementation may answer `summary` without building every cluster's verdict (a plan warns
    for every short deployment and reads nothing else of their explanations); it must equal
    `self[key].summary`.
    """

    def summary(self, key: NamespacedName) -> str:
        return self[key].summary


@dataclass(frozen=True)
class PlanResult:
    deployments: Mapping[NamespacedName, DeploymentPlan]  # in (namespace, name) order
    orphans: tuple[RemovedReplica, ...]  # replicas of deployments no longer in the config
    clusters: tuple[Cluster, ...]  # the fleet as planned: pools with their declared nodes
    free: Mapping[tuple[str, str], int]  # (cluster, pool) -> nodes (WholeNode) or devices left after this plan
    # Computed on first read, then kept; not compared (equal plans explain alike).
    explanations: ExplanationSource = field(compare=False, repr=False)
    packing: Packing = "DeviceGranular"

    @property
    def unit(self) -> Unit:
        """What `free` counts: "nodes" (WholeNode) or "devices" (DeviceGranular)."""
        return "nodes" if self.packing == "WholeNode" else "devices"

    def declared(self, cluster: Cluster, pool: Pool) -> int:
        """The pool's capacity in `unit`: its nodes, or its nodes' DRA devices."""
        return pool.nodes if self.packing == "WholeNode" else pool.nodes * sum(per_node(pool))

    def capacity_data(self) -> dict[str, Any]:
        """Per cluster and pool, what is declared and what this plan leaves free, in `unit` (the stack output
        `capacity`): {"packing": "DeviceGranular", "unit": "devices", "pools": {"c/p": {"declared": 8, "free": 7}}}."""
        return {
            "packing": self.packing,
            "unit": self.unit,
            "pools": {
                f"{c.name}/{p.name}": {"declared": self.declared(c, p), "free": self.free[(c.name, p.name)]}
                for c in self.clusters
                for p in c.pools
            },
        }

    def replicas(self) -> list[PlacedReplica]:
        return [r for plan in self.deployments.values() for r in plan.replicas]

    def removed(self) -> list[RemovedReplica]:
        return [r for plan in self.deployments.values() for r in plan.removed] + list(self.orphans)

    def document_data(self) -> dict[str, Any]:
        """The placement document as plain JSON data (what the stack output holds)."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "replicas": [r.to_dict() for r in self.replicas()],
            "deployments": [p.to_dict() for p in self.deployments.values()],
        }

    def document(self) -> PlacementDocument:
        return PlacementDocument.model_validate(self.document_data())

    def to_json(self) -> str:
        return json.dumps(self.document_data(), indent=2) + "\n"

    def explain(self, key: NamespacedName) -> Explanation:
        return self.explanations[key]

    def summary(self, key: NamespacedName) -> str:
        """`explain(key).summary`: "0/3 clusters are available: ..."."""
        return self.explanations.summary(key)
