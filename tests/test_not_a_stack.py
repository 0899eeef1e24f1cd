"""A file that holds no modelplane configuration is an error, never "valid" (an empty fleet).

An empty file, comments only, `config: {}`, another project's stack file or a document that is not
a mapping: `validate`, `plan` and the runbook commands exit 2 and say what is missing.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

MESSAGE = "has no modelplane configuration"
SEE = "; see docs/config.md"


def modelplane(repo, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=cwd or repo,
                          capture_output=True, text=True, timeout=60)


NOT_A_STACK = [
    ("empty_file", "", "the file is empty"),
    ("blank_lines", "\n  \n", "the file is empty"),
    ("comments_only", "# a stack file, one day\n\n# modelplane:inferenceClusters: {}\n", "the file holds only comments"),
    ("empty_document", "---\n", "the YAML document is empty"),
    ("config_empty_mapping", "config: {}\n", "no 'modelplane:' keys under 'config:'"),
    ("config_null", "config:\n", "no 'modelplane:' keys under 'config:'"),
    ("only_aws_region", "config:\n  aws:region: us-east-1\n", "no 'modelplane:' keys under 'config:', only aws:region"),
    ("another_projects_stack_file",
     "encryptionsalt: v1:abc\nconfig:\n  aws:region: us-east-1\n  web:replicas: 3\n  web:image: nginx\n  web:port: 80\n",
     "no 'modelplane:' keys under 'config:', only aws:region, web:replicas, web:image and 1 more"),
    ("no_config_section", "name: web\nruntime: nodejs\n",
     "no 'modelplane:' keys under 'config:': the file has no 'config:' section"),
    ("keys_at_the_top_level", "modelplane:inferenceClusters: {}\n",
     "no 'modelplane:' keys under 'config:'; 'modelplane:inferenceClusters' is at the top level: "
     "indent it under 'config:'"),
    ("a_list", "- config: {}\n", "the file is a list, not a mapping with a 'config:' section"),
    ("a_string", "hello\n", "the file is text, not a mapping with a 'config:' section"),
    ("a_number", "42\n", "the file is a number, not a mapping with a 'config:' section"),
]


@pytest.mark.parametrize("content, why", [case[1:] for case in NOT_A_STACK], ids=[case[0] for case in NOT_A_STACK])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_file_without_modelplane_config_is_refused(repo, tmp_path, command, content, why):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(content)
    result = modelplane(repo, command, "--config", str(path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {path} {MESSAGE} ({why}){SEE}\n"


def test_by_stack_name_too(repo, tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((repo / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-east-1\n")
    result = modelplane(repo, "validate", "--stack", "x", cwd=tmp_path)
    assert result.returncode == 2 and MESSAGE in result.stderr and "Pulumi.x.yaml" in result.stderr


@pytest.mark.parametrize("args", [["scale", "ml-team/mock-demo", "--replicas", "1"], ["drain", "gpu-eu-west"],
                                  ["undrain", "gpu-eu-west"]])
def test_runbook_commands_refuse_it_and_write_nothing(repo, tmp_path, args):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config: {}\n")
    result = modelplane(repo, *args, "--config", str(path))
    assert (result.returncode, result.stdout) == (2, "") and MESSAGE in result.stderr
    assert path.read_text() == "config: {}\n"


def test_a_single_modelplane_key_is_a_stack(repo, tmp_path):
    """Any `modelplane:` key makes it a modelplane stack file: validated as usual, however small."""
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n  modelplane:modelDeployments: {}\n")
    result = modelplane(repo, "validate", "--config", str(path))
    assert result.returncode == 0 and result.stdout.startswith("valid: ")
    path.write_text("config:\n  modelplane:inferenceClusterz: {}\n")
    result = modelplane(repo, "validate", "--config", str(path))
    assert result.returncode == 2 and "unknown config key; did you mean 'inferenceClusters'?" in result.stderr


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_the_demo_stack_still_validates(repo, command):
    result = modelplane(repo, command, "--stack", "demo")
    assert (result.returncode, result.stderr) == (0, "")
    assert MESSAGE not in result.stdout
