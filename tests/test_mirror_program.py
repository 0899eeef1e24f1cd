"""Air-gapped sources under Pulumi mocks: how a release reaches Helm, and that a mirrored program stays inside it."""
from __future__ import annotations

import dataclasses

import pulumi
import pytest

from builders import REPO
from modelplane.api.mirror import Mirror
from modelplane.infra.kube import helm_release
from modelplane.render.sources import mirror_release
from modelplane.render.types import HelmRelease
from program_run import RELEASE, deploy, stack_config

CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
OCI = "oci://registry.internal/modelplane-charts"
BASE = "https://mirror.internal/manifests"

CERT_MANAGER = HelmRelease("mp-cert-manager", "cert-manager", "cert-manager", "https://charts.jetstack.io", "v1.17.1",
                           {"crds": {"enabled": True}})
GATEWAY_HELM = HelmRelease("mp-gateway-helm", "envoy-gateway-system", "gateway-helm", "oci://docker.io/envoyproxy",
                           "v1.8.1")


@pulumi.runtime.test
def test_helm_release_takes_a_chart_from_a_repository_a_registry_or_a_file(monitor, tmp_path):
    (tmp_path / "cert-manager-v1.17.1.tgz").write_bytes(b"")
    folder = Mirror(charts=str(tmp_path))
    cases = {
        "https": CERT_MANAGER,
        "oci": GATEWAY_HELM,
        "oci-mirror": mirror_release(CERT_MANAGER, Mirror(charts=OCI)),
        "repo-mirror": mirror_release(GATEWAY_HELM, Mirror(charts="https://charts.internal/helm")),
        "folder": mirror_release(CERT_MANAGER, folder),
    }
    made = [helm_release(f"t/{key}", release, pulumi.ResourceOptions()) for key, release in cases.items()]

    def check(_):
        seen = {r.name: r.inputs for r in monitor.registrations if r.type == RELEASE}
        wanted = {
            "t/https": ("cert-manager", {"repo": "https://charts.jetstack.io"}),
            "t/oci": ("oci://docker.io/envoyproxy/gateway-helm", None),
            "t/oci-mirror": (f"{OCI}/cert-manager", None),
            "t/repo-mirror": ("gateway-helm", {"repo": "https://charts.internal/helm"}),
            "t/folder": (str(tmp_path / "cert-manager-v1.17.1.tgz"), None),
        }
        for name, (chart, repository) in wanted.items():
            inputs = seen[name]
            assert (inputs["chart"], inputs.get("repositoryOpts")) == (chart, repository), name
            assert inputs["version"] == cases[name[2:]].version
            assert (inputs["name"], inputs["namespace"], inputs["createNamespace"], inputs["atomic"]) == \
                   (cases[name[2:]].name, cases[name[2:]].namespace, True, True)
        assert seen["t/folder"]["values"] == {"crds": {"enabled": True}}

    return pulumi.Output.all(*[r.urn for r in made]).apply(check)


def test_a_missing_chart_file_stops_the_run_before_anything_is_registered(monitor, tmp_path):
    release = mirror_release(CERT_MANAGER, Mirror(charts=str(tmp_path)))
    with pytest.raises(pulumi.RunError, match=r"cert-manager-v1\.17\.1\.tgz: no such file in the mirror folder"):
        helm_release("t/missing", release, pulumi.ResourceOptions())


# --- the whole program, mirrored --------------------------------------------------------------------

def sources(deployed):
    releases = deployed.seen.of_type(RELEASE)
    files = deployed.seen.of_type(CONFIG_FILE)
    assert releases and files
    return releases, files


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_with_an_oci_and_https_mirror_nothing_points_outside_it(stack, monitor, mocks):
    config = {**stack_config(stack), "mirror": {"charts": OCI, "manifests": BASE}}
    releases, files = sources(deploy(monitor, mocks, config))
    outside = [(r.name, r.inputs["chart"]) for r in releases if not r.inputs["chart"].startswith(OCI + "/")]
    outside += [(r.name, r.inputs.get("repositoryOpts")) for r in releases if r.inputs.get("repositoryOpts")]
    outside += [(f.name, f.inputs["file"]) for f in files if not f.inputs["file"].startswith(BASE + "/")]
    assert outside == []


def test_with_folder_mirrors_every_release_and_manifest_is_a_local_file(tmp_path, monkeypatch, monitor, mocks):
    from modelplane.infra import sources as infra_sources
    from modelplane.render.fleet import fleet_sources
    from modelplane.api import load_fleet

    charts, manifests = tmp_path / "charts", tmp_path / "manifests"
    config = {**stack_config("demo"), "mirror": {"charts": str(charts), "manifests": str(manifests)}}
    fleet = load_fleet(config)
    listing = fleet_sources(fleet)
    for chart in listing.charts:  # the files `modelplane sources` says to put there (contents do not matter here)
        (charts / chart.file).parent.mkdir(parents=True, exist_ok=True)
        (charts / chart.file).write_bytes(b"")
    for manifest in listing.manifests:
        (manifests / manifest.file).parent.mkdir(parents=True, exist_ok=True)
        (manifests / manifest.file).write_bytes(b"")
    checked = []
    # The empty files cannot match the pinned digest: record the check instead of failing on it.
    monkeypatch.setattr(infra_sources, "digest_problem", lambda m, content: checked.append(m.url))
    releases, files = sources(deploy(monitor, mocks, config))
    assert sorted({r.inputs["chart"] for r in releases}) == sorted(str(charts / c.file) for c in listing.charts)
    assert all(not r.inputs.get("repositoryOpts") for r in releases)
    assert {f.inputs["file"] for f in files} == {str(manifests / m.file) for m in listing.manifests}
    assert set(checked) == {str(manifests / m.file) for m in listing.manifests}


