"""The shared look of every figure: paper-sized, labelled, saved as PNG and PDF (never shown); tables as
Markdown and CSV."""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or used
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["COLUMN", "FULL", "figure", "save", "markdown_table", "write_table", "run_command", "plt"]

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
        fig.savefig(path, metadata={"CreationDate": None} if path.suffix == ".pdf" else None)  # same bytes each run
    plt.close(fig)
    return paths


def markdown_table(header: list, rows: list) -> list[str]:
    """The lines of a Markdown table; cells are strings."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in rows]


def write_table(out: Path, name: str, header: list, rows: list, *, csv_rows: list | None = None,
                note: str = "") -> list[Path]:
    """Write ``name``.md (a Markdown table of ``rows``, then ``note``) and ``name``.csv (``csv_rows``, default
    ``rows``) into ``out``; cells are strings."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.md", out / f"{name}.csv"]
    paths[0].write_text("\n".join(markdown_table(header, rows)) + "\n" + (f"\n{note}\n" if note else ""))
    with paths[1].open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows([header, *(rows if csv_rows is None else csv_rows)])
    return paths


def run_command(argv: list, result: Path) -> Path:
    """Run ``spectheory *argv`` (the command a cached result was made with) and return ``result``."""
    from spectheory.cli import main  # the CLI imports paper_figs for `spectheory figs`: import at call time

    status = main([str(arg) for arg in argv])
    if status != 0:
        raise RuntimeError(f"spectheory {' '.join(map(str, argv))} exited with status {status}")
    return Path(result)
