"""Each command is one module of cli (docs/project.md, "Layout"): it parses its flags, calls one library
function and prints; apart from the shared flag modules it reaches no other CLI module. A negative control shows
that a helper module is caught."""

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: CLI modules any command may use: argument definitions shared between commands.
FLAG_MODULES = {"options", "audit_flags", "bench_flags", "task_flags"}


def command_spans(root: Path) -> dict:
    """command -> the CLI modules besides the flags that its module reaches through imports (lazy ones too)."""
    from cli.commands import COMMANDS

    cli = root / "cli"

    def reached(name: str) -> set:
        found = set()
        for node in ast.walk(ast.parse((cli / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cli."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "cli":
                found |= {alias.name for alias in node.names if (cli / f"{alias.name}.py").exists()}
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
    """Negative control: a copy of the CLI whose gamma command imports a helper module."""
    shutil.copytree(ROOT / "cli", tmp_path / "cli")
    (tmp_path / "cli" / "calibrated.py").write_text("")
    gamma = tmp_path / "cli" / "gamma.py"
    gamma.write_text("from cli import calibrated\n" + gamma.read_text())
    assert command_spans(tmp_path)["gamma"] == {"calibrated"}
