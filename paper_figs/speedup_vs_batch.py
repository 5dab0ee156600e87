"""Speculative decoding as the batch grows: the shipped pair's speedup over our autoregressive decoder at
each batch size of the benchmark's batch sweep on this machine, measured (points, with the spread over
repeats) beside the cost model's prediction from costs measured at that batch size (lines), per temperature
and gamma. Below 1, speculating is slower than decoding token by token."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import BenchDocument
from paper_figs import measured_vs_predicted
from paper_figs.style import figure, read_result, save

RESULT = measured_vs_predicted.RESULT  # the same cached bench
compute = measured_vs_predicted.compute


def make(out: Path, results: Path) -> list[Path]:
    return draw(BenchDocument.from_dict(read_result(results, RESULT)), out)


def draw(document: BenchDocument, out: Path) -> list[Path]:
    """The figure of one ``spectheory bench`` document's batch sweep."""
    sweep, env = document.batches, document.bench.environment
    fig, ax = figure()
    series = sorted({(row.temperature, row.gamma) for row in sweep.rows})
    for index, (temperature, gamma) in enumerate(series):
        rows = sorted(
            (row for row in sweep.rows if (row.temperature, row.gamma) == (temperature, gamma)),
            key=lambda row: row.batch_size,
        )
        sizes = [row.batch_size for row in rows]
        color, marker = f"C{index}", "o" if temperature == 0 else "s"
        ax.plot(
            sizes,
            [row.calibrated_speedup for row in rows],
            "-",
            color=color,
            linewidth=1,
            label=f"predicted, T = {temperature:g}, $\\gamma$ = {gamma}",
        )
        ax.vlines(
            sizes,
            [row.speedup_spread[0] for row in rows],
            [row.speedup_spread[2] for row in rows],
            color=color,
            linewidth=0.8,
        )  # each repeat's ratio: min to max
        ax.plot(
            sizes,
            [row.speedup for row in rows],
            marker,
            color=color,
            ms=3.5,
            mfc="none",
            label=f"measured, T = {temperature:g}, $\\gamma$ = {gamma}",
        )
    ax.axhline(1.0, color="k", linewidth=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sweep.batch_sizes, [str(size) for size in sweep.batch_sizes])
    ax.set(
        xlabel="batch size (rows per model call)",
        ylabel="speedup over autoregressive (x)",
        title=f"{env['device_name']}, {env['dtype']}",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize="x-small")
    return save(fig, out, "speedup_vs_batch")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
