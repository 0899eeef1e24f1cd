"""The walls between layers: the pure core never imports Pulumi, and the CLI never imports infra."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "modelplane"
PURE = ["api", "devices", "scheduling", "render"]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the file's package
                parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-node.level]
                module = ".".join(parts + ((module,) if module else ()))
            found.add(module)
    return found


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py")) if (PACKAGE / layer).exists() else []


@pytest.mark.parametrize("layer", PURE)
def test_pure_layers_import_nothing_above_them(layer):
    for path in modules(layer):
        for name in imports_of(path):
            assert not name.startswith(("pulumi", "modelplane.infra", "modelplane.cli")), f"{path} imports {name}"


def test_api_is_the_bottom_layer():
    for path in modules("api"):
        for name in imports_of(path):
            assert not name.startswith(tuple(f"modelplane.{layer}" for layer in PURE if layer != "api")), f"{path}: {name}"


def test_cli_never_imports_infra():
    for name in imports_of(PACKAGE / "cli.py"):
        assert not name.startswith(("modelplane.infra", "pulumi")), name


def test_cli_starts_without_pulumi_or_cloud_sdks():
    code = ("import sys, modelplane.cli; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'pulumi', 'pulumi_aws', 'pulumi_gcp', 'pulumi_azure_native', 'pulumi_kubernetes'}); print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
