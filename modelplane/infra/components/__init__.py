"""The Pulumi components, type tokens `modelplane:index:<Kind>`; every child is parented to its component."""

from .cache import ModelCache
from .cluster import InferenceCluster, tenant_namespaces
from .endpoint import GatewayAlias, ModelEndpoint
from .gateway import InferenceGateway
from .replica import ModelReplica
from .service import ModelService
from .serving_stack import ServingStack

__all__ = [
    "GatewayAlias",
    "InferenceCluster",
    "InferenceGateway",
    "ModelCache",
    "ModelEndpoint",
    "ModelReplica",
    "ModelService",
    "ServingStack",
    "tenant_namespaces",
]
