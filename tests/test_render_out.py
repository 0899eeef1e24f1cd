"""`modelplane render --out DIR` replaces only what it wrote itself.

Every cluster folder render writes holds `.modelplane-render` (a format version and the files it
wrote). A folder without it, a render-written folder with files added since, or a file where a
folder goes is refused with exit 2 and nothing written; a re-render replaces its own folders, and
removes those of clusters that left the fleet.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modelplane.api import ModelplaneError
from modelplane.render import output

CLUSTERS = ["control", "gpu-eu-west", "gpu-us-east"]  # the demo stack's front door and workload clusters


# A user's shell (no PYTHONDONTWRITEBYTECODE), and `python -P -m modelplane` with the checkout on PYTHONPATH: the
# checkout's code runs whatever the working directory holds (plain `-m` would import a ./modelplane folder first).
USER_ENV = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")},
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


def render(repo, out, *args, config=None, cwd=None) -> subprocess.CompletedProcess:
    source = ["--config", config] if config else ["--stack", "demo"]
    return subprocess.run([sys.executable, "-P", "-m", "modelplane", "render", *map(str, source), "--out", str(out),
                           *args], cwd=cwd or repo, capture_output=True, text=True, timeout=120, env=USER_ENV)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def demo_stack(repo, tmp_path, edit) -> Path:
    document = yaml.safe_load((repo / "stacks" / "Pulumi.demo.yaml").read_text())
    edit(document["config"])
    path = tmp_path / "Pulumi.edited.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def assert_refused(result, folder: Path, why: str):
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {folder} {why}; "), result.stderr
    assert "nothing was written: choose another --out, or move or remove" in result.stderr


# --- refused: nothing written ------------------------------------------------------------------------

def test_render_out_refuses_folder_it_did_not_write(repo, tmp_path):
    out = tmp_path / "out"
    (out / "gpu-eu-west").mkdir(parents=True)
    (out / "gpu-eu-west" / "notes.md").write_text("mine\n")
    result = render(repo, out)
    assert_refused(result, out / "gpu-eu-west", "exists and was not written by modelplane render "
                                                "(it has no .modelplane-render)")
    assert tree(out) == {"gpu-eu-west/notes.md": b"mine\n"}  # the other clusters' folders were not written either
    assert sorted(os.listdir(out)) == ["gpu-eu-west"]


def test_render_out_dot_never_deletes_a_package_named_like_the_front_door(repo, tmp_path):
    """The bug: a front door called `modelplane` and `--out .` in the project deleted the package source."""
    def front_door_named_modelplane(config):
        config["modelplane:inferenceGateway"]["clusterName"] = "modelplane"

    stack = demo_stack(repo, tmp_path, front_door_named_modelplane)
    project = tmp_path / "project"
    (project / "modelplane").mkdir(parents=True)
    (project / "modelplane" / "__init__.py").write_text('"""the package"""\n')
    before = tree(project)
    result = render(repo, ".", config=stack, cwd=project)
    assert_refused(result, Path("modelplane"), "exists and was not written by modelplane render "
                                               "(it has no .modelplane-render)")
    assert tree(project) == before and sorted(os.listdir(project)) == ["modelplane"]


def test_a_modelplane_folder_in_the_working_directory_is_not_run_nor_touched(repo, tmp_path):
    """`python -P -m modelplane` (docs/config.md) runs the installed command, not ./modelplane, and writes nothing there."""
    decoy = tmp_path / "modelplane"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy ran')\n")
    (decoy / "__main__.py").write_text("raise SystemExit('the decoy ran')\n")
    done = subprocess.run([sys.executable, "-P", "-m", "modelplane", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=USER_ENV)
    assert (done.returncode, done.stderr) == (0, "") and done.stdout.startswith("modelplane ")
    assert sorted(os.listdir(decoy)) == ["__init__.py", "__main__.py"]  # no __pycache__ beside it
    assert "`python -P -m modelplane` is the same" in " ".join((repo / "docs" / "config.md").read_text().split())


def test_render_out_refuses_a_regular_file(repo, tmp_path):
    out = tmp_path / "manifests.yaml"
    out.write_text("mine\n")
    result = render(repo, out)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: --out {out} is a file, not a folder; nothing written: pass a folder "
                             "(render writes one folder per cluster in it)\n")
    assert out.read_text() == "mine\n" and sorted(os.listdir(tmp_path)) == [out.name]


def test_render_out_refuses_a_file_named_like_a_cluster(repo, tmp_path):
    (tmp_path / "control").write_text("mine\n")
    result = render(repo, tmp_path)
    assert_refused(result, tmp_path / "control", "exists and is not a folder render wrote "
                                                 "(a cluster of the fleet has that name)")
    assert tree(tmp_path) == {"control": b"mine\n"}


def test_render_refuses_a_folder_it_wrote_once_a_file_was_added(repo, tmp_path):
    assert render(repo, tmp_path).returncode == 0
    (tmp_path / "gpu-us-east" / "kustomization.yaml").write_text("resources: []\n")
    before = tree(tmp_path)
    result = render(repo, tmp_path)
    assert_refused(result, tmp_path / "gpu-us-east", "holds files modelplane render did not write: kustomization.yaml")
    assert result.stderr.rstrip().endswith("or move or remove them yourself")
    assert tree(tmp_path) == before


def test_render_refuses_a_folder_whose_marker_it_cannot_read(tmp_path):
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / ".modelplane-render").write_text('{"format": 99, "files": []}\n')
    with pytest.raises(ModelplaneError, match="has a .modelplane-render of a format this version of modelplane"):
        output.write_manifests([], tmp_path)
    assert tree(tmp_path) == {"control/.modelplane-render": b'{"format": 99, "files": []}\n'}


def test_render_refuses_a_file_added_to_meta_and_a_folder_in_it(repo, tmp_path):
    assert render(repo, tmp_path).returncode == 0
    (tmp_path / "gpu-us-east" / "meta" / "values-override.yaml").write_text("mine\n")
    (tmp_path / "gpu-eu-west" / "meta" / "old").mkdir()
    before = tree(tmp_path)
    result = render(repo, tmp_path)
    assert_refused(result, tmp_path / "gpu-eu-west", "holds files modelplane render did not write: meta/old")
    assert tree(tmp_path) == before and (tmp_path / "gpu-eu-west" / "meta" / "old").is_dir()
    (tmp_path / "gpu-eu-west" / "meta" / "old").rmdir()
    result = render(repo, tmp_path)
    assert_refused(result, tmp_path / "gpu-us-east",
                   "holds files modelplane render did not write: meta/values-override.yaml")


def test_a_marker_cannot_make_render_write_or_remove_outside_its_folder(tmp_path):
    for listed in ("../x.yaml", "meta/../x.yaml", "meta/sub/x.yaml", "other/x.yaml", "meta", "/etc/passwd"):
        (tmp_path / "control").mkdir(exist_ok=True)
        (tmp_path / "control" / ".modelplane-render").write_text(json.dumps({"format": 2, "files": [listed]}))
        with pytest.raises(ModelplaneError, match="of a format this version of modelplane does not write"):
            output.write_manifests([], tmp_path)


def test_a_folder_rendered_in_format_1_is_taken_over_and_its_notes_move_to_meta(repo, tmp_path):
    """An earlier modelplane wrote the notes beside the objects (marker format 1): still render's own folder."""
    assert render(repo, tmp_path).returncode == 0
    now = tree(tmp_path)
    for cluster in CLUSTERS:  # turn the folder back into what format 1 wrote
        folder = tmp_path / cluster
        for name in os.listdir(folder / "meta"):
            (folder / "meta" / name).rename(folder / name)
        (folder / "meta").rmdir()
        marker = json.loads((folder / ".modelplane-render").read_text())
        marker.update(format=1, files=[f.removeprefix("meta/") for f in marker["files"]])
        (folder / ".modelplane-render").write_text(json.dumps(marker))
    result = render(repo, tmp_path)
    assert result.returncode == 0, result.stderr
    assert tree(tmp_path) == now


