"""Leviathan et al. Table 1: operations increase and walltime speedup for a free draft (c = c_hat = 0) at
the paper's (alpha, gamma) cells, from Theorems 3.11 and 3.8, as Markdown and CSV."""

from __future__ import annotations

from pathlib import Path

from paper_figs.style import write_table
from spectheory.speedup import operations_factor, walltime_improvement

CELLS = ((0.6, 2), (0.7, 3), (0.8, 2), (0.8, 5), (0.9, 2), (0.9, 10))


def rows() -> list[dict]:
    """One dict per cell: alpha, gamma, operations and speed, rounded as the paper prints them."""
    return [
        {
            "alpha": alpha,
            "gamma": gamma,
            "operations": round(float(operations_factor(alpha, gamma, 0.0)), 2),
            "speed": round(float(walltime_improvement(alpha, gamma, 0.0)), 2),
        }
        for alpha, gamma in CELLS
    ]


def make(out: Path, results: Path | None = None) -> list[Path]:
    table = rows()
    markdown = [[str(r["alpha"]), str(r["gamma"]), f"{r['operations']:.2f}x", f"{r['speed']:.2f}x"] for r in table]
    csv = [[str(r["alpha"]), str(r["gamma"]), f"{r['operations']:.2f}", f"{r['speed']:.2f}"] for r in table]
    return write_table(out, "table1", ["alpha", "gamma", "operations", "speed"], markdown, csv_rows=csv)


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
