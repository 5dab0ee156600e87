"""The shared look of every figure: paper-sized, labelled, saved as PNG and PDF (never shown); tables as
Markdown and CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or used
import matplotlib.pyplot as plt  # noqa: E402

from plumbing.outputs import strict_loads, write_atomically, write_text  # noqa: E402

__all__ = [
    "COLUMN",
    "FULL",
    "figure",
    "save",
    "markdown_table",
    "write_table",
    "read_result",
    "plt",
    "RECOMPUTE_COMMAND",
]

RECOMPUTE_COMMAND = "spectheory figs --recompute"  # the provenance of every result a script's compute() writes
COLUMN = (3.4, 2.6)  # inches: one column of a two-column paper
FULL = (7.0, 2.8)  # the full text width

plt.rcParams.update(
    {
        "font.size": 8,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "legend.fontsize": 7,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "savefig.bbox": "tight",
        "savefig.dpi": 200,
        "lines.linewidth": 1.3,
    }
)


def figure(size=COLUMN, ncols: int = 1, **options):
    """A new figure and its axes."""
    return plt.subplots(1, ncols, figsize=size, **options)


def save(fig, out: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.pdf into ``out`` (atomically); returns both paths."""
    paths = [Path(out) / f"{name}.png", Path(out) / f"{name}.pdf"]
    try:
        for path in paths:
            kind = path.suffix[1:]
            metadata = {"CreationDate": None} if kind == "pdf" else None  # the same bytes each run
            write_atomically(path, lambda temporary: fig.savefig(temporary, format=kind, metadata=metadata))
    finally:
        plt.close(fig)
    return paths


def markdown_table(header: list, rows: list) -> list[str]:
    """The lines of a Markdown table; cells are strings."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows
    ]


def write_table(
    out: Path, name: str, header: list, rows: list, *, csv_rows: list | None = None, note: str = ""
) -> list[Path]:
    """Write ``name``.md (a Markdown table of ``rows``, then ``note``) and ``name``.csv (``csv_rows``, default
    ``rows``) into ``out``; cells are strings."""
    out = Path(out)
    table = io.StringIO(newline="")
    csv.writer(table, lineterminator="\n").writerows([header, *(rows if csv_rows is None else csv_rows)])
    return [
        write_text(
            out / f"{name}.md", "\n".join(markdown_table(header, rows)) + "\n" + (f"\n{note}\n" if note else "")
        ),
        write_text(out / f"{name}.csv", table.getvalue()),
    ]


def read_result(results: Path, name: str) -> dict:
    """The cached result ``results/name`` (a JSON object, strictly parsed: no NaN or Infinity); a missing or
    malformed file is a ``ValueError`` naming it and the way to remake it."""
    path = Path(results) / name
    remake = f"rerun {RECOMPUTE_COMMAND} --results {results}"
    try:
        document = strict_loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"result file {str(path)!r} does not exist: {remake}") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"result file {str(path)!r} cannot be read ({error}): {remake}") from None
    if not isinstance(document, dict):
        raise ValueError(f"result file {str(path)!r} holds a {type(document).__name__}, not an object: {remake}")
    return document
