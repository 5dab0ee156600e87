"""Leviathan et al. Figure 3: the optimal gamma (the integer maximising the Theorem 3.8 speedup) against
alpha, for draft cost ratios c = 0.01, 0.02, 0.05, 0.1, 0.2, 0.5."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import figure, save
from spectheory.speedup import optimal_gamma

CS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def make(out: Path, results: Path | None = None) -> list[Path]:
    alpha = np.linspace(0.01, 0.99, 491)
    fig, ax = figure()
    for c in CS:
        ax.step(alpha, optimal_gamma(alpha, c), where="post", label=f"c = {c:g}")
    ax.set(
        xlabel="acceptance rate $\\alpha$",
        ylabel="optimal $\\gamma$ (draft tokens per iteration)",
        yscale="symlog",
        xlim=(0, 1),
    )
    ax.set_yticks([0, 1, 2, 5, 10, 20, 50], labels=["0", "1", "2", "5", "10", "20", "50"])
    ax.legend(loc="upper left")
    return save(fig, out, "fig3_optimal_gamma")


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
