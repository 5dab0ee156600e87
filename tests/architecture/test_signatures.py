"""The main job passes its settings whole (docs/project.md, "How data flows"): every function of decoders/bench and
decoders/jobs that ``decoders.jobs.report.pair_report`` reaches takes at most six parameters (the last that took
more, ``bench_row``, takes its timings and the two jobs' names as one ``Interleaved``). The calls are read from the
source: a name called in a module is that module's own definition, else one of the modules it imports it from;
``module.name(...)`` is ``name`` in the modules it imports."""

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("decoders/bench", "decoders/jobs")
MOST = 6


def _parameters(function: ast.FunctionDef) -> int:
    a = function.args
    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
    return count - bool(a.args and a.args[0].arg in ("self", "cls"))


def _modules(root: Path) -> dict:
    """{dotted module: (path relative to root, tree)} of every file in ``ROOMS``."""
    found = {}
    for room in ROOMS:
        for path in sorted((root / room).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = (str(path.relative_to(root)), ast.parse(path.read_text()))
    return found


def _wide_reached(root: Path, start: str = "decoders.jobs.report:pair_report") -> dict:
    """{"path:function": parameters} of the functions over ``MOST`` parameters that ``start`` reaches."""
    modules = _modules(root)
    defs = {
        (module, node.name): node
        for module, (_, tree) in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }
    imports = {}  # module -> {local name: (module, name)} and {alias: module}
    for module, (_, tree) in modules.items():
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    names[alias.asname or alias.name] = (
                        ("module", target) if target in modules else ("name", node.module, alias.name)
                    )
        imports[module] = names
    seen, todo = set(), [tuple(start.split(":"))]
    while todo:
        key = todo.pop()
        if key in seen or key not in defs:
            continue
        seen.add(key)
        module = key[0]
        for call in (n for n in ast.walk(defs[key]) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name):
                name = call.func.id
                own = (module, name)
                found = imports[module].get(name)
                todo.append(own if own in defs else (found[1], found[2]) if found and found[0] == "name" else own)
            elif isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
                found = imports[module].get(call.func.value.id)
                if found and found[0] == "module":
                    todo.append((found[1], call.func.attr))
    return {
        f"{modules[module][0]}:{name}": _parameters(defs[(module, name)])
        for module, name in seen
        if _parameters(defs[(module, name)]) > MOST
    }


def test_main_job_functions_take_at_most_six_parameters():
    assert _wide_reached(ROOT) == {}


def test_signature_check_catches_a_wide_function(tmp_path):
    """Negative control: a copy of the report's job whose measurement gains a seventh parameter is caught."""
    for room in ROOMS:
        shutil.copytree(ROOT / room, tmp_path / room, ignore=shutil.ignore_patterns("__pycache__", "data"))
    pair = tmp_path / "decoders" / "bench" / "report" / "pair.py"
    pair.write_text(
        pair.read_text().replace(
            "def measure_pair(run: ReportRun, inputs: Inputs, prompts: Prompts)",
            "def measure_pair(run: ReportRun, inputs: Inputs, prompts: Prompts, a=1, b=2, c=3, d=4)",
        )
    )
    assert _wide_reached(tmp_path) == {"decoders/bench/report/pair.py:measure_pair": 7}
