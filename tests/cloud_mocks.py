"""What cloud providers compute that the mocks must stand in for, by resource type or invoke token.

Each entry maps a type token (e.g. `eks:index:Cluster`) or an invoke token to a function from the
resource's inputs (or the invoke's args) to the extra outputs a real provider would report.
Auto-named resources get their name here too: under mocks nothing fills in a `name` that was not
given, and the backends pass names on (a GKE node pool's cluster, the AKS credentials invoke).
"""
from __future__ import annotations

import base64
import json
from typing import Any, Callable

MOCK_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nmock\n-----END CERTIFICATE-----\n").decode()
GKE_ENDPOINT = "203.0.113.10"


def _eks_kubeconfig(inputs: dict[str, Any]) -> dict[str, Any]:
    """pulumi_eks builds an `aws eks get-token` kubeconfig for the cluster's AWS name."""
    name = inputs.get("name", "mock-eks")
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "aws",
        "clusters": [{"name": "kubernetes", "cluster": {"server": f"https://{name}.eks.example.com",
                                                        "certificate-authority-data": MOCK_CA}}],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "users": [{"name": "aws", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                    "command": "aws",
                                                    "args": ["eks", "get-token", "--cluster-name", name]}}}],
    }
    return {"kubeconfigJson": json.dumps(kubeconfig)}


def _iam_role(inputs: dict[str, Any]) -> dict[str, Any]:
    """Roles are auto-named; tell them apart by who may assume them."""
    service = json.loads(inputs["assumeRolePolicy"])["Statement"][0]["Principal"]["Service"].split(".")[0]
    name = inputs.get("name", f"mock-{service}-role")
    return {"name": name, "arn": f"arn:aws:iam::123456789012:role/{name}"}


def _aks_credentials(args: dict[str, Any]) -> dict[str, Any]:
    """AKS hands out the user kubeconfig base64-encoded."""
    name = args.get("resourceName", "mock-aks")
    text = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n"
            f"    server: https://{name}.hcp.westeurope.azmk8s.io:443\n    certificate-authority-data: {MOCK_CA}\n"
            f"users:\n- name: clusterUser_{name}\n  user:\n    token: mock-token\n")
    return {"kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(text.encode()).decode()}]}


CLOUD_OUTPUTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    # EKS
    "eks:index:Cluster": _eks_kubeconfig,
    "aws:iam/role:Role": _iam_role,
    "aws:ec2/launchTemplate:LaunchTemplate": lambda inputs: {"latestVersion": 1},
    # GKE
    "gcp:compute/network:Network": lambda inputs: {"name": inputs.get("name", "mock-network")},
    "gcp:container/cluster:Cluster": lambda inputs: {
        "name": inputs.get("name", "mock-gke"), "endpoint": GKE_ENDPOINT,
        "masterAuth": {"clusterCaCertificate": MOCK_CA}},
    "gcp:organizations/getClientConfig:getClientConfig": lambda args: {"project": "mock-project"},
    "gcp:compute/getZones:getZones": lambda args: {
        "names": [f"{args.get('region', 'us-central1')}-{z}" for z in "cfb"]},  # unsorted, as the API may be
    # AKS
    "azure-native:resources:ResourceGroup": lambda inputs: {"name": inputs.get("resourceGroupName", "mock-rg")},
    "azure-native:network:VirtualNetwork": lambda inputs: {"name": inputs.get("virtualNetworkName", "mock-vnet")},
    "azure-native:containerservice:ManagedCluster": lambda inputs: {"name": inputs.get("resourceName", "mock-aks")},
    "azure-native:containerservice:listManagedClusterUserCredentials": _aks_credentials,
}
