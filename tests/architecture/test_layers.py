"""The one-way layering of the project (README, "Layout"): theory <- sims, decoders <- paper_figs <- cli.

The first tests import in a fresh interpreter and look at ``sys.modules``; the last parses every import
statement in the tree (also those inside functions), so a lazy import cannot hide a wrong direction.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THEORY = sorted(p.stem for p in (ROOT / "spectheory").glob("*.py") if p.stem not in ("__init__", "__main__"))
HEAVY = ("torch", "matplotlib", "tqdm", "sims", "decoders", "paper_figs", "spectheory.cli")
THEORY_MAY_IMPORT = {"numpy", "scipy", "sympy", "spectheory"}  # and the standard library
LAYER = {"theory": 0, "sims": 1, "decoders": 1, "paper_figs": 2, "cli": 3}


def _loaded_after(code: str) -> list:
    """The heavy modules present in a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if any(m == h or " \
            f"m.startswith(h + '.') for h in {HEAVY!r}))))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def test_theory_modules_import_without_torch_or_the_other_layers():
    assert THEORY, "no theory modules found"
    assert _loaded_after("\n".join(f"import spectheory.{name}" for name in THEORY)) == []


def test_gamma_command_imports_only_the_theory():
    code = "import contextlib, io\nfrom spectheory.cli import main\n" \
           "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['gamma', '--alpha', '0.8']) == 0"
    loaded = _loaded_after(code)
    assert "spectheory.cli.gamma" in loaded and all(m.startswith("spectheory.cli") for m in loaded), loaded


def _layer(module: str, path: Path | None = None) -> str | None:
    """The layer of a dotted module name (or of the file ``path``); None outside the project."""
    parts = module.split(".")
    if parts[0] == "spectheory":
        return "cli" if parts[1:2] == ["cli"] else "theory"
    return parts[0] if parts[0] in LAYER else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _violations() -> list[str]:
    problems = []
    for package in ("spectheory", "sims", "decoders", "paper_figs"):
        for path in sorted((ROOT / package).rglob("*.py")):
            own = _module_of(path)
            layer = _layer(own)
            for line, imported in _imports(path):
                target = _layer(imported)
                where = f"{path.relative_to(ROOT)}:{line} imports {imported}"
                if layer == "theory" and imported.split(".")[0] not in THEORY_MAY_IMPORT | set(sys.stdlib_module_names):
                    problems.append(f"{where}: theory imports only numpy, scipy, sympy and the standard library")
                if target is None or target == layer:
                    continue
                if target == "cli" and own != "spectheory.__main__":
                    problems.append(f"{where}: only the entry point imports spectheory.cli")
                elif target != "cli" and LAYER[target] >= LAYER[layer]:
                    problems.append(f"{where}: {layer} may not import {target}")
    return problems


def test_imports_go_one_way_against_the_layer_order():
    assert _violations() == []


@pytest.mark.parametrize("line, fragment", [
    ("import torch", "theory imports only"), ("from decoders import sampling", "theory may not import decoders"),
])
def test_layer_check_catches_a_wrong_import(tmp_path, monkeypatch, line, fragment):
    """Negative control: the same check on a copy of ``spectheory/speedup.py`` with one bad import added."""
    copy = tmp_path / "spectheory"
    copy.mkdir()
    (copy / "speedup.py").write_text(line + "\n" + (ROOT / "spectheory" / "speedup.py").read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert any(fragment in problem for problem in _violations())
