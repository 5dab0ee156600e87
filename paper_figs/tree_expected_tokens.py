"""Expected tokens per target call against the node budget (root included: the positions one verify call
scores), for a chain, the full binary and ternary trees and Sequoia's optimal tree under the rank model,
for a strong and a weak draft's rank acceptance (docs/theory-trees.md §12). Points: the optimal trees simulated
(``sims.trees``), with 2 standard errors."""

from __future__ import annotations

from pathlib import Path

from paper_figs.style import FULL, RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import without_provenance, write_json
from sims.documents import TreesDocument
from sims.trees import trees_document

RESULT = "trees.json"


def compute(results: Path, *, progress=None) -> Path:
    """Both tree figures' results (``sims.trees.trees_document``: exact values, 20,000 simulated calls per
    budget)."""

    return write_json(Path(results) / RESULT, trees_document(progress=progress).as_dict(), command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    cases = TreesDocument.from_dict(without_provenance(read_result(results, RESULT))).budgets.acceptance
    fig, axes = figure((FULL[0], 2.6), ncols=len(cases), sharey=True)
    for ax, (name, case) in zip(axes, cases.items()):
        rows = case.rows
        budgets = [row.budget for row in rows]
        ax.plot(budgets, [row.optimal for row in rows], "-", label="optimal tree")
        ax.errorbar(
            budgets,
            [row.simulated for row in rows],
            yerr=[2 * row.simulated_se for row in rows],
            fmt="o",
            markersize=3,
            label="optimal, simulated",
        )
        ax.plot(budgets, [row.chain for row in rows], "--", label="chain")
        for k, marker in (("2", "s-"), ("3", "^-")):
            points = case.kary[k]
            ax.plot(
                [p.nodes for p in points],
                [p.expected_tokens for p in points],
                marker,
                markersize=3,
                label=f"full {k}-ary",
            )
        a = ", ".join(f"{x:g}" for x in case.acceptance)
        ax.set(title=f"{name} draft: a = ({a})", xlabel="node budget", xscale="log")
    axes[0].set_ylabel("expected tokens per call")
    axes[0].legend(loc="upper left")
    return save(fig, out, "tree_expected_tokens")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
