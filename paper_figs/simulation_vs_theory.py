"""Simulation against theory: Monte-Carlo tokens per iteration (points, 95% confidence intervals) over the
closed form (1 - alpha^(gamma+1)) / (1 - alpha) (Eq. 1, lines) for gamma = 2, 4, 8. Circles: i.i.d.
Bernoulli(alpha) acceptance; squares: token-level speculative sampling (Algorithm 1) on synthetic
distribution pairs with mean beta = alpha. Right: each point's z-score (simulated - Eq. 1) / standard
error, which should fall inside +-1.96 about 95% of the time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import FULL, RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import without_provenance, write_json
from sims.documents import SimulationDocument
from sims.run import SimulationSpec, run_simulation
from spectheory.speedup import expected_tokens

RESULT = "simulation_vs_theory.json"
GAMMAS = (2, 4, 8)
ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9)
PROCESSES = (("iid", "o", 100_000), ("token-level", "s", 20_000))  # (process, marker, iterations)
Z_OFFSET = {"iid": -0.012, "token-level": 0.012}  # alpha shift in the z panel, so the processes do not overlap
SEED = 0


def compute(results: Path, *, progress=None) -> Path:
    """Run every (process, gamma, alpha) simulation of the figure, seeded, and write ``RESULT``."""
    runs = []
    jobs = [
        (process, iterations, gamma, alpha)
        for process, _, iterations in PROCESSES
        for gamma in GAMMAS
        for alpha in ALPHAS
    ]
    for index, (process, iterations, gamma, alpha) in enumerate(progress(jobs) if progress else jobs):
        spec = SimulationSpec(process, gamma, iterations=iterations, alpha=alpha)
        runs.append(run_simulation(np.random.default_rng([SEED, index]), spec, seed=SEED))
    document = SimulationDocument(seed=SEED, runs=tuple(runs))
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    runs = SimulationDocument.from_dict(without_provenance(read_result(results, RESULT))).runs
    fig, (curves, scores) = figure(FULL, ncols=2, width_ratios=(1.6, 1))
    alpha = np.linspace(0.0, 0.95, 200)
    for color, gamma in zip(("C0", "C1", "C2"), GAMMAS):
        curves.plot(alpha, expected_tokens(alpha, gamma), color=color, label=f"Eq. 1, $\\gamma$ = {gamma}")
        for process, marker, _ in PROCESSES:
            points = [r for r in runs if r.spec.gamma == gamma and r.spec.process == process]
            if not points:
                continue
            x = [r.alpha for r in points]
            curves.errorbar(
                x,
                [r.mean_tokens_per_iteration for r in points],
                yerr=[1.96 * r.standard_error for r in points],
                fmt=marker,
                color=color,
                ms=3.5,
                mfc="none",
                capsize=2,
            )
            scores.scatter(
                np.add(x, Z_OFFSET[process]),
                [r.z_score for r in points],
                marker=marker,
                s=14,
                facecolors="none",
                edgecolors=color,
            )
    for process, marker, iterations in PROCESSES:
        curves.plot([], [], marker, color="gray", mfc="none", label=f"{process} ({iterations:,} iterations)")
    curves.set(xlabel="acceptance rate $\\alpha$", ylabel="tokens per iteration", xlim=(0, 0.95))
    curves.legend(loc="upper left")
    scores.axhspan(-1.96, 1.96, color="gray", alpha=0.15, label="$\\pm$1.96")
    scores.axhline(0, color="k", linewidth=0.6)
    top = max(3.5, *(abs(r.z_score) for r in runs)) * 1.1
    scores.set(
        xlabel="acceptance rate $\\alpha$", ylabel="z = (simulated - Eq. 1) / SE", ylim=(-top, top), xlim=(0, 0.95)
    )
    scores.legend(loc="upper left")
    return save(fig, out, "simulation_vs_theory")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
