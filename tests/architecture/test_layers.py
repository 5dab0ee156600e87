"""The one-way layering of the project (docs/project.md, "Layout") over its six import roots (plumbing, spectheory,
sims, decoders, paper_figs, cli) and the rooms of a floor of their own: plumbing <- theory <- sims, decoders <-
decoders.bench, decoders.engines <- decoders.jobs <- paper_figs <- cli; rooms of one floor never import each other,
and no module imports itself back through others (no cycles).

The first tests import in a fresh interpreter and look at ``sys.modules``; the last parses every import
statement in the tree (also those inside functions), so a lazy import cannot hide a wrong direction.
"""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THEORY = sorted(p.stem for p in (ROOT / "spectheory").glob("*.py") if p.stem != "__init__")
HEAVY = ("torch", "matplotlib", "tqdm", "sims", "decoders", "paper_figs", "cli")
THEORY_MAY_IMPORT = {"numpy", "scipy", "sympy", "spectheory", "plumbing"}  # and the standard library
PLUMBING_MAY_IMPORT = {"numpy", "plumbing"}  # and the standard library
LAYER = {
    "plumbing": 0,
    "theory": 1,
    "sims": 2,
    "decoders": 2,
    "bench": 3,
    "engines": 3,
    "jobs": 4,
    "paper_figs": 5,
    "cli": 6,
}
#: The rooms of a root that sit on a floor of their own (the root's other modules are the root's floor). The audit is
#: one room over three floors: its tests and samplers with the decoders, its runs on a pair with the measurements
#: (they load models and text as the bench does) and the engines' audit with the engines.
ROOMS = {
    "decoders.audit.runs": "bench",
    "decoders.audit.throughput": "bench",
    "decoders.audit.engines": "engines",
    "decoders.bench": "bench",
    "decoders.engines": "engines",
    "decoders.jobs": "jobs",
}
PACKAGES = ("plumbing", "spectheory", "sims", "decoders", "paper_figs", "cli")  # the import roots: nothing else
#: What a figure never imports: it draws from documents, and measurement is a job's (``decoders.jobs``).
NOT_FOR_FIGURES = ("torch", "decoders.engines", "decoders.audit.engines", "decoders.models", "decoders.bench.inputs")


