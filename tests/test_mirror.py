"""Air-gapped sources: `modelplane:mirror`, the chart/manifest rewrites, the listing, and the digest check."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys

import pulumi
import pytest

from builders import fleet_config
from modelplane.api import ConfigError, ModelplaneError, load_fleet
from modelplane.api.mirror import Mirror, location_problem
from modelplane.api.stackfile import read_stack_file
from modelplane.render.sources import (
    NOT_PINNED,
    PINNED_SHA256,
    chart_file_name,
    digest_problem,
    fill_commands,
    manifest_file_name,
    mirror_manifest,
    mirror_release,
    mirror_sources,
    sources_table,
)
from modelplane.render.fleet import fleet_sources
from modelplane.render.types import ClusterManifests, HelmRelease, RemoteManifest
from modelplane.scheduling import schedule

OCI = "oci://registry.internal/modelplane-charts"
BASE = "https://mirror.internal/manifests"
GATEWAY_API_URL = "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml"
GATEWAY_API_SHA256 = "751002b3b91a87f7ae3bd2517c79a47a8d7ed6702901808a1cf9bd97d284f9b8"
GIE_URL = "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.0.1/manifests.yaml"

CERT_MANAGER = HelmRelease("mp-cert-manager", "cert-manager", "cert-manager", "https://charts.jetstack.io", "v1.17.1",
                           {"crds": {"enabled": True}})
GATEWAY_HELM = HelmRelease("mp-gateway-helm", "envoy-gateway-system", "gateway-helm", "oci://docker.io/envoyproxy",
                           "v1.8.1", depends_on=("mp-cert-manager",))
GATEWAY_API = RemoteManifest("gateway-api-crds", "gatewayApi", "v1.5.1", GATEWAY_API_URL)
GIE = RemoteManifest("inference-extension-crds", "inferenceExtension", "v1.0.1", GIE_URL)


def mirror(**fields) -> Mirror:
    return Mirror.model_validate(fields)


def issues(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_fleet(config)
    return [str(issue) for issue in caught.value.issues]


# --- config -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("block", [
    {"charts": OCI, "manifests": BASE},
    {"charts": OCI},
    {"manifests": BASE},
    {"charts": "oci://registry.internal"},  # `helm push x.tgz oci://host` is valid: charts at the root
    {"charts": "oci://registry.internal:5000/a/b-c/d_e.f"},
    {"charts": "oci://[fd00::1]:5000/charts"},
    {"charts": "oci://registry.internal/modelplane-charts/"},  # a trailing slash is dropped when used
    {"charts": "https://artifactory.internal/artifactory/api/helm/helm-remote"},
    {"charts": "/srv/modelplane-mirror/charts", "manifests": "/srv/modelplane-mirror/manifests"},
    {"charts": "C:\\modelplane-mirror\\charts"},
    {"manifests": "https://mirror.internal"},
])
def test_good_mirror_blocks_load(block):
    fleet = load_fleet(fleet_config(mirror=block))
    assert fleet.mirror == Mirror.model_validate(block)
    assert fleet.warnings == ()


@pytest.mark.parametrize("block, path, message", [
    ({}, "modelplane:mirror", "set `charts`, `manifests` or both"),
    ({"charts": "modelplane-charts"}, "modelplane:mirror.charts", "a folder must be an absolute path (e.g. /srv/"),
    ({"manifests": "./manifests"}, "modelplane:mirror.manifests", "would depend on where `pulumi` runs"),
    ({"charts": "~/charts"}, "modelplane:mirror.charts", "'~' is not expanded here"),
    ({"charts": ""}, "modelplane:mirror.charts", "must not be empty"),
    ({"charts": "oci://registry.internal/Model Plane"}, "modelplane:mirror.charts", "must not contain spaces"),
    ({"charts": "oci:///charts"}, "modelplane:mirror.charts", "names no host"),
    ({"charts": "oci://registry.internal/ModelPlane"}, "modelplane:mirror.charts", "invalid repository path"),
    ({"charts": "oci://registry.internal/a//b"}, "modelplane:mirror.charts", "invalid repository path"),
    ({"charts": "oci://registry.internal/charts:1.0"}, "modelplane:mirror.charts", "without a tag or digest"),
    ({"charts": "oci://registry.internal:0/charts"}, "modelplane:mirror.charts", "invalid port"),
    ({"charts": "oci://registry.internal:99999/charts"}, "modelplane:mirror.charts", "invalid port"),
    ({"charts": "oci://-bad-.internal/charts"}, "modelplane:mirror.charts", "invalid host name"),
    ({"charts": "oci://robot:hunter2@registry.internal/c"}, "modelplane:mirror.charts", "must not hold credentials"),
    ({"manifests": "https://user:pw@mirror.internal/m"}, "modelplane:mirror.manifests", "must not hold credentials"),
    ({"manifests": "https://mirror.internal/m?token=x"}, "modelplane:mirror.manifests", "must not have a query"),
    ({"manifests": "oci://registry.internal/manifests"}, "modelplane:mirror.manifests", "not OCI artifacts"),
    ({"manifests": "file:///srv/manifests"}, "modelplane:mirror.manifests", "not a file:// URL"),
    ({"charts": "s3://bucket/charts"}, "modelplane:mirror.charts", "unsupported scheme 's3://'"),
    ({"charts": 5}, "modelplane:mirror.charts", "must be a string"),
    ({"chart": OCI}, "modelplane:mirror.chart", "did you mean 'charts'?"),
    ({"charts": "oci://registry.internal/c\nx"}, "modelplane:mirror.charts", ""),
])
def test_bad_mirror_blocks_name_the_path_and_the_fix(block, path, message):
    [found] = issues(fleet_config(mirror=block))
    assert found.startswith(f"{path}: ") and message in found, found


def test_messages_never_repeat_a_location_that_may_hold_credentials():
    [found] = issues(fleet_config(mirror={"charts": "oci://robot:hunter2@registry.internal/c"}))
    assert "hunter2" not in found


def test_the_mirror_must_be_a_block():
    [found] = issues(fleet_config(mirror=OCI))
    assert found.startswith("modelplane:mirror: must be a mapping of fields")


@pytest.mark.parametrize("block, path", [
    ({"manifests": "http://files.internal/manifests"}, "modelplane:mirror.manifests"),
    ({"charts": "http://charts.internal/helm"}, "modelplane:mirror.charts"),
])
def test_plain_http_loads_with_a_warning(block, path):
    fleet = load_fleet(fleet_config(mirror=block))
    [warning] = [str(w) for w in fleet.warnings]
    assert warning.startswith(f"{path}: ") and "plain http" in warning


@pytest.mark.parametrize("text, what", [("oci://r.internal/c", "charts"), ("https://h/m", "manifests"),
                                        ("/srv/m", "manifests"), ("/srv/c", "charts")])
def test_location_problem_accepts(text, what):
    assert location_problem(text, what) is None


# --- rewrites ---------------------------------------------------------------------------------------

def test_without_a_mirror_nothing_changes_but_the_pinned_digest_is_filled_in():
    assert mirror_release(CERT_MANAGER, None) is CERT_MANAGER
    assert mirror_release(CERT_MANAGER, mirror(manifests=BASE)) is CERT_MANAGER
    assert mirror_manifest(GIE, None) == GIE
    assert mirror_manifest(GATEWAY_API, None) == dataclasses.replace(GATEWAY_API, sha256=GATEWAY_API_SHA256)
    assert mirror_manifest(GATEWAY_API, mirror(charts=OCI)).url == GATEWAY_API_URL


@pytest.mark.parametrize("release", [CERT_MANAGER, GATEWAY_HELM])
def test_an_oci_mirror_keeps_chart_and_version_under_the_prefix(release):
    mirrored = mirror_release(release, mirror(charts=OCI + "/"))
    assert mirrored == dataclasses.replace(release, repository=OCI)
    assert mirror_release(mirrored, mirror(charts=OCI)) == mirrored  # idempotent


def test_the_scheme_is_written_the_way_helm_recognises_it():
    assert mirror_release(GATEWAY_HELM, mirror(charts="OCI://registry.internal/c")).repository == \
           "oci://registry.internal/c"


def test_a_helm_repository_mirror_replaces_the_repository():
    repo = "https://artifactory.internal/api/helm/charts"
    assert mirror_release(GATEWAY_HELM, mirror(charts=repo)) == dataclasses.replace(GATEWAY_HELM, repository=repo)


@pytest.mark.parametrize("release, file", [(CERT_MANAGER, "cert-manager-v1.17.1.tgz"),
                                           (GATEWAY_HELM, "gateway-helm-v1.8.1.tgz")])
def test_a_folder_mirror_installs_the_file_helm_pull_writes(release, file):
    mirrored = mirror_release(release, mirror(charts="/srv/mirror/charts/"))
    assert (mirrored.chart, mirrored.repository, mirrored.version) == (f"/srv/mirror/charts/{file}", "", release.version)
    assert (mirrored.name, mirrored.namespace, mirrored.values, mirrored.depends_on) == \
           (release.name, release.namespace, release.values, release.depends_on)
    assert mirror_release(mirrored, mirror(charts="/srv/mirror/charts")) == mirrored  # idempotent


def test_charts_are_named_as_helm_pull_writes_them():
    assert chart_file_name("cert-manager", "v1.17.1") == "cert-manager-v1.17.1.tgz"


def test_manifests_get_a_name_per_component_version_and_upstream_file():
    assert manifest_file_name(GATEWAY_API) == "gatewayApi-v1.5.1-standard-install.yaml"
    assert manifest_file_name(GIE) == "inferenceExtension-v1.0.1-manifests.yaml"
    newer = dataclasses.replace(GIE, version="v1.1.0", url=GIE_URL.replace("v1.0.1", "v1.1.0"))
    assert manifest_file_name(newer) != manifest_file_name(GIE)  # two versions side by side
    odd = dataclasses.replace(GIE, version="v1/../../x")
    assert "/" not in manifest_file_name(odd)


@pytest.mark.parametrize("base, url", [
    (BASE, f"{BASE}/gatewayApi-v1.5.1-standard-install.yaml"),
    (BASE + "/", f"{BASE}/gatewayApi-v1.5.1-standard-install.yaml"),
    ("/srv/mirror/manifests", "/srv/mirror/manifests/gatewayApi-v1.5.1-standard-install.yaml"),
])
def test_a_manifest_mirror_rewrites_the_url_and_keeps_the_pin(base, url):
    mirrored = mirror_manifest(GATEWAY_API, mirror(manifests=base))
    assert mirrored == dataclasses.replace(GATEWAY_API, url=url, sha256=GATEWAY_API_SHA256)
    assert mirror_manifest(mirrored, mirror(manifests=base)) == mirrored  # idempotent


# --- digests ----------------------------------------------------------------------------------------

def test_the_only_pin_is_the_one_found_published():
    assert PINNED_SHA256 == {GATEWAY_API_URL: GATEWAY_API_SHA256}


def test_digest_problem():
    content = b"apiVersion: v1\n"
    pinned = dataclasses.replace(GIE, url="/srv/m/x.yaml", sha256=hashlib.sha256(content).hexdigest())
    assert digest_problem(pinned, content) is None
    assert digest_problem(dataclasses.replace(pinned, sha256=pinned.sha256.upper()), content) is None
    assert digest_problem(dataclasses.replace(pinned, sha256=None), b"anything") is None
    problem = digest_problem(pinned, content + b"# changed\n")
    assert problem.startswith("/srv/m/x.yaml is not the pinned inferenceExtension v1.0.1 manifest: its SHA-256 is ")
    assert pinned.sha256 in problem and "it was not applied" in problem


def test_a_folder_manifest_is_checked_before_it_is_applied(tmp_path):
    from modelplane.infra.sources import manifest_file

    good = tmp_path / "good.yaml"
    good.write_bytes(b"kind: List\n")
    pinned = dataclasses.replace(GIE, url=str(good), sha256=hashlib.sha256(b"kind: List\n").hexdigest())
    assert manifest_file(pinned) == str(good)
    assert manifest_file(dataclasses.replace(pinned, sha256=None)) == str(good)
    assert manifest_file(GIE) == GIE_URL  # a URL: the provider downloads it
    good.write_bytes(b"kind: List\n# tampered\n")
    with pytest.raises(pulumi.RunError, match="is not the pinned inferenceExtension v1.0.1 manifest"):
        manifest_file(pinned)
    with pytest.raises(pulumi.RunError, match="no such file in the mirror folder"):
        manifest_file(dataclasses.replace(pinned, url=str(tmp_path / "missing.yaml")))


# --- the listing ------------------------------------------------------------------------------------

def upstream_clusters(stack: str, repo):
    from modelplane.render import render_fleet

    fleet = load_fleet(read_stack_file(repo / "stacks" / f"Pulumi.{stack}.yaml").config)
    return fleet, render_fleet(fleet, schedule(fleet, None))


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_every_chart_and_manifest_is_listed_once(repo, stack):
    fleet, clusters = upstream_clusters(stack, repo)
    sources = fleet_sources(fleet)
    charts = [(c.chart, c.version, c.repository) for c in sources.charts]
    assert charts == sorted(set(charts))
    assert set(charts) == {(r.chart, r.version, r.repository) for c in clusters for r in c.releases}
    for chart in sources.charts:
        assert set(chart.clusters) == {c.cluster for c in clusters
                                       if (chart.chart, chart.version) in {(r.chart, r.version) for r in c.releases}}
    urls = [m.url for m in sources.manifests]
    assert len(urls) == len(set(urls))
    assert set(urls) == {m.url for c in clusters for m in c.remote_manifests}
    # The workload clusters' GIE CRDs; an Envoy Gateway front door's chart brings its Gateway API CRDs.
    assert GIE_URL in set(urls)
    assert GATEWAY_API_URL not in set(urls)


def test_the_listing_says_where_each_source_goes_in_the_mirror():
    upstream = [ClusterManifests("a", "workload", releases=[CERT_MANAGER, GATEWAY_HELM], remote_manifests=[GIE]),
                ClusterManifests("b", "workload", releases=[CERT_MANAGER], remote_manifests=[GIE, GATEWAY_API])]
    sources = mirror_sources(upstream, mirror(charts=OCI, manifests="/srv/m"))
    assert [c.to_dict() for c in sources.charts] == [
        {"chart": "cert-manager", "version": "v1.17.1", "repository": "https://charts.jetstack.io",
         "file": "cert-manager-v1.17.1.tgz", "destination": f"{OCI}/cert-manager:v1.17.1", "clusters": ["a", "b"]},
        {"chart": "gateway-helm", "version": "v1.8.1", "repository": "oci://docker.io/envoyproxy",
         "file": "gateway-helm-v1.8.1.tgz", "destination": f"{OCI}/gateway-helm:v1.8.1", "clusters": ["a"]}]
    assert [m.to_dict() for m in sources.manifests] == [
        {"component": "gatewayApi", "version": "v1.5.1", "url": GATEWAY_API_URL, "sha256": GATEWAY_API_SHA256,
         "pinned": True, "file": "gatewayApi-v1.5.1-standard-install.yaml",
         "destination": "/srv/m/gatewayApi-v1.5.1-standard-install.yaml", "clusters": ["b"]},
        {"component": "inferenceExtension", "version": "v1.0.1", "url": GIE_URL, "sha256": None, "pinned": False,
         "file": "inferenceExtension-v1.0.1-manifests.yaml",
         "destination": "/srv/m/inferenceExtension-v1.0.1-manifests.yaml", "clusters": ["a", "b"]}]
    folder = mirror_sources(upstream, mirror(charts="/srv/c"))
    assert [c.destination for c in folder.charts] == ["/srv/c/cert-manager-v1.17.1.tgz", "/srv/c/gateway-helm-v1.8.1.tgz"]
    assert [m.destination for m in folder.manifests] == [None, None]
    table = sources_table(sources)
    assert NOT_PINNED in table and GATEWAY_API_SHA256 in table
    json.dumps(sources.to_dict())


def test_one_chart_version_from_two_repositories_cannot_share_the_mirror():
    other = dataclasses.replace(CERT_MANAGER, repository="https://example.com/charts")
    with pytest.raises(ModelplaneError, match="comes from two repositories"):
        mirror_sources([ClusterManifests("a", "workload", releases=[CERT_MANAGER, other])], None)


@pytest.mark.parametrize("block, expected", [
    ({"charts": OCI, "manifests": BASE}, [
        "mkdir -p modelplane-mirror/pull/cert-manager-v1.17.1 && helm pull cert-manager --repo https://charts.jetstack.io --version v1.17.1 --destination "
        "modelplane-mirror/pull/cert-manager-v1.17.1 && mv modelplane-mirror/pull/cert-manager-v1.17.1/*.tgz "
        "modelplane-mirror/charts/cert-manager-v1.17.1.tgz",
        "mkdir -p modelplane-mirror/pull/gateway-helm-v1.8.1 && helm pull oci://docker.io/envoyproxy/gateway-helm --version v1.8.1 --destination "
        "modelplane-mirror/pull/gateway-helm-v1.8.1 && mv modelplane-mirror/pull/gateway-helm-v1.8.1/*.tgz "
        "modelplane-mirror/charts/gateway-helm-v1.8.1.tgz",
        f"curl -fsSL -o modelplane-mirror/manifests/gatewayApi-v1.5.1-standard-install.yaml {GATEWAY_API_URL}",
        f"echo '{GATEWAY_API_SHA256}  modelplane-mirror/manifests/gatewayApi-v1.5.1-standard-install.yaml' "
        "| sha256sum -c -",
        "sha256sum modelplane-mirror/manifests/inferenceExtension-v1.0.1-manifests.yaml",
        f"helm push modelplane-mirror/charts/cert-manager-v1.17.1.tgz {OCI}",
        f"helm push modelplane-mirror/charts/gateway-helm-v1.8.1.tgz {OCI}",
        f"curl -fsS -T modelplane-mirror/manifests/gatewayApi-v1.5.1-standard-install.yaml "
        f"{BASE}/gatewayApi-v1.5.1-standard-install.yaml"]),
    ({"charts": "/srv/c", "manifests": "/srv/m"}, [
        "cp modelplane-mirror/charts/*.tgz /srv/c/",
        "cp modelplane-mirror/manifests/inferenceExtension-v1.0.1-manifests.yaml "
        "/srv/m/inferenceExtension-v1.0.1-manifests.yaml"]),
])
def test_fill_commands_are_ready_to_paste(block, expected):
    upstream = [ClusterManifests("a", "workload", releases=[CERT_MANAGER, GATEWAY_HELM],
                                 remote_manifests=[GIE, GATEWAY_API])]
    lines = fill_commands(mirror_sources(upstream, mirror(**block))).splitlines()
    for line in expected:
        assert line in lines, line


def test_without_a_mirror_the_commands_only_download():
    upstream = [ClusterManifests("a", "workload", releases=[CERT_MANAGER], remote_manifests=[GIE])]
    text = fill_commands(mirror_sources(upstream, None))
    assert "helm pull cert-manager" in text and "helm push" not in text and "set modelplane:mirror.charts" in text


# --- the command line -------------------------------------------------------------------------------

def modelplane(repo, *args):
    return subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=repo, capture_output=True, text=True,
                          timeout=60)


def test_modelplane_sources_prints_the_listing_and_the_commands(repo, tmp_path):
    stack = tmp_path / "Pulumi.mirrored.yaml"
    stack.write_text((repo / "stacks" / "Pulumi.demo.yaml").read_text().replace(
        "config:\n", f"config:\n  modelplane:mirror:\n    charts: {OCI}\n    manifests: {BASE}\n", 1))
    table = modelplane(repo, "sources", "--config", str(stack))
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith(f"Mirror: charts {OCI}, manifests {BASE}\n")
    assert "helm push modelplane-mirror/charts/cert-manager-" in table.stdout
    data = json.loads(modelplane(repo, "sources", "--config", str(stack), "--output", "json").stdout)
    assert data["mirror"] == {"charts": OCI, "manifests": BASE}
    assert {c["chart"] for c in data["charts"]} >= {"cert-manager", "gateway-helm", "metallb"}
    assert all(c["destination"].startswith(OCI + "/") for c in data["charts"])


def test_modelplane_sources_refuses_a_relative_folder(repo, tmp_path):
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text((repo / "stacks" / "Pulumi.demo.yaml").read_text().replace(
        "config:\n", "config:\n  modelplane:mirror:\n    charts: mirror/charts\n", 1))
    result = modelplane(repo, "sources", "--config", str(stack))
    assert result.returncode == 2 and "modelplane:mirror.charts: a folder must be an absolute path" in result.stderr