def test_object_file_names_sort_in_apply_order_past_a_thousand_objects(tmp_path):
    """kubectl reads a folder's files by name: with 1,000 objects or more the numbers get a fourth digit."""
    from modelplane.render.types import ClusterManifests

    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "ns"}}
               for i in range(1001)]
    output.write_manifests([ClusterManifests(cluster="big", role="workload", objects=objects)], tmp_path)
    names = sorted(p.name for p in (tmp_path / "big").glob("*.yaml"))
    assert names[0] == "0000-configmap-ns-c0.yaml" and names[-1] == "1000-configmap-ns-c1000.yaml"
    assert [yaml.safe_load((tmp_path / "big" / n).read_text())["metadata"]["name"] for n in names] == \
        [o["metadata"]["name"] for o in objects]


# --- its own folders: replaced, removed ---------------------------------------------------------------

def test_render_twice_writes_the_same_output(repo, tmp_path):
    (tmp_path / "README.md").write_text("mine\n")  # beside the cluster folders: left alone
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine\n")
    first = render(repo, tmp_path)
    assert first.returncode == 0, first.stderr
    once = tree(tmp_path)
    second = render(repo, tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and tree(tmp_path) == once
    assert sorted(os.listdir(tmp_path)) == ["README.md", *CLUSTERS, "notes"]
    for cluster in CLUSTERS:
        marker = json.loads((tmp_path / cluster / ".modelplane-render").read_text())
        assert marker["format"] == 2
        notes = {"meta/remote-manifests.yaml", "meta/helm-releases.yaml", "meta/placeholders.yaml"}
        assert notes <= set(marker["files"])
        assert sorted(marker["files"]) == sorted(set(tree(tmp_path / cluster)) - {".modelplane-render"})


def test_rerender_removes_files_of_objects_no_longer_rendered(repo, tmp_path):
    assert render(repo, tmp_path).returncode == 0
    replicas = lambda cluster: sorted(n for n in os.listdir(tmp_path / cluster) if "-deployment-ml-team-" in n)
    assert replicas("gpu-eu-west") and replicas("gpu-us-east")  # one mock-demo replica on each

    def one_replica(config):
        config["modelplane:modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 1

    stacks = tmp_path / "stacks"  # not named like a cluster: render leaves it alone
    stacks.mkdir()
    result = render(repo, tmp_path, config=demo_stack(repo, stacks, one_replica))
    assert result.returncode == 0, result.stderr
    assert bool(replicas("gpu-eu-west")) != bool(replicas("gpu-us-east"))  # the replica left one cluster: its files too
    for cluster in CLUSTERS:
        marker = json.loads((tmp_path / cluster / ".modelplane-render").read_text())
        assert sorted(marker["files"]) == sorted(set(tree(tmp_path / cluster)) - {".modelplane-render"})


def test_render_removes_the_folder_of_a_cluster_that_left_the_fleet(repo, tmp_path):
    out = tmp_path / "out"
    assert render(repo, out).returncode == 0
    (out / "mine").mkdir()  # not render's: never touched
    (out / "mine" / "a.yaml").write_text("mine\n")

    def without_us_east(config):
        del config["modelplane:inferenceClusters"]["gpu-us-east"]

    result = render(repo, out, config=demo_stack(repo, tmp_path, without_us_east))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"{out / 'gpu-us-east'}: removed (its cluster is no longer in the fleet)"
    assert sorted(os.listdir(out)) == ["control", "gpu-eu-west", "mine"]
    assert (out / "mine" / "a.yaml").read_text() == "mine\n"


def test_render_refuses_to_remove_a_folder_of_a_former_cluster_holding_a_user_file(repo, tmp_path):
    out = tmp_path / "out"
    assert render(repo, out).returncode == 0
    (out / "gpu-us-east" / "notes.md").write_text("mine\n")
    before = tree(out)

    def without_us_east(config):
        del config["modelplane:inferenceClusters"]["gpu-us-east"]

    result = render(repo, out, config=demo_stack(repo, tmp_path, without_us_east))
    assert_refused(result, out / "gpu-us-east", "holds files modelplane render did not write: notes.md")
    assert tree(out) == before
