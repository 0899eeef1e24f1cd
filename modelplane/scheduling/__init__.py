"""The fleet scheduler (pure): placement with per-cluster diagnosis, names, and the placement document."""

from .document import PlacementDocument, load_previous
from .names import child_name, opaque_name, replica_name
from .placement import Condition, DeploymentPlan, EngineAssignment, MemberAssignment, PlacedReplica, RemovedReplica
from .result import ClusterVerdict, Explanation, PlanResult
from .scheduler import schedule

__all__ = [
    "ClusterVerdict",
    "Condition",
    "DeploymentPlan",
    "EngineAssignment",
    "Explanation",
    "MemberAssignment",
    "PlacedReplica",
    "PlacementDocument",
    "PlanResult",
    "RemovedReplica",
    "child_name",
    "load_previous",
    "opaque_name",
    "replica_name",
    "schedule",
]
