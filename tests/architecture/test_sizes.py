"""Sizes a reader can hold (docs/project.md): no function over 60 lines, no module over 400, no CLI module of 100
or more (a command parses its flags and calls a library function). Every package module is measured; a
negative control shows that an oversized function is caught."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "measure", "engines", "jobs", "paper_figs", "spectheory_cli")
MAX_FUNCTION, MAX_MODULE, MAX_CLI_MODULE = 60, 400, 99


def oversized(path: Path, relative: Path) -> list:
    """``relative``'s module and functions over their limits, as "name: lines" strings."""
    text = path.read_text()
    lines = text.count("\n")
    limit = MAX_CLI_MODULE if relative.parts[0] == "spectheory_cli" else MAX_MODULE
    found = [f"{relative}: {lines} lines"] if lines > limit else []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION:
                found.append(f"{relative}:{node.lineno} {node.name}: {length} lines")
    return found


def test_module_and_function_sizes_against_their_limits():
    found = [entry for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for entry in oversized(path, path.relative_to(ROOT))]
    assert found == []


def test_size_check_catches_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION))
    path = tmp_path / "long.py"
    path.write_text(f"def long():\n{body}\n")
    assert oversized(path, Path("decoders/long.py")) == [f"decoders/long.py:1 long: {MAX_FUNCTION + 1} lines"]


def test_every_package_is_measured():
    """A new top-level package cannot escape the limits (the CLI escaped them once, when it moved)."""
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages and packages <= set(PACKAGES), packages - set(PACKAGES)
