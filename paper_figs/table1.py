"""Leviathan et al. Table 1: operations increase and walltime speedup for a free draft (c = c_hat = 0) at
the paper's (alpha, gamma) cells, from Theorems 3.11 and 3.8, as Markdown and CSV."""

from __future__ import annotations

from pathlib import Path

from spectheory.speedup import operations_factor, walltime_improvement

CELLS = ((0.6, 2), (0.7, 3), (0.8, 2), (0.8, 5), (0.9, 2), (0.9, 10))


def rows() -> list[dict]:
    """One dict per cell: alpha, gamma, operations and speed, rounded as the paper prints them."""
    return [{"alpha": alpha, "gamma": gamma, "operations": round(float(operations_factor(alpha, gamma, 0.0)), 2),
             "speed": round(float(walltime_improvement(alpha, gamma, 0.0)), 2)} for alpha, gamma in CELLS]


def make(out: Path, results: Path | None = None) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = rows()
    markdown = ["| alpha | gamma | operations | speed |", "|---|---|---|---|"]
    markdown += [f"| {r['alpha']} | {r['gamma']} | {r['operations']:.2f}x | {r['speed']:.2f}x |" for r in table]
    csv = ["alpha,gamma,operations,speed"] + [f"{r['alpha']},{r['gamma']},{r['operations']:.2f},{r['speed']:.2f}"
                                              for r in table]
    paths = [out / "table1.md", out / "table1.csv"]
    paths[0].write_text("\n".join(markdown) + "\n")
    paths[1].write_text("\n".join(csv) + "\n")
    return paths


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