def _loaded_after(code: str) -> list:
    """The heavy modules present in a fresh interpreter after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if any(m == h or "
        f"m.startswith(h + '.') for h in {HEAVY!r}))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def test_theory_modules_import_without_torch_or_the_other_layers():
    assert THEORY, "no theory modules found"
    assert _loaded_after("\n".join(f"import spectheory.{name}" for name in THEORY)) == []


def test_gamma_command_imports_only_the_theory():
    code = (
        "import contextlib, io\nfrom cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['gamma', '--alpha', '0.8']) == 0"
    )
    loaded = _loaded_after(code)
    assert "cli.gamma" in loaded and all(m.startswith("cli") for m in loaded), loaded


def _layer(module: str, path: Path | None = None) -> str | None:
    """The layer of a dotted module name (or of the file ``path``); None outside the project."""
    for room, layer in ROOMS.items():
        if module == room or module.startswith(room + "."):
            return layer
    root = module.split(".")[0]
    return "theory" if root == "spectheory" else root if root in LAYER else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _module_of(path: Path, root: Path | None = None) -> str:
    """The dotted name of the module at ``path`` (a package's ``__init__`` is the package)."""
    parts = path.relative_to(root or ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _violations() -> list[str]:
    problems = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            own = _module_of(path)
            layer = _layer(own)
            if layer == "cli":  # the top floor imports every other
                continue
            for line, imported in _imports(path):
                target = _layer(imported)
                where = f"{path.relative_to(ROOT)}:{line} imports {imported}"
                allowed = {"theory": THEORY_MAY_IMPORT, "plumbing": PLUMBING_MAY_IMPORT}.get(layer)
                if allowed and imported.split(".")[0] not in allowed | set(sys.stdlib_module_names):
                    problems.append(
                        f"{where}: {layer} imports only {', '.join(sorted(allowed))} and the standard library"
                    )
                if target is None or target == layer:
                    continue
                if LAYER[target] >= LAYER[layer]:
                    problems.append(f"{where}: {layer} may not import {target}")
    return problems


def _figure_violations(root: Path) -> list[str]:
    """Every import in ``root``/paper_figs (lazy ones too) of torch, an engine or a model loader."""
    return [
        f"{path.relative_to(root)}:{line} imports {imported}"
        for path in sorted((root / "paper_figs").rglob("*.py"))
        for line, imported in _imports(path)
        if any(imported == name or imported.startswith(name + ".") for name in NOT_FOR_FIGURES)
    ]


def test_figures_import_no_torch_engine_or_model_loader_against_the_layout():
    assert _figure_violations(ROOT) == []


def _loaded_by_figures(modules) -> list:
    """``NOT_FOR_FIGURES`` modules a fresh interpreter holds after importing ``modules``: what they pull in
    transitively, through every project module they import at load time."""
    probe = (
        "\n".join(f"import {module}" for module in modules) + "\nimport json, sys\nprint(json.dumps(sorted(m for "
        f"m in sys.modules if any(m == h or m.startswith(h + '.') for h in {NOT_FOR_FIGURES!r}))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def test_figures_pull_in_no_torch_engine_or_model_loader_transitively():
    """Every figure module loads without torch, an engine or a model loader, whatever it imports on the way (the
    report's renderer once pulled torch in through decoders.bench.report.pair). Control: decoders.bench.report.pair
    itself does."""
    figures = sorted(f"paper_figs.{path.stem}" for path in (ROOT / "paper_figs").glob("*.py"))
    assert _loaded_by_figures(figures) == []
    assert "torch" in _loaded_by_figures(["decoders.bench.report.pair"])


def test_figure_import_check_catches_a_measurement(tmp_path):
    """Negative control: a copy of the Spec-Bench figure that opens an engine itself."""
    (tmp_path / "paper_figs").mkdir()
    (tmp_path / "paper_figs" / "spec_bench.py").write_text(
        "def compute():\n    from decoders.engines import open_engine\n"
        + (ROOT / "paper_figs" / "spec_bench.py").read_text()
    )
    assert _figure_violations(tmp_path) == ["paper_figs/spec_bench.py:2 imports decoders.engines.open_engine"]


def test_the_import_roots_against_the_design():
    """The distribution installs six import roots (pyproject.toml): every top-level package of the tree is one of
    them, and the layer checks above walk all six."""
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(PACKAGES)
    assert (
        'include = ["plumbing*", "spectheory*", "sims*", "decoders*", "paper_figs*", "cli*"]'
        in (ROOT / "pyproject.toml").read_text()
    )


def test_imports_go_one_way_against_the_layer_order():
    assert _violations() == []


#: What ``decoders.models``, the decoders' lowest layer, may import of the rest of ``decoders``: the sampling settings
#: and the state they carry (leaves themselves: they import nothing above ``decoders.models``).
MODELS_MAY_IMPORT = ("decoders.sampling", "decoders.grammar", "decoders.mirostat", "decoders.sampler_state")


def _models_violations(root: Path) -> list:
    """Every import (lazy ones too) in ``root``/decoders/models, and in the leaves it may import, of a decoders
    module outside ``decoders.models`` and ``MODELS_MAY_IMPORT``."""
    paths = sorted((root / "decoders" / "models").rglob("*.py")) + [
        root / (leaf.replace(".", "/") + ".py") for leaf in MODELS_MAY_IMPORT
    ]
    return [
        f"{path.relative_to(root)}:{line} imports {imported}"
        for path in paths
        for line, imported in _imports(path)
        if imported.startswith("decoders.")
        and not imported.startswith("decoders.models")
        and not any(imported == leaf or imported.startswith(leaf + ".") for leaf in MODELS_MAY_IMPORT)
    ]


def test_models_are_the_decoders_lowest_layer_against_their_imports(tmp_path):
    """decoders/models imports no decoder (the zoo, training and the drafts' registry live above it). Control: a
    copy of the call-width module that imports the decode loop is caught."""
    assert _models_violations(ROOT) == []
    shutil.copytree(ROOT / "decoders", tmp_path / "decoders", ignore=shutil.ignore_patterns("weights", "__pycache__"))
    widths = tmp_path / "decoders" / "models" / "call_widths.py"
    widths.write_text("from decoders._loop import decode\n" + widths.read_text())
    assert _models_violations(tmp_path) == ["decoders/models/call_widths.py:1 imports decoders._loop.decode"]


@pytest.mark.parametrize(
    "path, line, fragment",
    [
        ("spectheory/speedup.py", "import torch", "theory imports only"),
        ("spectheory/speedup.py", "from decoders import sampling", "theory may not import decoders"),
        ("plumbing/timing.py", "from spectheory import speedup", "plumbing may not import theory"),
        ("plumbing/outputs.py", "import scipy", "plumbing imports only"),
        ("paper_figs/table1.py", "from cli import main", "paper_figs may not import cli"),
        ("decoders/audit/exact.py", "from decoders.audit.runs import run_audit", "decoders may not import bench"),
        ("decoders/audit/runs.py", "from decoders.audit.engines import request", "bench may not import engines"),
    ],
)
def test_layer_check_catches_a_wrong_import(tmp_path, monkeypatch, path, line, fragment):
    """Negative control: the same check on a copy of one module with one bad import added."""
    copy = tmp_path / path
    copy.parent.mkdir(parents=True)
    copy.write_text(line + "\n" + (ROOT / path).read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert any(fragment in problem for problem in _violations())


def _import_graph(root: Path) -> dict:
    """Module -> the project modules it imports (lazy imports too; ``from package import module`` counts as the
    module), over every package of ``PACKAGES`` under ``root``."""
    modules = {_module_of(path, root) for package in PACKAGES for path in (root / package).rglob("*.py")}
    graph = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            edges = set()
            for _, imported in _imports(path):
                while imported and imported not in modules:
                    imported = imported.rpartition(".")[0]
                if imported:
                    edges.add(imported)
            graph[_module_of(path, root)] = edges
    return graph


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(start):
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_against_the_module_graph():
    assert _cycles(_import_graph(ROOT)) == []


def test_cycle_check_catches_a_cycle():
    """Negative control: two modules that import each other, and a three-module ring, are found; a chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"g"}, "g": set()}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def _unresolved_imports(paths) -> list:
    """Every import of a project module in ``paths`` that does not resolve: a module that is not there, or a name
    its module does not define."""
    import importlib

    missing = []
    for path in paths:
        for line, imported in _imports(path):
            if imported.split(".")[0] not in PACKAGES:
                continue
            module, _, name = imported.rpartition(".")
            try:
                importlib.import_module(imported)
                continue
            except ImportError:
                pass
            try:
                if hasattr(importlib.import_module(module), name):
                    continue
            except ImportError:
                pass
            missing.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return missing


def test_scripts_outside_the_roots_import_what_exists(tmp_path, monkeypatch):
    """The scripts that made results/, docs/upstream's reproductions and examples/ import project modules that exist, so
    a move inside the roots cannot leave them behind; each results folder with a script says how it was run (a
    README.md, or a "command" in its JSON). Control: a script importing a module that moved is caught."""
    scripts = [path for folder in ("results", "docs", "examples") for path in sorted((ROOT / folder).rglob("*.py"))]
    assert scripts and _unresolved_imports(scripts) == []
    for folder in sorted({path.parent for path in (ROOT / "results").rglob("*.py")}):
        commands = ['"command"' in path.read_text() for path in folder.glob("*.json")]
        assert (folder / "README.md").exists() or (commands and all(commands)), folder
    stale = tmp_path / "stale.py"
    stale.write_text("from decoders.audit.engines.request import compare_runs\nimport decoders.bench.nowhere\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _unresolved_imports([stale]) == [
        "stale.py:1 imports decoders.audit.engines.request.compare_runs",
        "stale.py:2 imports decoders.bench.nowhere",
    ]
