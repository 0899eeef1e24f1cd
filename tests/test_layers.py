"""The walls between layers: the pure core never imports Pulumi, the CLI never imports infra, `cel` imports
nothing else of modelplane, `api` only `cel`, and no modules import each other in a cycle (not even in a function).
And in tests/: no test module imports another test module or conftest (helpers live in modules of their own)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from source_imports import PACKAGE, imports_of, module_name

PURE = ["cel", "api", "devices", "scheduling", "render"]


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py")) if (PACKAGE / layer).exists() else []


@pytest.mark.parametrize("layer", PURE)
def test_pure_layers_import_nothing_above_them(layer):
    for path in modules(layer):
        for name in imports_of(path):
            assert not name.startswith(("pulumi", "modelplane.infra", "modelplane.cli")), f"{path} imports {name}"


def test_cel_imports_nothing_else_from_modelplane():
    assert modules("cel")
    for path in modules("cel"):
        for name in imports_of(path):
            assert name.split(".")[0] != "modelplane" or name.startswith("modelplane.cel"), f"{path}: {name}"


def test_api_is_the_bottom_layer_above_cel():
    for path in modules("api"):
        for name in imports_of(path):
            assert name.split(".")[0] != "modelplane" or name.startswith(("modelplane.api", "modelplane.cel")), \
                f"{path}: {name}"


def test_cli_never_imports_infra():
    for name in imports_of(PACKAGE / "cli.py"):
        assert not name.startswith(("modelplane.infra", "pulumi")), name


def test_cli_starts_without_pulumi_or_cloud_sdks():
    code = ("import sys, modelplane.cli; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'pulumi', 'pulumi_aws', 'pulumi_gcp', 'pulumi_azure_native', 'pulumi_kubernetes'}); print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def import_graph() -> dict[str, set[str]]:
    """modelplane module -> the modelplane modules it imports, wherever in the file.

    A package is its `__init__`. Importing `a.b.c` runs `a` and `a.b` first, so those count too,
    except a module's own ancestors: they are already being imported when it is (`from . import x`)."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        edges = set()
        for imported in imports_of(path):
            parts = imported.split(".")
            edges |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)} & paths.keys()
        graph[name] = {edge for edge in edges if edge != name and not name.startswith(edge + ".")}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, edges = work[-1]
            for edge in edges:
                if edge not in index:
                    index[edge] = low[edge] = len(index)
                    stack.append(edge)
                    on_stack.add(edge)
                    work.append((edge, iter(sorted(graph[edge]))))
                    break
                if edge in on_stack:
                    low[node] = min(low[node], index[edge])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_import_cycles_are_found():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it: not even inside a function."""
    graph = import_graph()
    assert {"modelplane.cel.selectors", "modelplane.devices.device"} <= graph["modelplane.devices.evaluation"]
    cycles = import_cycles(graph)
    shown = ["; ".join(f"{module} -> {', '.join(sorted(graph[module] & set(cycle)))}" for module in cycle)
             for cycle in cycles]
    assert not cycles, "\n".join(shown)


# Rooms that hold one thing (issue 28). cel/ is a port of cel-go's own structure.
SIZE_EXEMPT = ("cel/",)
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60


def sized_modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not p.relative_to(PACKAGE).as_posix().startswith(SIZE_EXEMPT)]


def test_no_module_is_longer_than_450_lines():
    long = {p.relative_to(PACKAGE).as_posix(): n for p in sized_modules() if (n := len(p.read_text().splitlines())) > 450}
    assert not long, f"split these modules by what they hold: {long}"


def test_a_function_over_60_lines_says_why_in_its_docstring():
    unexplained = []
    for path in sized_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and "Long: " not in (ast.get_docstring(node) or ""):
                    unexplained.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    assert not unexplained, "split these, or say why not in the docstring ('Long: ...'): " + ", ".join(unexplained)


TESTS = PACKAGE.parent / "tests"


def imported_test_modules(path: Path) -> set[str]:
    """The test modules (`test_*`) and conftest that `path` imports: by an import statement anywhere in the file,
    or by name (`__import__("test_x")`, `importlib.import_module("test_x")`)."""
    names = imports_of(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and ast.unparse(node.func) in ("__import__", "importlib.import_module"):
            names.add(node.args[0].value)
    return {name for name in names if name.split(".")[0].startswith("test_") or name.split(".")[0] == "conftest"}


def test_the_import_check_sees_test_modules_however_imported(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("import builders\nfrom conftest import MOCKS\ndef f():\n    from test_scheduler import plan\n"
                      "x = __import__('test_scheduler').CLASSES\n")
    assert imported_test_modules(sample) == {"conftest", "conftest.MOCKS", "test_scheduler", "test_scheduler.plan"}


def test_no_test_module_imports_another_test_module_or_conftest():
    found = {f"{path.relative_to(TESTS)}: {', '.join(sorted(names))}"
             for path in sorted(TESTS.rglob("*.py")) if (names := imported_test_modules(path))}
    assert not found, "move what they share into a helper module (tests/builders.py, ...): " + "; ".join(sorted(found))
