"""One script per figure or table of the papers, regenerated from the toolkit.

Each module's docstring is its caption and ``make(out, results)`` writes its files (PNG and PDF, or
Markdown and CSV for tables) into ``out``, reading cached measurements from ``results`` where it needs
them: those modules name the file as ``RESULT`` and ``compute(results)`` reruns what made it. ``style``
holds the shared look; ``paper_data`` the papers' printed numbers that figures overlay; ``report`` the
one-command report's rendering. ``make_all`` (``spectheory figs``) runs every script. Scripts render;
the measuring is done by the library functions their ``compute`` calls.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from plumbing.outputs import staged_directory

__all__ = ["SCRIPTS", "script", "make_all"]

#: Every figure and table script, in the papers' order, then ours.
SCRIPTS = (
    "fig2_expected_tokens",
    "fig3_optimal_gamma",
    "fig4_speedup_operations",
    "table1",
    "fig5_timelines",
    "simulation_vs_theory",
    "measured_vs_predicted",
    "speedup_vs_gamma",
    "iteration_time",
    "table3_alpha",
    "speedup_vs_batch",
    "table5_lenience",
    "stern_fig4_blockwise",
    "dynamic_gamma_heatmap",
    "table_real_model",
    "tree_expected_tokens",
    "verifier_acceptance",
    "tree_vs_chain",
    "spec_bench",
    "goodput_vs_concurrency",
)


def script(name: str):
    """The module of script ``name``."""
    if name not in SCRIPTS:
        raise ValueError(f"figure must be one of {SCRIPTS}, got {name!r}")
    return importlib.import_module(f"paper_figs.{name}")


def make_all(out: Path, results: Path, *, names=SCRIPTS, recompute: bool = False, progress=None) -> dict:
    """Run the scripts ``names``: ``{name: [paths written]}``. With ``recompute``, first rerun the simulations
    and measurements behind their cached results (each result once); ``progress`` wraps each loop (tqdm),
    and given one, the measurements show their own bars when stderr is a terminal.

    Each directory is replaced as a whole once everything in it is written (``staged_directory``): a run that
    fails or is interrupted leaves the old results and figures complete and untouched."""
    out, results = Path(out), Path(results)
    if out.resolve() == results.resolve():
        raise ValueError(f"out and results must be different directories, got {str(out)!r} for both")
    modules = {name: script(name) for name in names}
    wrap = progress or (lambda items, **_: items)
    if recompute:
        producers = {module.RESULT: module.compute for module in modules.values() if hasattr(module, "compute")}
        with staged_directory(results, keep_existing=True) as stage:
            for _result, compute in wrap(list(producers.items()), desc="recompute"):
                compute(stage, progress=progress)
    missing = sorted({m.RESULT for m in modules.values() if hasattr(m, "RESULT") and not (results / m.RESULT).exists()})
    if missing:
        raise ValueError(f"results {missing} are not in {results}: rerun them with --recompute")
    with staged_directory(out, keep_existing=True) as stage:
        written = {name: _make(module, stage, results) for name, module in wrap(list(modules.items()), desc="figures")}
    return {name: [out / path.relative_to(stage) for path in paths] for name, paths in written.items()}


def _make(module, out: Path, results: Path) -> list[Path]:
    """``module.make(out, results)``, with a result file that lacks what the script draws (an entry missing,
    of the wrong kind, or from another version of the toolkit) reported as a ``ValueError`` naming it."""
    try:
        return module.make(out, results)
    except (KeyError, IndexError, TypeError) as error:
        if not hasattr(module, "RESULT"):
            raise  # nothing read from a file: a bug, shown as one
        raise ValueError(
            f"result file {str(results / module.RESULT)!r} lacks what {module.__name__} draws "
            f"({type(error).__name__}: {error}): rerun spectheory figs --recompute --results {results}"
        ) from None
