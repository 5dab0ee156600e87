"""The optimal draft tree against the chain at equal node budgets on the shipped pair, T = 0 (docs/theory-trees.md
§12): tokens per target call (left) and speedup over our autoregressive decoder (right) against the node
budget, measured (points; speedups with the spread of their repeats) beside the rank model's prediction from
the rank frequencies along the decoded text (lines; speedups calibrated with each decoder's measured costs),
one colour per draft."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import TreeBench
from paper_figs.style import FULL, RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import write_json

RESULT = "tree_vs_chain.json"
FIGURE_DRAFTS = ("bigram", "transformer", "distilled", "unigram")


def compute(results: Path, *, progress=None) -> Path:
    """Every draft of ``FIGURE_DRAFTS`` with the shipped target at budgets 4, 8, 16 and 32 (``runs.tree_document``)."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.bench import BenchSettings
    from decoders.bench.runs import BenchRun, tree_document

    settings = BenchSettings(prompts=4, prompt_length=64, max_new_tokens=64, repeats=5, warmup=1, batch_sizes=())
    drafts = [tree_document(BenchRun(draft, settings, tree=True, progress=progress)) for draft in FIGURE_DRAFTS]
    return write_json(Path(results) / RESULT, {"drafts": [d.as_dict() for d in drafts]}, command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    documents = [TreeBench.from_dict(document) for document in read_result(results, RESULT)["drafts"]]
    fig, (tokens, speed) = figure((FULL[0], 2.8), ncols=2)
    for index, document in enumerate(documents):
        colour = f"C{index}"
        for kind, style, marker in (("tree", "-", "o"), ("chain", "--", "s")):
            rows = [row for row in document.rows if row.kind == kind]
            budgets = [row.budget for row in rows]
            label = f"{document.draft} {kind}"
            tokens.plot(budgets, [row.predicted_tokens_per_call for row in rows], style, color=colour)
            tokens.plot(
                budgets,
                [row.tokens_per_call for row in rows],
                marker,
                color=colour,
                markersize=3,
                fillstyle="none" if kind == "chain" else "full",
                label=label,
            )
            speed.plot(budgets, [row.calibrated_speedup for row in rows], style, color=colour)
            low = [max(0.0, row.speedup - row.speedup_spread[0]) for row in rows]
            high = [max(0.0, row.speedup_spread[2] - row.speedup) for row in rows]
            speed.errorbar(
                budgets,
                [row.speedup for row in rows],
                yerr=[low, high],
                fmt=marker,
                color=colour,
                markersize=3,
                fillstyle="none" if kind == "chain" else "full",
            )
    tokens.set(xlabel="node budget (positions per verify call)", ylabel="tokens per target call", xscale="log")
    speed.set(xlabel="node budget (positions per verify call)", ylabel="speedup over autoregressive", xscale="log")
    speed.axhline(1.0, color="grey", linewidth=0.8)
    tokens.legend(loc="upper left", ncol=2)
    return save(fig, out, "tree_vs_chain")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
