"""The scheduler's result: data that the plan, explain, stack outputs and warnings all read.

Frozen once planned. Explanations are part of it: each deployment's verdict per cluster for one
more replica, read from the verdicts the plan itself recorded (scheduling/diagnosis.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..api import NamespacedName
from .reasons import Reason
from .document import API_VERSION, KIND, PlacementDocument
from .placement import DeploymentPlan, PlacedReplica, RemovedReplica
from .snapshot import Cluster


@dataclass(frozen=True)
class ClusterVerdict:
    """Why a cluster does or does not take one more replica of a deployment, right now."""

    cluster: str
    hosts: int  # replicas of this deployment on it
    available: bool  # could take one more
    reasons: tuple[Reason, ...]
    free: dict[str, int] = field(default_factory=dict)  # pool -> free nodes

    @property
    def primary(self) -> Reason | None:
        return self.reasons[0] if self.reasons else None


@dataclass(frozen=True)
class Explanation:
    key: NamespacedName
    plan: DeploymentPlan
    verdicts: tuple[ClusterVerdict, ...]
    summary: str  # "0/3 clusters are available: ...", the aggregate of the verdicts' primary reasons


@dataclass(frozen=True)
class PlanResult:
    deployments: Mapping[NamespacedName, DeploymentPlan]  # in (namespace, name) order
    orphans: tuple[RemovedReplica, ...]  # replicas of deployments no longer in the config
    clusters: tuple[Cluster, ...]  # the fleet as planned: pools with their declared nodes
    free: Mapping[tuple[str, str], int]  # (cluster, pool) -> nodes left after this plan
    # Computed on first read, then kept; not compared (equal plans explain alike).
    explanations: Mapping[NamespacedName, Explanation] = field(compare=False, repr=False)

    def replicas(self) -> list[PlacedReplica]:
        return [r for plan in self.deployments.values() for r in plan.replicas]

    def removed(self) -> list[RemovedReplica]:
        return [r for plan in self.deployments.values() for r in plan.removed] + list(self.orphans)

    def document_data(self) -> dict[str, Any]:
        """The placement document as plain JSON data (what the stack output holds)."""
        return {"apiVersion": API_VERSION, "kind": KIND, "replicas": [r.to_dict() for r in self.replicas()],
                "deployments": [p.to_dict() for p in self.deployments.values()]}

    def document(self) -> PlacementDocument:
        return PlacementDocument.model_validate(self.document_data())

    def to_json(self) -> str:
        return json.dumps(self.document_data(), indent=2) + "\n"

    def explain(self, key: NamespacedName) -> Explanation:
        return self.explanations[key]
