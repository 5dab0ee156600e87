"""Leviathan et al. Figure 4: walltime speedup (Theorem 3.8, left) and the increase in arithmetic
operations (Theorem 3.11, right) against alpha for gamma = 2, 3, 5, 7, 10, with a free draft
(c = c_hat = 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import FULL, figure, save
from spectheory.speedup import operations_factor, walltime_improvement

GAMMAS = (2, 3, 5, 7, 10)


def make(out: Path, results: Path | None = None) -> list[Path]:
    alpha = np.linspace(0.0, 0.99, 400)
    fig, (speed, operations) = figure(FULL, ncols=2)
    for gamma in GAMMAS:
        speed.plot(alpha, walltime_improvement(alpha, gamma, 0.0), label=f"$\\gamma$ = {gamma}")
        operations.plot(alpha, operations_factor(alpha, gamma, 0.0), label=f"$\\gamma$ = {gamma}")
    speed.set(xlabel="acceptance rate $\\alpha$", ylabel="walltime speedup (x)", xlim=(0, 1), title="speedup, c = 0")
    operations.set(
        xlabel="acceptance rate $\\alpha$",
        ylabel="arithmetic operations (x autoregressive)",
        xlim=(0, 1),
        title="operations, $\\hat{c}$ = 0",
    )
    speed.legend(loc="upper left")
    operations.legend(loc="upper right")
    return save(fig, out, "fig4_speedup_operations")


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
