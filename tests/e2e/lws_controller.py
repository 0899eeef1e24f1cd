"""The LeaderWorkerSet controller on each workload cluster of the local fleet, so gang replicas get pods.

The controller is sigs.k8s.io/lws at the pinned servingStack version (v0.8.0), built from its Go
module by scripts/e2e-tools.sh and run against the cluster's API server like the cluster's
kube-controller-manager. Upstream's lws chart runs it as a Deployment behind a webhook Service,
with an internal cert controller; here instead:

- it uses the cluster's admin kubeconfig, leader election is off (one instance per cluster), and its
  metrics and health endpoints are off (`0`), so nothing collides across clusters;
- its webhook server listens on a free loopback port with a serving certificate signed by the
  cluster's CA (internal cert management off), and the harness registers the four webhooks upstream
  registers (LeaderWorkerSet defaulting and validation; the pod webhook that labels each group's
  pods, which the controller relies on) with that URL and the CA as `caBundle`;
- the pinned LeaderWorkerSet CRD is applied before the controller starts: controller-runtime gives up
  on a kind it watches that is not served within two minutes, and the webhooks must answer before
  the first LeaderWorkerSet is created (the provider does not retry a create the API server refused
  because a webhook was unreachable). The lws stand-in chart then finds its CRD present, which Helm
  skips.

StatefulSets are the controller's; kube-controller-manager makes their pods, kube-scheduler binds
them with their DRA claims and the fake kubelet runs them, as for every other pod.
"""
from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import yaml

from .charts import CHARTS, PinnedCRDs, chart_name
from .controlplane import (ClusterEndpoint, ClusterFiles, ControlPlaneError, LocalFleet, Proc, free_port,
                           make_serving_cert, stop_procs)
from .kube_api import object_path

if TYPE_CHECKING:
    from modelplane.render.types import ClusterStack

    from .kube_api import KubeApi

CHART = "lws"
BINARY = "lws-controller"
CRD_FILE = CHARTS[CHART].crds[0]
SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"  # on every pod of a LeaderWorkerSet
READY_TIMEOUT = 90.0
# The webhooks of sigs.k8s.io/lws v0.8.0 (the +kubebuilder:webhook markers of pkg/webhooks): name, path on the
# webhook server, mutating, API group, resource, operations. Pods only when they belong to a LeaderWorkerSet, as
# upstream's chart selects them: every other pod of the cluster keeps working while the controller is down.
WEBHOOKS = (
    ("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", True,
     "leaderworkerset.x-k8s.io", "leaderworkersets", ("CREATE", "UPDATE")),
    ("mpod.kb.io", "/mutate--v1-pod", True, "", "pods", ("CREATE",)),
    ("vleaderworkerset.kb.io", "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset", False,
     "leaderworkerset.x-k8s.io", "leaderworkersets", ("CREATE", "UPDATE")),
    ("vpod.kb.io", "/validate--v1-pod", False, "", "pods", ("CREATE", "UPDATE")),
)
CONFIGURATION_NAMES = {True: "lws-mutating-webhook-configuration", False: "lws-validating-webhook-configuration"}


# --- pure parts (unit tested without binaries) ----------------------------------------------------------------------


def clusters_running_lws(stacks: Sequence["ClusterStack"]) -> list[str]:
    """The clusters whose serving stack installs the lws chart: those get a LeaderWorkerSet controller."""
    return [s.cluster for s in stacks if any(chart_name(r) == CHART for r in s.releases)]


def controller_config(port: int, cert_dir: Path) -> str:
    """The controller's --config file (config.lws.x-k8s.io/v1alpha1; JSON is YAML)."""
    return json.dumps({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": "0"},
    }, indent=2) + "\n"


def controller_args(kubeconfig: Path, config: Path) -> list[str]:
    # the flag too: upstream's --leader-elect defaults to true and overrides the file when given
    return [f"--kubeconfig={kubeconfig}", f"--config={config}", "--leader-elect=false", "--zap-log-level=info"]


def webhook_configurations(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The Mutating- and ValidatingWebhookConfiguration pointing the API server at the controller on `port`."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    documents = []
    for mutating in (True, False):
        hooks = []
        for name, path, is_mutating, group, resource, operations in WEBHOOKS:
            if is_mutating != mutating:
                continue
            hook: dict[str, Any] = {
                "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle},
                "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "resources": [resource],
                           "operations": list(operations)}]}
            if resource == "pods":
                hook["objectSelector"] = {"matchExpressions": [{"key": SET_NAME_LABEL, "operator": "Exists"}]}
            hooks.append(hook)
        kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
        documents.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                          "metadata": {"name": CONFIGURATION_NAMES[mutating]}, "webhooks": hooks})
    return documents


