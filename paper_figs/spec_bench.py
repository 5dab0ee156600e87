"""Spec-Bench on CPU in the style of its bar chart (Xia et al. 2024; docs/measuring.md, "Spec-Bench"): SmolLM2-135M's
speedup per category, T = 0, batch 1, for every draft at its best gamma, EAGLE-2's dynamic tree and llama.cpp's
prompt lookup (over its own plain decoding, ours over our autoregressive decoder): bars measured, with the
spread of their repeats; crosses the forecast made from other questions before the table was timed, where there
is one; ticks the cost model calibrated on the table's own runs (a diagnostic; none for the dynamic tree)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from decoders.bench.spec_bench.document import SpecBenchTable
from decoders.bench.spec_bench.table import category_rows
from paper_figs.style import FULL, RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import write_json

RESULT = "spec_bench_smollm2.json"


def compute(results: Path, *, progress=None) -> Path:
    """The whole table on SmolLM2 with the time-boxed settings (``decoders.jobs.spec_bench.whole_table``)."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.jobs.spec_bench import WHOLE_TABLE, whole_table

    table = whole_table(replace(WHOLE_TABLE, progress=progress))
    return write_json(Path(results) / RESULT, table.as_dict(), command=RECOMPUTE_COMMAND)


def draw(table: SpecBenchTable, out: Path, name: str = "spec_bench") -> list[Path]:
    """The bar chart of a table (``decoders.bench.spec_bench.suite``'s, with or without engine rows)."""
    rows = category_rows(table)
    categories = list(dict.fromkeys((row.category, row.label) for row in rows))
    drafts = list(dict.fromkeys(row.draft for row in rows))
    cells = {(row.category, row.draft): row for row in rows}
    width = 0.8 / len(drafts)
    fig, axes = figure((FULL[0], 3.0))
    for index, draft in enumerate(drafts):
        places = [
            (i + (index - (len(drafts) - 1) / 2) * width, cells[(c, draft)])
            for i, (c, _) in enumerate(categories)
            if (c, draft) in cells
        ]
        xs, mine = [x for x, _ in places], [row for _, row in places]
        axes.bar(
            xs,
            [row.speedup for row in mine],
            width,
            color=f"C{index}",
            label=draft,
            yerr=[
                [max(0.0, row.speedup - row.speedup_spread[0]) for row in mine],
                [max(0.0, row.speedup_spread[2] - row.speedup) for row in mine],
            ],
            error_kw={"linewidth": 0.6},
        )
        predicted = [(x, row.calibrated_speedup) for x, row in places if row.calibrated_speedup is not None]
        if predicted:
            axes.scatter(
                *zip(*predicted),
                marker="_",
                color="black",
                s=40,
                linewidths=1.2,
                zorder=3,
                label="cost model (fit)" if index == 0 else None,
            )
        forecast = [(x, row.forecast_speedup) for x, row in places if row.forecast_speedup is not None]
        if forecast:
            axes.scatter(
                *zip(*forecast),
                marker="x",
                color="black",
                s=12,
                linewidths=0.8,
                zorder=3,
                label="forecast" if index == 0 else None,
            )
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_xticks(range(len(categories)), [label.replace(" ", "\n", 1) for _, label in categories])
    axes.set(ylabel="speedup (T = 0, batch 1)")
    axes.legend(ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return save(fig, out, name)


def make(out: Path, results: Path) -> list[Path]:
    return draw(SpecBenchTable.from_dict(read_result(results, RESULT)), out)


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
