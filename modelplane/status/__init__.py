"""`modelplane status`: the live fleet after `pulumi up`, per deployment and replica.

Pure core: `replicas` (what to watch, drift against the last placement), `observations` (API
objects read into plain data), `report` (health, exit code), `table` (the text view).
Thin I/O: `kubeconfig` + `kube_client` (a standard-library Kubernetes client), `live` (clusters
read concurrently), `probe` (the front door's health check, made from here), `stack` (the Pulumi
CLI), and `command`, which wires them together. Nothing here imports pulumi or modelplane.infra.
"""
