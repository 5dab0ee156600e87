"""The shared look of every figure: paper-sized, labelled, saved as PNG and PDF (never shown)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or used
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["COLUMN", "FULL", "figure", "save", "plt"]

COLUMN = (3.4, 2.6)  # inches: one column of a two-column paper
FULL = (7.0, 2.8)  # the full text width

plt.rcParams.update({
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7, "xtick.labelsize": 7,
    "ytick.labelsize": 7, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "savefig.bbox": "tight", "savefig.dpi": 200, "lines.linewidth": 1.3,
})


def figure(size=COLUMN, ncols: int = 1, **options):
    """A new figure and its axes."""
    return plt.subplots(1, ncols, figsize=size, **options)


def save(fig, out: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.pdf into ``out``; returns both paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return paths
