"""The pure parts of the e2e LeaderWorkerSet controller harness: its config and flags, the webhook configurations the
API server calls it through, the TLS readiness probe, which clusters run it, and the pins it shares with the stack.

No Kubernetes binaries are needed; the controller itself runs in scripts/e2e.sh.
"""
from __future__ import annotations

import base64
import re
import socket
import ssl
import threading
import tomllib
from pathlib import Path

import pytest
import yaml

from e2e import controlplane as cp
from e2e import lws_controller as lws
from modelplane.api.serving_stack import ServingStackVersions
from modelplane.cli import load_file
from modelplane.render.fleet import cluster_stacks

REPO = Path(__file__).resolve().parents[1]
E2E_STACK = REPO / "tests" / "e2e" / "Pulumi.e2e.yaml"


def test_config_serves_webhooks_on_loopback_with_our_certificate_and_nothing_else(tmp_path):
    config = yaml.safe_load(lws.controller_config(40123, tmp_path / "certs"))
    assert (config["apiVersion"], config["kind"]) == ("config.lws.x-k8s.io/v1alpha1", "Configuration")
    assert config["webhook"] == {"host": "127.0.0.1", "port": 40123, "certDir": str(tmp_path / "certs")}
    assert config["internalCertManagement"] == {"enable": False}  # no Secret-based cert rotation: the CA signs ours
    assert config["leaderElection"] == {"leaderElect": False}
    # `0` turns controller-runtime's metrics and health servers off: nothing to collide on across clusters
    assert config["metrics"] == {"bindAddress": "0"} and config["health"] == {"healthProbeBindAddress": "0"}


def test_flags_name_the_cluster_kubeconfig_and_turn_leader_election_off(tmp_path):
    args = lws.controller_args(tmp_path / "kubeconfig", tmp_path / "lws.yaml")
    assert f"--kubeconfig={tmp_path / 'kubeconfig'}" in args and f"--config={tmp_path / 'lws.yaml'}" in args
    assert "--leader-elect=false" in args  # upstream's flag defaults to true and wins over the file


def test_webhook_configurations_send_every_upstream_webhook_to_the_controller_port():
    ca = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    mutating, validating = lws.webhook_configurations(40123, ca)
    assert mutating["kind"] == "MutatingWebhookConfiguration" and validating["kind"] == "ValidatingWebhookConfiguration"
    hooks = {h["name"]: h for doc in (mutating, validating) for h in doc["webhooks"]}
    assert sorted(hooks) == ["mleaderworkerset.kb.io", "mpod.kb.io", "vleaderworkerset.kb.io", "vpod.kb.io"]
    assert {h["name"] for h in mutating["webhooks"]} == {"mleaderworkerset.kb.io", "mpod.kb.io"}
    for hook in hooks.values():
        assert re.fullmatch(r"https://127\.0\.0\.1:40123/(mutate|validate)-\S+", hook["clientConfig"]["url"])
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
        assert (hook["failurePolicy"], hook["sideEffects"], hook["admissionReviewVersions"]) == ("Fail", "None", ["v1"])
    assert hooks["mpod.kb.io"]["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                                             "operations": ["CREATE"]}]
    assert hooks["vleaderworkerset.kb.io"]["rules"][0]["resources"] == ["leaderworkersets"]
    # only a LeaderWorkerSet's pods wait on the controller; every other pod of the cluster is admitted without it
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert hooks[name]["objectSelector"] == {"matchExpressions": [{"key": lws.SET_NAME_LABEL, "operator": "Exists"}]}
    assert "objectSelector" not in hooks["mleaderworkerset.kb.io"]


def _serve_tls_once(crt: Path, key: Path) -> int:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def accept() -> None:
        with server:
            connection, _ = server.accept()
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def test_webhook_serving_needs_a_certificate_from_the_cluster_ca_for_loopback(tmp_path):
    ours, other = cp.ClusterFiles(tmp_path / "ours"), cp.ClusterFiles(tmp_path / "other")
    cp.make_cluster_certs(ours, "ours")
    cp.make_cluster_certs(other, "other")
    for files in (ours, other):
        cp.make_serving_cert(files, "lws-webhook", files.root / "tls.crt", files.root / "tls.key", ("IP:127.0.0.1",))
    assert lws.webhook_serving(_serve_tls_once(ours.root / "tls.crt", ours.root / "tls.key"), ours.ca_crt)
    assert not lws.webhook_serving(_serve_tls_once(other.root / "tls.crt", other.root / "tls.key"), ours.ca_crt)
    assert not lws.webhook_serving(cp.free_port(), ours.ca_crt)  # nothing listens


def test_the_e2e_stack_runs_the_controller_on_its_workload_clusters_only():
    fleet = load_file(E2E_STACK)[1]
    assert lws.clusters_running_lws(cluster_stacks(fleet)) == list(fleet.inference_clusters)
    assert fleet.inference_gateway.cluster_name not in lws.clusters_running_lws(cluster_stacks(fleet))


def test_fleet_refuses_unknown_clusters_and_a_missing_binary_before_starting_anything(tmp_path):
    with pytest.raises(ValueError, match="not in the fleet"):
        lws.LwsFleet(tmp_path, tmp_path, ["a"], ["b"], tmp_path)
    fleet = lws.LwsFleet(tmp_path / "work", tmp_path / "bin", ["a"], ["a"], tmp_path)
    with pytest.raises(FileNotFoundError, match="lws-controller is missing"):
        fleet.start()
    assert fleet.etcd is None  # no control plane was started for nothing
    fleet.close()


def test_the_built_controller_is_the_stacks_version_at_the_pinned_crds_commit():
    tools = (REPO / "scripts" / "e2e-tools.sh").read_text()
    version = re.search(r"^LWS_VERSION=(\S+)", tools, re.M).group(1)
    commit = re.search(r"^LWS_COMMIT=(\S+)", tools, re.M).group(1)
    assert version == ServingStackVersions().leader_worker_set
    assert lws.CRD_FILE.startswith(f"lws-{version}/")
    pins = tomllib.loads((REPO / "tests" / "upstream-crds.toml").read_text())["crd"]
    crd = next(p for p in pins if p["path"] == lws.CRD_FILE)
    assert crd["tag"] == version and f"/{commit}/" in crd["url"]
