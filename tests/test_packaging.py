"""Packaging: `pip install .` is the light core, extras bring the clouds, requirements.txt is the full pinned set."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest

import modelplane

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)$")


def pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        match = PIN.match(line.split("#")[0].strip())
        if match:
            out[match.group(1).lower()] = match.group(2)
    return out


def requirement_lines(path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


@pytest.fixture
def project(repo) -> dict:
    return tomllib.loads((repo / "pyproject.toml").read_text())["project"]


def test_every_dependency_is_pinned_exactly(repo, project):
    extras = project["optional-dependencies"]
    declared = project["dependencies"] + [d for name, deps in extras.items() if name != "all" for d in deps]
    assert all(PIN.match(d) for d in declared), declared
    for line in requirement_lines(repo / "requirements.txt") + requirement_lines(repo / "requirements-test.txt"):
        assert PIN.match(line) or line in ("-e .", "-r requirements.txt"), f"unpinned requirement: {line}"


def test_requirements_txt_is_the_core_plus_every_cloud_with_the_same_pins(repo, project):
    extras = project["optional-dependencies"]
    clouds = [d for name in ("aws", "gcp", "azure") for d in extras[name]]
    assert extras["all"] == ["modelplane[aws,gcp,azure]"]
    assert pins(requirement_lines(repo / "requirements.txt")) == pins(project["dependencies"] + clouds)
    assert "-e ." in requirement_lines(repo / "requirements.txt")  # Pulumi's venv gets the project too


def test_the_e2e_environment_is_the_core_with_the_provider_it_can_build(repo, project):
    """tests/e2e/requirements.txt: the core pins, except the Kubernetes SDK, which matches the only
    provider version the Go module proxy serves (scripts/e2e-tools.sh builds it)."""
    e2e = pins(requirement_lines(repo / "tests" / "e2e" / "requirements.txt"))
    core = pins(project["dependencies"])
    assert {k: v for k, v in e2e.items() if k != "pulumi-kubernetes"} == {k: v for k, v in core.items()
                                                                             if k != "pulumi-kubernetes"}
    tools = (repo / "scripts" / "e2e-tools.sh").read_text()
    assert f"KUBERNETES_PROVIDER_VERSION={e2e['pulumi-kubernetes']}" in tools


def test_the_core_has_no_cloud_sdk_and_tests_add_only_test_tools(repo, project):
    core = pins(project["dependencies"])
    assert not [name for name in core if name.startswith(("pulumi-aws", "pulumi-eks", "pulumi-gcp", "pulumi-azure"))]
    test_only = pins(requirement_lines(repo / "requirements-test.txt"))
    assert "-r requirements.txt" in requirement_lines(repo / "requirements-test.txt")
    assert {"pytest", "hypothesis"} <= set(test_only)
    assert not set(test_only) & set(pins(requirement_lines(repo / "requirements.txt")))


def test_version_flag_prints_the_package_version(repo):
    done = subprocess.run([sys.executable, "-m", "modelplane", "--version"], cwd=repo, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"modelplane {modelplane.__version__}"


# Makes `import pulumi_aws` (and the other cloud SDKs) fail, as in a `pip install .` without extras.
NO_CLOUD_SDKS = """
import importlib.abc, sys
class NoCloud(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pulumi_aws', 'pulumi_eks', 'pulumi_gcp', 'pulumi_azure_native'):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
sys.meta_path.insert(0, NoCloud())
"""


def run_without_cloud_sdks(repo, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_CLOUD_SDKS + code], cwd=repo, capture_output=True, text=True,
                          timeout=300)


def test_the_cli_works_for_every_stack_without_cloud_sdks(repo):
    done = run_without_cloud_sdks(repo, "from modelplane.cli import main\n"
                                        "for stack in ('demo', 'cloud'):\n"
                                        "    assert main(['plan', '--stack', stack]) == 0\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Scheduled" in done.stdout


def run_program_without_cloud_sdks(repo, stack: str) -> subprocess.CompletedProcess:
    script = repo / "tests" / "plain_mocks_main.py"
    return run_without_cloud_sdks(repo, f"import runpy, sys; sys.argv = [{str(script)!r}, {str(repo)!r}, {stack!r}]\n"
                                        f"runpy.run_path({str(script)!r}, run_name='__main__')\n")


def test_the_demo_program_runs_without_cloud_sdks(repo):
    done = run_program_without_cloud_sdks(repo, "demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"ml-team/mock-demo-be445"' in done.stdout


def test_a_cloud_stack_without_its_sdk_names_the_extra_to_install(repo):
    done = run_program_without_cloud_sdks(repo, "cloud")
    assert done.returncode != 0
    assert re.search(r"pip install 'modelplane\[(aws|gcp|azure)\]'", done.stderr), done.stderr[-2000:]
