"""Leviathan et al. Figure 2: expected tokens per iteration, (1 - alpha^(gamma+1)) / (1 - alpha) (Eq. 1),
against alpha for gamma = 1, 3, 5, 7, 10, and the gamma -> infinity limit 1 / (1 - alpha)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import figure, save
from spectheory.speedup import expected_tokens

GAMMAS = (1, 3, 5, 7, 10)


def make(out: Path, results: Path | None = None) -> list[Path]:
    alpha = np.linspace(0.0, 0.99, 400)
    fig, ax = figure()
    for gamma in GAMMAS:
        ax.plot(alpha, expected_tokens(alpha, gamma), label=f"$\\gamma$ = {gamma}")
    ax.plot(alpha, expected_tokens(alpha, np.inf), "k--", label="$\\gamma \\to \\infty$")
    ax.set(xlabel="acceptance rate $\\alpha$", ylabel="expected tokens per iteration", xlim=(0, 1), ylim=(1, 12))
    ax.legend(loc="upper left", ncols=2)
    return save(fig, out, "fig2_expected_tokens")


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
