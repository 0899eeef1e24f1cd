"""Packaging: `pip install .` is the light core with ranges, extras bring the clouds, requirements.txt is the lock."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import modelplane

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)$")


def ranges(declared: list[str]) -> dict[str, Requirement]:
    return {Requirement(d).name.lower(): Requirement(d) for d in declared}


def lower_bounds(declared: list[str]) -> dict[str, str]:
    """Each range's `>=` version: the tested one, the same as the lock's pin."""
    return {name: next(s.version for s in req.specifier if s.operator == ">=") for name, req in ranges(declared).items()}


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


def test_pyproject_has_ranges_and_the_requirements_files_are_the_lock(repo, project):
    """A range from the tested version to the next major one, so that `pip install .` fits an existing Pulumi venv."""
    extras = project["optional-dependencies"]
    declared = project["dependencies"] + [d for name, deps in extras.items() if name != "all" for d in deps]
    for name, req in ranges(declared).items():
        operators = sorted(s.operator for s in req.specifier)
        assert operators == ["<", ">="], req
        low = Version(lower_bounds([str(req)])[name])
        high = Version(next(s.version for s in req.specifier if s.operator == "<"))
        assert high == Version(f"{low.major + 1}") or (low.major == 0 and high == Version(f"0.{low.minor + 1}")), req
    for file in ("requirements.txt", "requirements-test.txt", "requirements-cli.txt"):
        for line in requirement_lines(repo / file):
            assert PIN.match(line) or line in ("-e .", "-r requirements.txt"), f"{file}: unpinned requirement: {line}"


def test_requirements_txt_is_the_core_plus_every_cloud_at_the_lower_bounds(repo, project):
    extras = project["optional-dependencies"]
    clouds = [d for name in ("aws", "gcp", "azure") for d in extras[name]]
    assert extras["all"] == ["modelplane[aws,gcp,azure]"]
    lock = pins(requirement_lines(repo / "requirements.txt"))
    assert lock == lower_bounds(project["dependencies"] + clouds)
    for name, req in ranges(project["dependencies"] + clouds).items():
        assert req.specifier.contains(lock[name]), (req, lock[name])
    assert "-e ." in requirement_lines(repo / "requirements.txt")  # Pulumi's venv gets the project too


def test_the_core_does_not_install_cel_python_for_its_grammar(repo, project):
    """cel-python (and jmespath, pendulum, python-dateutil, tzdata with it) only brought cel.lark: vendored."""
    assert "cel-python" not in ranges(project["dependencies"]) and "cel-python" not in pins(
        requirement_lines(repo / "requirements.txt"))
    grammar = repo / "modelplane" / "cel" / "cel.lark"
    assert grammar.read_text().startswith("// SPDX-Copyright: Copyright (c) Capital One Services, LLC\n"
                                          "// SPDX-License-Identifier: Apache-2.0\n")
    assert "Apache License\n                           Version 2.0, January 2004" in (
        repo / "modelplane" / "cel" / "cel.lark.LICENSE").read_text()
    assert tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"] == {
        "modelplane.cel": ["cel.lark", "cel.lark.LICENSE"]}
    blocked = ("import importlib.abc, sys\n"
               "class NoCel(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] == 'celpy': raise ModuleNotFoundError(name, name=name)\n"
               "sys.meta_path.insert(0, NoCel())\n"
               "from modelplane.cli import main\n"
               "assert main(['validate', '--stack', 'demo']) == 0\n"
               "assert 'celpy' not in sys.modules and 'cel_python' not in str(sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", blocked], cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_requirements_cli_txt_is_all_the_command_needs(repo):
    """Every third-party distribution the command imports is in requirements-cli.txt (pinned as in the lock)."""
    cli = pins(requirement_lines(repo / "requirements-cli.txt"))
    assert {name: version for name, version in pins(requirement_lines(repo / "requirements.txt")).items()
            if name in cli} == cli
    code = ("import importlib.metadata as md, json, sys\n"
            "before = set(sys.modules)  # what the interpreter loaded itself (site's .pth hooks)\n"
            "from modelplane.cli import main\n"
            "import modelplane.status.command, modelplane.mock_engine, modelplane.completion, modelplane.render\n"
            "for args in (['validate', '-s', 'cloud'], ['plan', '-s', 'demo'], ['sources', '-s', 'demo', '-o', 'yaml'],"
            " ['explain', 'ml-team/mock-demo', '-s', 'demo'], ['scale', 'ml-team/mock-demo', '--replicas', '0', '-s', "
            "'demo', '--dry-run']):\n"
            "    assert main(args) == 0, args\n"
            "dists = md.packages_distributions()\n"
            "used = sorted({d for m in set(sys.modules) - before for d in dists.get(m.split('.')[0], [])})\n"
            "print(json.dumps(used), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    used = {name.lower().replace("_", "-") for name in __import__("json").loads(done.stderr.splitlines()[-1])}
    needed = used - {"modelplane"}
    # the direct requirements and what pip brings with them
    brought = {"pydantic-core", "annotated-types", "typing-extensions", "typing-inspection", "ruamel.yaml.clib"}
    assert needed <= {name.replace("_", "-") for name in cli} | brought, needed
    assert not {name for name in needed if name.startswith("pulumi")}


def test_the_e2e_environment_is_the_core_with_the_provider_it_can_build(repo, project):
    """tests/e2e/requirements.txt: the core pins, except the Kubernetes SDK, which matches the only
    provider version the Go module proxy serves (scripts/e2e-tools.sh builds it)."""
    e2e = pins(requirement_lines(repo / "tests" / "e2e" / "requirements.txt"))
    core = lower_bounds(project["dependencies"])
    assert {k: v for k, v in e2e.items() if k != "pulumi-kubernetes"} == {k: v for k, v in core.items()
                                                                             if k != "pulumi-kubernetes"}
    tools = (repo / "scripts" / "e2e-tools.sh").read_text()
    assert f"KUBERNETES_PROVIDER_VERSION={e2e['pulumi-kubernetes']}" in tools


def test_the_core_has_no_cloud_sdk_and_tests_add_only_test_tools(repo, project):
    core = ranges(project["dependencies"])
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
    assert re.search(r"from the modelplane checkout, venv/bin/pip install '\.\[(aws|gcp|azure)\]'", done.stderr), \
        done.stderr[-2000:]
