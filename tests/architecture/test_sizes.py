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


#: CLI modules any command may use: argument definitions shared between commands.
FLAG_MODULES = {"options", "audit_flags", "bench_flags", "engine_flags", "mutant_flags", "task_flags"}


def command_spans(root: Path) -> dict:
    """command -> the CLI modules besides the flags that its module reaches through imports (lazy ones too)."""
    from spectheory_cli.commands import COMMANDS

    def reached(name: str) -> set:
        tree = ast.parse((root / "spectheory_cli" / f"{name}.py").read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spectheory_cli."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "spectheory_cli":
                found |= {alias.name for alias in node.names if (root / "spectheory_cli" / f"{alias.name}.py").exists()}
        return found - FLAG_MODULES - {name}

    spans = {}
    for command in COMMANDS:
        seen, todo = set(), [command.replace("-", "_")]
        while todo:
            for module in reached(todo.pop()) - seen:
                seen.add(module)
                todo.append(module)
        spans[command] = seen
    return spans


def test_each_command_is_one_module_besides_the_shared_flags():
    spans = command_spans(ROOT)
    assert {command: modules for command, modules in spans.items() if modules} == {}


def test_command_span_check_catches_a_helper_module(tmp_path):
    """Negative control: a copy of the CLI whose gamma command imports a helper module again."""
    import shutil

    shutil.copytree(ROOT / "spectheory_cli", tmp_path / "spectheory_cli")
    (tmp_path / "spectheory_cli" / "calibrated.py").write_text("")
    gamma = tmp_path / "spectheory_cli" / "gamma.py"
    gamma.write_text("from spectheory_cli import calibrated\n" + gamma.read_text())
    assert command_spans(tmp_path)["gamma"] == {"calibrated"}
