"""A Helm release an interrupted `up` installed but never recorded is imported by the next `up`, not installed twice.

The program lists the releases deployed on each Existing cluster whose serving stack the last `up` did not
record, and registers every rendered release it finds there with `import_` (the engine imports it, then
upgrades it to the program's inputs). A cluster the last `up` recorded is not read at all; one that cannot
be read is warned about and its releases are installed as before. With PULUMI_SKIP_CHECKPOINTS, new or
changed Existing clusters may now be built; a cluster the program provisions may not.
"""
from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pulumi
import pytest

from program_run import RELEASE, deploy, set_stack_config, stack_config
from status_fakes import TOKEN, closed_port, kubeconfig_text
from modelplane.api import load_fleet
from modelplane.infra import checkpoints, program
from modelplane.infra.release_adoption import DEPLOYED, release_ids
from modelplane.render.fingerprint import infrastructure_fingerprints
from modelplane.render.fleet import workload_stack


class HelmSecrets:
    """An API server that answers only the list of Helm's deployed-release secrets, and records each request."""

    def __init__(self, releases: list[tuple[str, str]]):
        self.requests: list[dict] = []
        listing = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": [
            {"metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": namespace,
                          "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1"}}}
            for namespace, name in releases]}
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                requests.append({"path": self.path, "accept": self.headers.get("Accept"),
                                 "authorization": self.headers.get("Authorization")})
                body = json.dumps(listing).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def helm_secrets():
    servers: list[HelmSecrets] = []

    def serve(releases: list[tuple[str, str]]) -> HelmSecrets:
        servers.append(HelmSecrets(releases))
        return servers[-1]

    yield serve
    for server in servers:
        server.close()


def _existing(config: dict, cluster: str, server: str) -> dict:
    config = copy.deepcopy(config)
    config["inferenceClusters"][cluster]["cluster"] = {"source": "Existing",
                                                      "existing": {"kubeconfig": kubeconfig_text(server)}}
    return config


def _releases(deployed, cluster: str) -> dict[str, str | None]:
    """`<namespace>/<name>` -> the import ID of each release registered on `cluster`."""
    return {f"{r.inputs['namespace']}/{r.inputs['name']}": r.import_id
            for r in deployed.seen.of_type(RELEASE) if r.name.startswith(f"{cluster}/")}


def test_release_ids_read_helms_release_secrets():
    listing = {"items": [
        {"metadata": {"namespace": "envoy-gateway-system", "labels": {"owner": "helm", "name": "eg"}}},
        {"metadata": {"namespace": "lws-system", "labels": {"owner": "helm", "name": "lws"}}},
        {"metadata": {"namespace": "x"}},  # no name label: not a release secret
        {"metadata": {"labels": {"name": "y"}}},  # no namespace
    ]}
    assert release_ids(listing) == {"envoy-gateway-system/eg", "lws-system/lws"}
    assert release_ids(None) == frozenset() and release_ids({"items": None}) == frozenset()


def test_a_release_installed_but_never_recorded_is_imported(monitor, mocks, helm_secrets):
    probe = helm_secrets([])
    config = _existing(stack_config("demo"), "gpu-eu-west", probe.url)
    rendered = workload_stack(load_fleet(config), "gpu-eu-west").releases
    assert len(rendered) >= 2
    left = rendered[0]
    probe.close()
    server = helm_secrets([(left.namespace, left.name), ("someone-else", "their-release")])
    config = _existing(stack_config("demo"), "gpu-eu-west", server.url)

    deployed = deploy(monitor, mocks, config)  # a first up: nothing recorded

    releases = _releases(deployed, "gpu-eu-west")
    assert releases.pop(f"{left.namespace}/{left.name}") == f"{left.namespace}/{left.name}"
    assert releases and set(releases.values()) == {None}  # the others are installed
    assert set(_releases(deployed, "gpu-us-east").values()) == {None}  # a kind cluster: not read
    [request] = server.requests
    assert request["path"].startswith("/api/v1/secrets?labelSelector=") and "status%3Ddeployed" in request["path"]
    assert DEPLOYED == "owner=helm,status=deployed"
    assert request["accept"].startswith("application/json;as=PartialObjectMetadataList")  # no release payloads
    assert request["authorization"] == f"Bearer {TOKEN}"


def test_a_cluster_the_last_up_recorded_is_not_read(monitor, mocks, helm_secrets):
    server = helm_secrets([])
    config = _existing(stack_config("demo"), "gpu-eu-west", server.url)
    recorded = {"infrastructure": infrastructure_fingerprints(load_fleet(config))}
    deployed = deploy(monitor, mocks, config, previous=program.plan(load_fleet(config), None), recorded=recorded)
    assert server.requests == []
    assert set(_releases(deployed, "gpu-eu-west").values()) == {None}


def test_an_unreadable_cluster_is_warned_about_and_installs_as_before(monitor, mocks, caplog):
    config = _existing(stack_config("demo"), "gpu-eu-west", f"http://127.0.0.1:{closed_port()}")
    deployed = deploy(monitor, mocks, config)
    [warning] = [r.getMessage() for r in caplog.records if "could not list the Helm releases" in r.getMessage()]
    assert "cluster gpu-eu-west" in warning and "docs/runbook.md" in warning and TOKEN not in warning
    assert set(_releases(deployed, "gpu-eu-west").values()) == {None}


def test_skipping_checkpoints_builds_existing_clusters_but_not_provisioned_ones(monitor, mocks, monkeypatch, caplog,
                                                                                helm_secrets):
    monkeypatch.setenv(checkpoints.SKIP_CHECKPOINTS, "true")
    server = helm_secrets([])
    config = _existing(_existing(stack_config("demo"), "gpu-eu-west", server.url), "gpu-us-east", server.url)
    set_stack_config(config)
    with pytest.raises(pulumi.RunError, match="PULUMI_SKIP_CHECKPOINTS refused"):
        program.run()  # a first up: the front door's kind cluster would be created
    [error] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "control (new)" in error and "gpu-eu-west" not in error and "gpu-us-east" not in error

    fingerprints = infrastructure_fingerprints(load_fleet(config))
    deployed = deploy(monitor, mocks, config, recorded={"infrastructure": {"control": fingerprints["control"]}})
    assert len(deployed.result.replicas()) == 2 and len(server.requests) == 2  # both Existing clusters read
