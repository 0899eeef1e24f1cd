"""The fleet scheduler (pure): placement with per-cluster diagnosis, names, and the placement document."""
from .document import PlacementDocument, load_previous
from .names import child_name, opaque_name, replica_name
from .result import DeploymentPlan, Explanation, PlacedReplica, PlanResult
from .scheduler import schedule

__all__ = ["DeploymentPlan", "Explanation", "PlacedReplica", "PlacementDocument", "PlanResult", "child_name",
           "load_previous", "opaque_name", "replica_name", "schedule"]
