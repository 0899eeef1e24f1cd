"""Existing backend: a cluster you already run, reached through its kubeconfig (a Pulumi secret).

Nothing is created, so nothing prepares the nodes: label the nodes of every `nodePools[]` entry
`modelplane.ai/pool=<pool name>` yourself (`kubectl label node <node> modelplane.ai/pool=<pool>`).
Without the label, engine pods stay Pending with no error (seed trap 5). If the cluster is a kind
cluster you made yourself and it hosts the front door, its MetalLB `addressPool` must lie inside
the real kind Docker subnet (`docker network inspect kind`), or requests time out silently.
"""

from __future__ import annotations

import pulumi

from ..config import secret_output
from .base import ClusterAccess, ClusterRequest


def provision(request: ClusterRequest, parent: pulumi.Resource) -> ClusterAccess:
    block = request.block()
    return ClusterAccess(kubeconfig=secret_output(block.kubeconfig), context=block.context)
