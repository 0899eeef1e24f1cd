"""The e2e harness's stand-in chart mirror (tests/e2e/charts.py): files the program accepts, real pinned CRDs, stable bytes."""
from __future__ import annotations

import copy
import gzip
import io
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from builders import traefik_front_door

import k8s_validation
from e2e.charts import CHARTS, PINNED_NOT_STOOD_IN, crd_name, mirror_config, stand_in_report, write_mirror
from modelplane.api import load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.infra.sources import folder_mirror_problems
from modelplane.render.fleet import cluster_stacks, fleet_sources
from modelplane.render.types import ClusterStack, HelmRelease

REPO = Path(__file__).resolve().parent.parent
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def crd_dir() -> Path:
    k8s_validation.require_all_crds()  # the stand-in charts hold the whole set
    return k8s_validation.CRD_DIR


@pytest.fixture(scope="module")
def demo_config() -> dict:
    return dict(read_stack_file(REPO / "stacks" / "Pulumi.demo.yaml").config)


def existing_front_door(config: dict) -> dict:
    """The demo with the e2e front door's shape: Envoy Gateway on an Existing cluster."""
    config = copy.deepcopy(config)
    gateway = config["inferenceGateway"]
    gateway["cluster"] = {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}
    gateway["envoyGateway"]["metallb"] = {"addressPool": "10.0.0.240-10.0.0.250"}
    return config


@pytest.fixture(scope="module")
def mirror(tmp_path_factory, crd_dir, demo_config):
    """The demo fleet (e2e front door) with its mirror written, and the stand-ins."""
    out = tmp_path_factory.mktemp("mirror")
    config = existing_front_door(demo_config)
    stand_ins = write_mirror(cluster_stacks(load_fleet(config, origin="api")), out, crd_dir)
    fleet = load_fleet({**config, "mirror": mirror_config(out)}, origin="api")
    return out, fleet, stand_ins


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def crd_header(data: bytes) -> tuple[str, str]:
    """Kind and name of a one-CRD file, parsed up to its spec (the bytes are the pinned file's; parsing it all is slow)."""
    [head] = [d for d in yaml.load_all(data[:data.index(b"\nspec:")], Loader=LOADER) if d]
    return head["kind"], head["metadata"]["name"]


def test_the_program_accepts_the_mirror(mirror):
    out, fleet, stand_ins = mirror
    assert folder_mirror_problems(fleet) == []
    sources = fleet_sources(fleet)
    expected = {Path(c.destination) for c in sources.charts} | {Path(m.destination) for m in sources.manifests}
    assert set(p for p in out.rglob("*") if p.is_file()) == expected
    assert sorted((s.kind, s.name) for s in stand_ins) == sorted(
        [("chart", c.chart) for c in sources.charts] + [("manifest", m.file) for m in sources.manifests])


def test_charts_hold_the_pinned_crds_and_device_classes(mirror, crd_dir):
    out, fleet, stand_ins = mirror
    for stand_in in (s for s in stand_ins if s.kind == "chart"):
        files = members(out / "charts" / f"{stand_in.name}-{stand_in.version}.tgz")
        assert all(name.startswith(f"{stand_in.name}/") for name in files)
        chart = yaml.safe_load(files[f"{stand_in.name}/Chart.yaml"])
        assert (chart["apiVersion"], chart["name"], chart["version"]) == ("v2", stand_in.name, stand_in.version)
        plan = CHARTS[stand_in.name]
        folder = "templates" if plan.crds_as_templates else "crds"
        for path in plan.crds:
            data = files[f"{stand_in.name}/{folder}/{Path(path).name}"]
            assert data == (crd_dir / path).read_bytes()
            assert crd_header(data) == ("CustomResourceDefinition", crd_name(path))
        classes = [yaml.safe_load(data) for name, data in files.items() if "/templates/deviceclass-" in name]
        assert [(c["apiVersion"], c["kind"], c["metadata"]["name"]) for c in classes] == [
            ("resource.k8s.io/v1", "DeviceClass", name) for name, _ in plan.device_classes]
        assert stand_in.installs == tuple(f"CRD {crd_name(p)}" for p in plan.crds) + tuple(
            f"DeviceClass {name}" for name, _ in plan.device_classes)


def test_the_example_driver_stands_in_with_its_device_class(mirror):
    out, _, _ = mirror
    files = members(out / "charts" / "dra-example-driver-0.4.0.tgz")
    device_class = yaml.safe_load(files["dra-example-driver/templates/deviceclass-gpu.example.com.yaml"])
    assert device_class["spec"]["selectors"] == [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]


def test_the_inference_extension_manifest_is_the_pinned_crds(mirror):
    out, _, _ = mirror
    docs = [d for d in yaml.load_all((out / "manifests" / "inferenceExtension-v1.0.1-manifests.yaml").read_bytes(),
                                     Loader=LOADER) if d]
    assert [d["metadata"]["name"] for d in docs] == ["inferencepools.inference.networking.k8s.io",
                                                     "inferenceobjectives.inference.networking.x-k8s.io"]


def test_a_pinned_manifest_is_reported_not_written(mirror, tmp_path, crd_dir, demo_config):
    shutil.copytree(mirror[0], tmp_path, dirs_exist_ok=True)  # the same charts: nothing to rewrite
    traefik = copy.deepcopy(demo_config)
    traefik_front_door(traefik["inferenceGateway"])
    fleet = load_fleet(traefik, origin="api")  # a kind front door on Traefik: modelplane installs the Gateway API CRDs
    stand_ins = write_mirror(cluster_stacks(fleet), tmp_path, crd_dir)
    [gateway_api] = [s for s in stand_ins if s.name == "gatewayApi-v1.5.1-standard-install.yaml"]
    assert (gateway_api.kind, gateway_api.installs, gateway_api.not_covered) == ("manifest", (), PINNED_NOT_STOOD_IN)
    assert not (tmp_path / "manifests" / gateway_api.name).exists()
    problems = folder_mirror_problems(load_fleet({**traefik, "mirror": mirror_config(tmp_path)}, origin="api"))
    assert len(problems) == 1 and gateway_api.name in problems[0]


def test_rewriting_changes_no_byte_and_mirrored_stacks_give_the_same_files(mirror, crd_dir):
    out, fleet, stand_ins = mirror
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    assert write_mirror(cluster_stacks(fleet), out, crd_dir) == stand_ins  # already pointing into the mirror
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()} == before
    archive = (out / "charts" / "metallb-0.14.9.tgz").read_bytes()
    assert archive[4:8] == b"\0\0\0\0"  # gzip header mtime
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == sorted(i.name for i in infos)
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(0, 0, 0, "", "")}


def test_a_chart_without_a_stand_in_is_refused(tmp_path, crd_dir):
    stack = ClusterStack("c", "workload", "g", releases=[HelmRelease("r", "ns", "mystery", "https://x.example", "1.0.0")])
    with pytest.raises(KeyError, match="mystery"):
        write_mirror([stack], tmp_path, crd_dir)


def test_the_report_lists_every_stand_in_and_its_gaps(mirror):
    _, _, stand_ins = mirror
    report = stand_in_report(stand_ins)
    for stand_in in stand_ins:
        assert stand_in.name in report and stand_in.not_covered in report
