"""What a Python source file imports, read from its syntax tree (tests/test_layers.py keeps the walls with it)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "modelplane"


def module_name(path: Path) -> str:
    """The dotted name of a file of the checkout (`modelplane.api.models`); a file elsewhere: its stem."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts if path.is_relative_to(PACKAGE.parent) else (path.stem,)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file (inside functions and `if TYPE_CHECKING:` too).

    `from package import name` also yields `package.name`: a module, when `name` is one."""
    tree = ast.parse(path.read_text())
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the file's package
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found
