"""Acceptance of k candidates at one position against k, for every multi-draft verifier, the best any
verifier can do with k i.i.d. drafts (alpha*) and SpecTr's upper bound, averaged over random (p, q) pairs of
two Dirichlet families on 8 tokens (exact values, docs/theory-trees.md §12). Drafting without replacement is not
bound by the i.i.d. optimum; deterministic top-k candidates start low when p and q are unrelated."""

from __future__ import annotations

from pathlib import Path

from paper_figs.style import FULL, figure, read_result, save
from paper_figs.tree_expected_tokens import RESULT, compute  # one result file for both tree figures
from plumbing.outputs import without_provenance
from sims.documents import TreesDocument

__all__ = ["RESULT", "compute", "make"]

LABELS = {
    "rrs": "RRS, i.i.d.",
    "rrs-without-replacement": "RRS without replacement",
    "kseq": "SpecTr K-SEQ",
    "target-only": "top-k, target-only",
    "optimal-iid": "i.i.d. optimum $\\alpha^*$",
    "spectr-bound": "SpecTr bound",
}


def make(out: Path, results: Path) -> list[Path]:
    document = TreesDocument.from_dict(without_provenance(read_result(results, RESULT))).verifiers
    fig, axes = figure((FULL[0], 2.6), ncols=len(document.families), sharey=True)
    for ax, (name, curves) in zip(axes, document.families.items()):
        for key, label in LABELS.items():
            style = ":" if key in ("optimal-iid", "spectr-bound") else "o-"
            ax.plot(document.ks, curves[key], style, markersize=3, label=label)
        ax.set(title=f"{name}, V = {document.vocabulary}, {document.pairs} pairs", xlabel="candidates k")
    axes[0].set_ylabel("acceptance")
    axes[0].legend(loc="lower right", fontsize="small")
    return save(fig, out, "verifier_acceptance")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
