"""One script per figure or table of the papers, regenerated from the toolkit.

Each module's docstring is its caption and ``make(out, results)`` writes its files (PNG and PDF, or
Markdown and CSV for tables) into ``out``, reading cached measurements from ``results`` where it needs
them: those modules name the file as ``RESULT`` and ``compute(results)`` reruns what made it. ``style``
holds the shared look; ``paper_data`` the papers' printed numbers that figures overlay; ``report`` the
one-command report. ``make_all`` (``spectheory figs``, ``python -m paper_figs``) runs every script.
"""

from __future__ import annotations

import importlib
from pathlib import Path

__all__ = ["SCRIPTS", "script", "make_all"]

#: Every figure and table script, in the papers' order, then ours.
SCRIPTS = ("fig2_expected_tokens", "fig3_optimal_gamma", "fig4_speedup_operations", "table1", "fig5_timelines",
           "simulation_vs_theory", "measured_vs_predicted", "speedup_vs_gamma", "table3_alpha", "table5_lenience",
           "stern_fig4_blockwise", "dynamic_gamma_heatmap")


def script(name: str):
    """The module of script ``name``."""
    if name not in SCRIPTS:
        raise ValueError(f"figure must be one of {SCRIPTS}, got {name!r}")
    return importlib.import_module(f"paper_figs.{name}")


def make_all(out: Path, results: Path, *, names=SCRIPTS, recompute: bool = False, progress=None) -> dict:
    """Run the scripts ``names``: ``{name: [paths written]}``. With ``recompute``, first rerun the simulations
    and measurements behind their cached results (each result once); ``progress`` wraps each loop (tqdm)."""
    modules = {name: script(name) for name in names}
    wrap = progress or (lambda items, **_: items)
    if recompute:
        producers = {module.RESULT: module.compute for module in modules.values() if hasattr(module, "compute")}
        for result, compute in wrap(list(producers.items()), desc="recompute"):
            compute(Path(results), progress=progress)
    missing = sorted({m.RESULT for m in modules.values() if hasattr(m, "RESULT")
                      and not (Path(results) / m.RESULT).exists()})
    if missing:
        raise ValueError(f"results {missing} are not in {results}: rerun them with --recompute")
    return {name: module.make(Path(out), Path(results)) for name, module in wrap(list(modules.items()), desc="figures")}
