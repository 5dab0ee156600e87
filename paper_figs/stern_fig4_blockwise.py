"""Blockwise parallel decoding (Stern et al. Fig. 4 analogue): wall-clock speedup over greedy autoregressive
decoding against the mean accepted block size, for the shipped target with its trained proposal heads
using k = 2, 3, 4 heads under the exact criterion and the top-2 / top-3 approximate criteria, batch 1 on
this machine. Crosses: Stern et al.'s translation model (distillation + fine-tuning, k = 2..10; Tables 1
and 4). The dotted line is speedup = block size, what one model call per block would give if a
k-token call cost as much as a one-token call."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import BlockwiseDocument
from paper_figs.paper_data import STERN_BLOCKWISE
from paper_figs.style import RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import without_provenance, write_json

RESULT = "blockwise.json"
MARKERS = {("exact", 1): ("o", "exact"), ("top_k", 2): ("s", "top-2"), ("top_k", 3): ("^", "top-3")}


def compute(results: Path, *, progress=None) -> Path:
    """``bench_blockwise`` on 8 held-out prompts of 64 characters, 128 new tokens, median of 3; writes ``RESULT``."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.runs import blockwise_document

    document = blockwise_document(progress=None if progress else False)
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    document = BlockwiseDocument.from_dict(without_provenance(read_result(results, RESULT)))
    fig, ax = figure()
    for (criterion, top_k), (marker, label) in MARKERS.items():
        rows = [r for r in document.rows if r.criterion == criterion and r.top_k == top_k]
        if not rows:
            continue
        ax.plot(
            [r.mean_block_size for r in rows],
            [r.speedup for r in rows],
            marker + "-",
            ms=4,
            label=f"ours, {label} (k = {', '.join(str(r.block_size) for r in rows)})",
        )
    ax.plot(*zip(*STERN_BLOCKWISE.values()), "x", color="gray", label="Stern et al. (k = 2..10)")
    top = 1.05 * max(5.2, *(r.mean_block_size for r in document.rows))
    ax.plot([1, top], [1, top], "k:", linewidth=0.8, label="speedup = block size")
    ax.set(
        xlabel="mean accepted block size (tokens per model call)",
        ylabel="wall-clock speedup (x)",
        xlim=(1, top),
        ylim=(0.8, top),
        title=f"{document.environment['device_name']}, batch 1",
    )
    ax.legend(loc="upper left")
    return save(fig, out, "stern_fig4_blockwise")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
