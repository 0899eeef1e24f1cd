"""The fleet API: pydantic models of every kind, the Fleet aggregate, and config loading (pure)."""

from .common import SecretValue
from .errors import ConfigError, ConfigIssue, ModelplaneError, StackFileError, format_path
from .fleet import Fleet, NamespacedName
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .loading import KINDS, load_fleet
from .model_cache import ModelCache
from .model_deployment import ModelDeployment
from .model_service import ModelEndpoint, ModelService
from .serving_stack import ServingStack, ServingStackConfig

__all__ = [
    "KINDS",
    "ConfigError",
    "ConfigIssue",
    "Fleet",
    "InferenceClass",
    "InferenceCluster",
    "InferenceGateway",
    "ModelCache",
    "ModelDeployment",
    "ModelEndpoint",
    "ModelService",
    "ModelplaneError",
    "NamespacedName",
    "SecretValue",
    "ServingStack",
    "ServingStackConfig",
    "StackFileError",
    "format_path",
    "load_fleet",
]
