"""The docs' examples of the command line habits, checked against what the command really prints."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from doc_examples import ENV, REPO, doc_block, modelplane


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's Pulumi.yaml and demo stack: edits never touch the checkout."""
    (tmp_path / "stacks").mkdir()
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    shutil.copy(REPO / "stacks" / "Pulumi.demo.yaml", tmp_path / "stacks")
    return tmp_path


def test_runbook_dry_run_example_is_the_real_output(project: Path) -> None:
    line, shown = doc_block("docs/runbook.md", "venv/bin/modelplane scale ml-team/mock-demo --replicas 0")
    before = (project / "stacks" / "Pulumi.demo.yaml").read_bytes()
    result = modelplane(*line.split()[1:], cwd=project)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", shown)
    assert (project / "stacks" / "Pulumi.demo.yaml").read_bytes() == before


def test_placement_exit_code_table_is_what_plan_detailed_exitcode_does(project: Path) -> None:
    text = (REPO / "docs" / "placement.md").read_text()
    table = dict(re.findall(r"^\| (\d) \| (.+) \|$", text, re.M))
    assert set(table) == {"0", "2", "3"}
    stack = project / "stacks" / "Pulumi.demo.yaml"
    original = stack.read_text()
    cases = {"0": original, "3": original.replace("        replicas: 2", "        replicas: 3"),
             "2": original.replace("        replicas: 2", "        replicas: 12")}
    for code, content in cases.items():
        stack.write_text(content)
        assert modelplane("plan", "-s", "demo", "--detailed-exitcode", cwd=project).returncode == int(code), table[code]


def test_config_which_stack_example_is_the_real_error(project: Path, tmp_path: Path) -> None:
    line, shown = doc_block("docs/config.md", "venv/bin/modelplane plan\n")
    result = modelplane("plan", cwd=project, env={"HOME": "/home/me", "PULUMI_HOME": "", "PWD": str(project)})
    assert (result.returncode, result.stdout) == (2, "")
    real = re.sub(r"modelplane-[0-9a-f]{40}-workspace", "modelplane-<sha1>-workspace", result.stderr)
    assert real == shown


def test_config_esc_example_is_the_real_warning(project: Path) -> None:
    _, shown = doc_block("docs/config.md", "warning: stacks/Pulumi.prod.yaml imports")  # no $: the line itself
    prod = project / "stacks" / "Pulumi.prod.yaml"
    prod.write_text("environment: [my-org/prod]\n" + (project / "stacks" / "Pulumi.demo.yaml").read_text())
    result = modelplane("validate", "-s", "prod", cwd=project)
    assert (result.returncode, result.stderr) == (0, shown)


def test_mock_engine_docs_start_line_is_the_real_one() -> None:
    line, shown = doc_block("docs/mock-engine.md", "HOSTNAME=laptop venv/bin/modelplane mock-engine")
    assert line == "HOSTNAME=laptop venv/bin/modelplane mock-engine --host 127.0.0.1 --port 8000"
    readme_line, readme_shown = doc_block("README.md", "HOSTNAME=laptop venv/bin/modelplane mock-engine --port 8000")
    process = subprocess.Popen([sys.executable, "-P", "-m", "modelplane", "mock-engine", "--host", "127.0.0.1",
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**ENV, "HOSTNAME": "laptop", "MODEL_NAME": "mock"}, cwd=REPO)
    try:
        first = process.stdout.readline()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    port = first.rsplit(":", 1)[1].split()[0]
    assert first.replace(f":{port} ", ":8000 ") == shown
    assert readme_line == "HOSTNAME=laptop venv/bin/modelplane mock-engine --port 8000"
    assert readme_shown.splitlines()[0] == shown.strip().replace("127.0.0.1", "0.0.0.0")


def test_readme_names_every_exit_code_the_cli_module_defines() -> None:
    from modelplane import cli

    readme = " ".join((REPO / "README.md").read_text().split())
    for code in (cli.EXIT_OK, cli.EXIT_INVALID, cli.EXIT_SHORT, cli.EXIT_INTERRUPTED, cli.EXIT_BROKEN_PIPE):
        assert f" {code} " in readme
    assert "source <(venv/bin/modelplane completion bash)" in readme
    assert "venv/bin/pip install -r requirements-cli.txt && venv/bin/pip install --no-deps ." in readme


KUBECTL_EXTENSIONS = (".json", ".yaml", ".yml")  # what `kubectl apply -f <folder>` reads (k8s.io/cli-runtime)


def kubectl_reads(folder: Path) -> list[Path]:
    """The files `kubectl apply -f <folder>` (without -R) applies, in its order: the folder's own files with
    kubectl's extensions, by name (filepath.Walk's lexical order); subfolders are skipped."""
    return sorted((p for p in folder.iterdir() if p.is_file() and p.suffix in KUBECTL_EXTENSIONS),
                  key=lambda p: p.name.encode())


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_kubectl_apply_on_a_rendered_cluster_folder_reads_exactly_its_objects_in_apply_order(tmp_path: Path,
                                                                                              stack: str) -> None:
    """docs/rendering.md: `kubectl apply -f manifests/gpu-eu-west/` applies every object render wrote, in the
    program's apply order, and nothing else (the notes in meta/ are lists, not objects)."""
    import yaml

    from modelplane.api import load_fleet
    from modelplane.api.stackfile import read_stack_file
    from modelplane.render import render_fleet
    from modelplane.scheduling import schedule

    text = " ".join((REPO / "docs" / "rendering.md").read_text().split())
    assert "kubectl apply -f manifests/gpu-eu-west/ ```" in text and "Leave out `-R`" in text
    assert modelplane("render", "-s", stack, "--out", str(tmp_path), cwd=REPO).returncode == 0
    fleet = load_fleet(read_stack_file(REPO / "stacks" / f"Pulumi.{stack}.yaml").config)
    expected = {m.cluster: m.objects for m in render_fleet(fleet, schedule(fleet))}
    assert sorted(os.listdir(tmp_path)) == sorted(expected)
    for cluster, objects in expected.items():
        applied = [document for path in kubectl_reads(tmp_path / cluster)
                   for document in yaml.safe_load_all(path.read_text())]
        assert applied == objects, cluster
        notes = sorted(os.listdir(tmp_path / cluster / "meta"))
        assert notes == ["helm-releases.yaml", "placeholders.yaml", "remote-manifests.yaml"]
        for note in notes:
            assert isinstance(yaml.safe_load((tmp_path / cluster / "meta" / note).read_text()), list)  # not objects


@pytest.mark.parametrize("stack, out", [("demo", "rendered"), ("cloud", "rendered-cloud")])
def test_rendering_docs_show_the_real_render_output(tmp_path: Path, stack: str, out: str) -> None:
    line, shown = doc_block("docs/rendering.md", f"modelplane render --stack {stack} --out {out}")
    assert line == f"modelplane render --stack {stack} --out {out}"
    result = modelplane("render", "--config", str(REPO / "stacks" / f"Pulumi.{stack}.yaml"), "--out", out,
                        cwd=tmp_path)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", shown.rstrip("\n") + "\n")
