"""One forecast function (issue 97; docs/forecasts.md, "One cost model behind every forecast"): a speedup forecast
from measured costs is computed by ``spectheory.costs.forecast_speedup`` alone, its verify calls priced by
``width_priced``. The source is read as syntax: the formulas it wraps are called nowhere else, every forecasting
module reaches it, and the theory's closed forms (Theorem 3.8 and its variants) appear in the decoders only as the
labelled diagnostic beside a measurement. Controls: a planted module with its own formula is caught."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "paper_figs")
#: What forecast_speedup wraps: called inside it, nowhere else.
WRAPPED = {"calibrated_speedup", "calibrated_sequence_speedup"}
#: Closed forms that price no measured cost: never a forecast in the decoders.
CLOSED_FORMS = {"walltime_improvement", "cross_vocabulary_speedup", "affine_speedup"}
#: The one use of a closed form in the decoders: the bench's Theorem 3.8 column, a diagnostic at the sweep's alpha.
DIAGNOSTICS = {("decoders/bench/bench.py", "walltime_improvement")}
#: Every module that forecasts a speedup, and what it must call to do so.
FORECASTERS = {
    "decoders/bench/forecast/sweep.py": "speedup",  # CostProfile.speedup, which calls forecast_speedup
    "decoders/bench/forecast/dynamic.py": "forecast_speedup",
    "decoders/bench/spec_bench/forecast.py": "forecast_speedup",
    "decoders/bench/cross_bench.py": "forecast_speedup",
    "decoders/bench/policy_bench.py": "forecast_speedup",
    "decoders/engines/bench.py": "forecast_speedup",
    "spectheory/costs.py": "forecast_speedup",
    "spectheory/trees.py": "forecast_speedup",  # the optimal tree under measured costs (`spectheory tree --costs`)
}


def _calls(tree: ast.AST) -> list:
    """(called name, enclosing function) of every call in ``tree``."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name:
                    found.append((name, function))
            visit(child, inner)

    visit(tree, None)
    return found


def violations(text: str, path: str) -> list:
    """What ``text`` (the module at ``path``) does against the one forecast function."""
    calls = _calls(ast.parse(text))
    out = [
        f"{path}: {name} in {function}"
        for name, function in calls
        if name in WRAPPED and (path, function) != ("spectheory/costs.py", "forecast_speedup")
    ]
    if path.startswith("decoders/"):
        out += [f"{path}: {name}" for name, _ in calls if name in CLOSED_FORMS and (path, name) not in DIAGNOSTICS]
    if path in FORECASTERS and FORECASTERS[path] not in {name for name, _ in calls}:
        out.append(f"{path}: forecasts without {FORECASTERS[path]}")
    return out


def test_every_forecast_through_the_one_function():
    found = [
        entry
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for entry in violations(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []
    assert all((ROOT / path).exists() for path in FORECASTERS)


def test_check_catches_a_forecast_of_its_own():
    """A planted bench that forecasts with its own formula, or with Theorem 3.8 at a measured c, is caught; the same
    module through forecast_speedup is not."""
    own = (
        "from spectheory.costs import calibrated_speedup\n"
        "def forecast(tokens, step, seconds):\n    return calibrated_speedup(tokens, step, seconds)\n"
    )
    theorem = "def forecast(alpha, gamma, c):\n    return walltime_improvement(alpha, gamma, c)\n"
    through = "def forecast(tokens, step, seconds):\n    return forecast_speedup(tokens, step, seconds)\n"
    assert violations(own, "decoders/bench/mine.py") == ["decoders/bench/mine.py: calibrated_speedup in forecast"]
    assert violations(theorem, "decoders/bench/mine.py") == ["decoders/bench/mine.py: walltime_improvement"]
    assert violations(through, "decoders/bench/mine.py") == []
    assert violations(theorem, "decoders/bench/cross_bench.py") == [
        "decoders/bench/cross_bench.py: walltime_improvement",
        "decoders/bench/cross_bench.py: forecasts without forecast_speedup",
    ]