def test_a_tampered_manifest_in_a_folder_mirror_stops_the_run(tmp_path):
    from modelplane.infra.sources import manifest_file
    from modelplane.render.sources import mirror_manifest
    from modelplane.render.types import RemoteManifest

    url = "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml"
    mirrored = mirror_manifest(RemoteManifest("gateway-api-crds", "gatewayApi", "v1.5.1", url),
                               Mirror(manifests=str(tmp_path)))
    (tmp_path / "gatewayApi-v1.5.1-standard-install.yaml").write_text("# not the upstream file\n")
    with pytest.raises(pulumi.RunError, match="is not the pinned gatewayApi v1.5.1 manifest"):
        manifest_file(dataclasses.replace(mirrored))


def fill_folder_mirror(config: dict, charts, manifests):
    """The files `modelplane sources` says a folder mirror holds (charts empty, manifests a line each)."""
    from modelplane.api import load_fleet
    from modelplane.render.fleet import fleet_sources

    fleet = load_fleet(config)
    listing = fleet_sources(fleet)
    charts.mkdir(parents=True, exist_ok=True)
    manifests.mkdir(parents=True, exist_ok=True)
    for chart in listing.charts:
        (charts / chart.file).write_bytes(b"")
    for manifest in listing.manifests:
        (manifests / manifest.file).write_text(f"# {manifest.file}\n")
    return fleet, listing


def test_check_folder_mirror_lists_every_missing_or_altered_file_before_anything_is_registered(
        tmp_path, monkeypatch, monitor):
    import hashlib

    from modelplane.infra.sources import check_folder_mirror, folder_mirror_problems
    from modelplane.render import sources as render_sources

    charts, manifests = tmp_path / "charts", tmp_path / "manifests"
    config = {**stack_config("demo"), "mirror": {"charts": str(charts), "manifests": str(manifests)}}
    fleet, listing = fill_folder_mirror(config, charts, manifests)
    # Pin every listed manifest to the bytes just written: the folder is then complete and intact.
    for manifest in listing.manifests:
        monkeypatch.setitem(render_sources.PINNED_SHA256, manifest.url,
                            hashlib.sha256(f"# {manifest.file}\n".encode()).hexdigest())
    assert folder_mirror_problems(fleet) == []
    check_folder_mirror(fleet)
    (charts / listing.charts[0].file).unlink()
    (manifests / listing.manifests[0].file).write_text("# altered\n")
    problems = folder_mirror_problems(fleet)
    assert len(problems) == 2
    assert problems[0].startswith(f"{charts / listing.charts[0].file}: no such file in the mirror folder")
    assert problems[1].startswith(f"{manifests / listing.manifests[0].file} is not the pinned ")
    with pytest.raises(pulumi.RunError, match=r"2 problems with the mirror folder \(listed above\); nothing was changed"):
        check_folder_mirror(fleet)
    assert monitor.registrations == []


def test_without_a_folder_mirror_nothing_is_read():
    from modelplane.api import load_fleet
    from modelplane.infra.sources import folder_mirror_problems

    for block in (None, {"charts": OCI, "manifests": BASE}):
        config = {**stack_config("demo"), **({"mirror": block} if block else {})}
        assert folder_mirror_problems(load_fleet(config)) == []


def test_the_program_with_an_incomplete_folder_mirror_registers_nothing(tmp_path, monitor, mocks):
    charts, manifests = tmp_path / "charts", tmp_path / "manifests"
    config = {**stack_config("demo"), "mirror": {"charts": str(charts), "manifests": str(manifests)}}
    _, listing = fill_folder_mirror(config, charts, manifests)
    (charts / listing.charts[0].file).unlink()
    with pytest.raises(Exception, match="problems? with the mirror folder"):
        deploy(monitor, mocks, config)
    assert [r for r in monitor.registrations if r.type.startswith("kubernetes:")] == []


HOSTILE_MANIFEST_CHECK = """
import os, sys
sys.path[:0] = [{tests!r}, {repo!r}]
from pathlib import Path
from test_mirror_program import fill_folder_mirror
from builders import stack_config
from modelplane.infra.sources import folder_mirror_problems
charts, manifests = Path({folder!r}) / "charts", Path({folder!r}) / "manifests"
config = {{**stack_config("demo"), "mirror": {{"charts": str(charts), "manifests": str(manifests)}}}}
fleet, listing = fill_folder_mirror(config, charts, manifests)
target = manifests / listing.manifests[0].file
for make in (lambda: target.symlink_to("/dev/zero"), lambda: os.mkfifo(target),
             lambda: open(target, "wb").truncate(3 << 30)):
    target.unlink()
    make()
    print(folder_mirror_problems(fleet)[0], flush=True)
"""


def test_the_mirror_check_refuses_dev_zero_a_fifo_and_a_huge_sparse_file_unread(tmp_path):
    """Finding 4 of issue 25: each would fill memory, block forever or be read whole; under an address-space
    limit and a time limit, each is named and refused."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    script = HOSTILE_MANIFEST_CHECK.format(tests=str(REPO / "tests"), repo=str(REPO), folder=str(tmp_path))
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                                preexec_fn=limit, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail("the mirror check blocked (a FIFO read, or /dev/zero read forever)")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    assert "is not a regular file (a pipe or a device); name a file" in lines[0]
    assert "is not a regular file (a pipe or a device); name a file" in lines[1]
    assert "is 3,221,225,472 bytes; the limit is 64 MiB" in lines[2]
