"""The pure parts of the e2e control-plane harness: flags, kubeconfig, ports, certificates, process stopping.

No Kubernetes binaries are needed; the real fleet is exercised by scripts/e2e.sh.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

from e2e import controlplane as cp


def flags(args: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in args)


def test_free_port_is_bindable_unique_and_outside_the_ephemeral_range():
    taken: set[int] = set()
    ports = [cp.free_port(taken) for _ in range(20)]
    assert len(set(ports)) == 20 and taken == set(ports)
    assert all(1024 <= p < cp.ephemeral_port_range()[0] for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))


def test_kubeconfig_has_one_context_named_after_the_cluster():
    doc = yaml.safe_load(cp.kubeconfig_text("eu-1", "https://127.0.0.1:6443", "tok"))
    assert doc["current-context"] == "eu-1"
    assert doc["clusters"] == [{"name": "eu-1", "cluster": {"server": "https://127.0.0.1:6443",
                                                            "insecure-skip-tls-verify": True}}]
    assert doc["users"] == [{"name": "eu-1", "user": {"token": "tok"}}]
    assert doc["contexts"] == [{"name": "eu-1", "context": {"cluster": "eu-1", "user": "eu-1"}}]


def test_token_file_row_puts_the_admin_in_system_masters():
    assert cp.token_auth_line("abc") == f'abc,{cp.ADMIN_USER},{cp.ADMIN_USER},"system:masters"\n'


def test_apiserver_flags_isolate_the_cluster_and_stay_on_loopback(tmp_path):
    files = cp.ClusterFiles(tmp_path)
    f = flags(cp.apiserver_args("eu-1", files, 7443, "http://127.0.0.1:2379"))
    assert f["etcd-prefix"] == "/eu-1" and f["etcd-servers"] == "http://127.0.0.1:2379"
    assert f["bind-address"] == "127.0.0.1" and f["secure-port"] == "7443"
    assert f["token-auth-file"] == str(files.tokens)
    assert f["service-account-issuer"] == "https://127.0.0.1:7443"
    assert f["service-account-signing-key-file"] == str(files.sa_key)
    assert f["service-account-key-file"] == str(files.sa_pub)
    assert "RBAC" in f["authorization-mode"].split(",")
    assert "ServiceAccount" not in f.get("disable-admission-plugins", "")


def test_controllers_and_scheduler_do_not_serve_or_elect(tmp_path):
    files = cp.ClusterFiles(tmp_path)
    f = flags(cp.controller_manager_args(files))
    assert f["kubeconfig"] == str(files.kubeconfig)
    assert f["leader-elect"] == "false" and f["secure-port"] == "0"
    f, config = flags(cp.scheduler_args(files)), cp.scheduler_config(files)
    assert f["config"] == str(files.scheduler_config) and f["secure-port"] == "0"
    assert config["clientConnection"]["kubeconfig"] == str(files.kubeconfig)
    assert config["leaderElection"] == {"leaderElect": False}
    kcm = flags(cp.controller_manager_args(files))
    assert kcm["controllers"] == "*"  # includes resourceclaim-controller (DRA), namespace, GC, ...
    assert kcm["root-ca-file"] == str(files.ca_crt)


def test_the_scheduler_packs_a_pools_pods(tmp_path):
    """docs/placement.md: a pool that mixes device counts fills as planned only when the scheduler scores for packing."""
    from e2e import kubelet as kl

    (profile,) = cp.scheduler_config(cp.ClusterFiles(tmp_path))["profiles"]
    (fit,) = [c for c in profile["pluginConfig"] if c["name"] == "NodeResourcesFit"]
    assert fit["args"]["scoringStrategy"]["type"] == "MostAllocated"
    # each pod's default scoring request (100m CPU) moves a pool node's score by at least a point of 100
    assert 100 * 100 // (int(kl.POOL_NODE_CAPACITY["cpu"]) * 1000) >= 1


def test_etcd_listens_on_loopback_only(tmp_path):
    f = flags(cp.etcd_args("e2e", tmp_path, 1111, 2222))
    assert f["listen-client-urls"] == "http://127.0.0.1:1111"
    assert f["listen-peer-urls"] == "http://127.0.0.1:2222"
    assert f["initial-cluster"] == "e2e=http://127.0.0.1:2222"


def test_the_shared_etcd_is_compacted_by_itself_not_by_every_api_server(tmp_path):
    apiserver = flags(cp.apiserver_args("eu-1", cp.ClusterFiles(tmp_path), 7443, "http://127.0.0.1:2379"))
    etcd = flags(cp.etcd_args("e2e", tmp_path, 1111, 2222))
    assert apiserver["etcd-compaction-interval"] == "0"
    assert (etcd["auto-compaction-mode"], etcd["auto-compaction-retention"]) == ("periodic", "5m")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_certificates_chain_and_cover_loopback(tmp_path):
    files = cp.ClusterFiles(tmp_path / "c")
    cp.make_cluster_certs(files, "eu-1")
    verify = subprocess.run(["openssl", "verify", "-CAfile", files.ca_crt, files.serving_crt],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    text = subprocess.run(["openssl", "x509", "-in", files.serving_crt, "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    assert files.sa_pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")


def test_peak_rss_of_a_live_process_and_none_when_gone():
    assert cp.read_peak_rss(subprocess.os.getpid()) > 0
    assert cp.read_peak_rss(2**22 + 12345) is None


def test_stop_procs_escalates_to_sigkill_and_reaps(tmp_path):
    stubborn = cp.Proc("stubborn", [sys.executable, "-c",
                                    "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                    "print('up', flush=True); time.sleep(60)"], tmp_path / "s.log")
    stubborn.start()
    deadline = time.monotonic() + 10
    while "\nup\n" not in stubborn.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    popen = stubborn.popen
    started = time.monotonic()
    cp.stop_procs([stubborn], grace=0.5)
    assert popen.returncode == -signal.SIGKILL and stubborn.popen is None
    assert time.monotonic() - started < 5
    assert stubborn.peak_rss > 0  # sampled before it was stopped


def test_fleet_rejects_bad_names_and_reports_missing_binaries(tmp_path):
    with pytest.raises(ValueError, match="DNS label"):
        cp.LocalFleet(tmp_path, tmp_path, ["Bad_Name"])
    with pytest.raises(ValueError, match="duplicate"):
        cp.LocalFleet(tmp_path, tmp_path, ["a", "a"])
    fleet = cp.LocalFleet(tmp_path / "work", tmp_path / "bin", ["a"])
    with pytest.raises(FileNotFoundError, match="e2e-tools.sh"):
        fleet.start()
    fleet.close()  # idempotent, nothing started


def test_endpoint_api_uses_the_e2e_client(monkeypatch):
    pytest.importorskip("e2e.kube_api")
    api = cp.ClusterEndpoint("a", "https://127.0.0.1:1", "tok", "").api()
    assert type(api).__name__ == "KubeApi"


def test_feature_gates_flag_is_sorted_and_absent_by_default():
    assert cp.feature_gates_flag(None) == [] and cp.feature_gates_flag({}) == []
    assert cp.feature_gates_flag({"DRAPartitionableDevices": False, "DRAConsumableCapacity": True}) == [
        "--feature-gates=DRAConsumableCapacity=true,DRAPartitionableDevices=false"]


@pytest.mark.parametrize(("limit", "clusters", "refused"), [("128", 12, False), ("128", 13, True), ("1024", 21, False),
                                                            ("not a number", 50, False)])
def test_a_fleet_the_inotify_limit_cannot_hold_is_refused_up_front(tmp_path, limit, clusters, refused):
    limit_file = tmp_path / "max_user_instances"
    limit_file.write_text(limit)
    if refused:
        with pytest.raises(cp.ControlPlaneError, match=r"fs.inotify.max_user_instances.*sysctl -w"):
            cp.check_inotify_instances(clusters, limit_file)
    else:
        cp.check_inotify_instances(clusters, limit_file)


def test_cpu_is_split_per_component_across_clusters_whose_names_prefix_each_other():
    from types import SimpleNamespace

    def proc(label: str) -> SimpleNamespace:  # every one this process: its CPU time is real and the same for all
        return SimpleNamespace(label=label, popen=SimpleNamespace(pid=os.getpid()), alive=lambda: True)

    fleet = cp.LocalFleet.__new__(cp.LocalFleet)
    fleet._clusters = {name: None for name in ("gpu-1", "gpu-1-eu")}
    procs = [proc("gpu-1-kube-apiserver"), proc("gpu-1-eu-kube-apiserver"), proc("gpu-1-eu-lws-controller"),
             proc("etcd")]
    fleet._procs = lambda: procs
    split = fleet.cpu_seconds_by_component()
    assert set(split) == {"kube-apiserver", "lws-controller", "etcd"}
    assert split["kube-apiserver"] == pytest.approx(2 * split["etcd"], rel=0.2)
    assert fleet.cpu_seconds() == pytest.approx(sum(split.values()), rel=0.2)