def webhook_serving(port: int, ca_file: Path) -> bool:
    """The webhook server answers TLS on `port` with a certificate the cluster's CA signed for 127.0.0.1."""
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                return True
    except (OSError, ssl.SSLError):
        return False


# --- the fleet ------------------------------------------------------------------------------------------------------


class LwsFleet(LocalFleet):
    """A LocalFleet whose `lws_clusters` also run the LeaderWorkerSet controller; it stops and starts with them."""

    def __init__(self, work: Path, bin_dir: Path, clusters: Sequence[str], lws_clusters: Sequence[str],
                 crd_dir: Path, **kwargs: Any):
        super().__init__(work, bin_dir, clusters, **kwargs)
        unknown = sorted(set(lws_clusters) - set(clusters))
        if unknown:
            raise ValueError(f"LeaderWorkerSet controller for clusters not in the fleet: {unknown}")
        self.lws_clusters = list(lws_clusters)
        self.crd_dir = crd_dir
        self.lws: dict[str, Proc] = {}
        self.webhook_ports: dict[str, int] = {}

    def start(self) -> dict[str, ClusterEndpoint]:
        binary = self._binary(BINARY)  # missing: say so before any control plane starts
        endpoints = super().start()
        try:
            crd = yaml.safe_load(PinnedCRDs(self.crd_dir).read(CRD_FILE))
            taken: set[int] = set()
            for name in self.lws_clusters:
                self._prepare_lws(name, binary, taken)
                api = endpoints[name].api()
                _apply_established(api, crd)
                self._start_lws(name)
                for document in webhook_configurations(self.webhook_ports[name], self._files(name).ca_crt.read_bytes()):
                    plural = document["kind"].lower() + "s"
                    api.apply(object_path(document["apiVersion"], plural, None, document["metadata"]["name"]), document)
        except BaseException:
            self.close()
            raise
        return endpoints

    def _files(self, name: str) -> ClusterFiles:
        return self._cluster(name).files

    def _prepare_lws(self, name: str, binary: str, taken: set[int]) -> None:
        files = self._files(name)
        cert_dir = files.root / "lws-webhook"
        cert_dir.mkdir(parents=True, exist_ok=True)
        make_serving_cert(files, "lws-webhook", cert_dir / "tls.crt", cert_dir / "tls.key", ("IP:127.0.0.1",))
        port = free_port(taken)
        config = files.root / "lws-config.yaml"
        config.write_text(controller_config(port, cert_dir))
        self.webhook_ports[name] = port
        self.lws[name] = Proc(f"{name}-lws-controller", [binary, *controller_args(files.kubeconfig, config)],
                              self.logs / f"{name}-lws-controller.log")

    def _start_lws(self, name: str) -> None:
        """Start the controller and return once its webhook server answers with our certificate."""
        proc, ca = self.lws[name], self._files(name).ca_crt
        proc.start()
        self._wait(lambda: webhook_serving(self.webhook_ports[name], ca), name, proc, READY_TIMEOUT,
                   "serving its webhooks")

    def stop_cluster(self, name: str) -> None:
        with self._lock:
            if name in self.lws:
                stop_procs([self.lws[name]])
            super().stop_cluster(name)

    def start_cluster(self, name: str) -> None:
        with self._lock:
            super().start_cluster(name)
            if name in self.lws and not self.lws[name].alive():
                self._start_lws(name)

    def _procs(self) -> list[Proc]:
        return list(self.lws.values()) + super()._procs()

    def close(self) -> None:
        if not self._closed:
            stop_procs(list(self.lws.values()))
        super().close()


def _apply_established(api: "KubeApi", crd: dict[str, Any], timeout: float = 60.0) -> None:
    path = object_path("apiextensions.k8s.io/v1", "customresourcedefinitions", None, crd["metadata"]["name"])
    api.apply(path, crd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conditions = (api.get(path) or {}).get("status", {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.5)
    raise ControlPlaneError(f"the CRD {crd['metadata']['name']} was not Established within {timeout:.0f} s")
