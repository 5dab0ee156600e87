"""Measured against predicted speedup (Leviathan et al. Table 4 analogue): each point is the shipped
pair at one (temperature, gamma) on this machine, batch 1, measured over our autoregressive decoder,
against Theorem 3.8 at the measured alpha and c (open) and against the cost model that recommends gamma
(filled, with two standard errors of the measurement); crosses are the paper's twelve T5-XXL points.
Points below the diagonal ran slower than predicted."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import BenchReport
from paper_figs.paper_data import LEVIATHAN_TABLE_4
from paper_figs.style import RECOMPUTE_COMMAND, figure, read_result, save
from plumbing.outputs import write_json

RESULT = "bench_cpu.json"


def compute(results: Path, *, progress=None) -> Path:
    """The shipped pair's benchmark with the Hugging Face comparison (``spectheory bench --hf``'s defaults)."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.runs import BenchRun, bench_document

    return write_json(
        Path(results) / RESULT,
        bench_document(BenchRun(hf=True, progress=None if progress else False)).as_dict(),
        command=RECOMPUTE_COMMAND,
    )


def make(out: Path, results: Path) -> list[Path]:
    return draw(BenchReport.from_dict(read_result(results, RESULT)), out)


def draw(report: BenchReport, out: Path) -> list[Path]:
    """The figure of one bench (a report's, or the ``spectheory bench`` document's)."""
    fig, ax = figure()
    for (temperature, marker), color in zip(((0.0, "o"), (1.0, "s")), ("C0", "C1")):
        rows = report.rows_at(temperature)
        if rows:
            label = f"T = {temperature:g} ($\\gamma$ = {rows[0].gamma}..{rows[-1].gamma})"
            ax.scatter(
                [r.predicted_speedup for r in rows],
                [r.speedup for r in rows],
                marker=marker,
                s=14,
                facecolors="none",
                edgecolors=color,
                label=f"Theorem 3.8, {label}",
            )
            ax.errorbar(
                [r.calibrated_speedup for r in rows],
                [r.speedup for r in rows],
                yerr=[2 * (r.speedup_standard_error or 0.0) for r in rows],
                fmt=marker,
                ms=3.5,
                color=color,
                elinewidth=0.7,
                label=f"cost model, {label}",
            )
    ax.scatter(
        [row[6] for row in LEVIATHAN_TABLE_4],
        [row[7] for row in LEVIATHAN_TABLE_4],
        marker="x",
        s=16,
        color="gray",
        label="Leviathan et al. T5 (Table 4)",
    )
    top = (
        max(3.6, *[value for r in report.rows for value in (r.speedup, r.predicted_speedup, r.calibrated_speedup)])
        * 1.05
    )
    ax.plot([0, top], [0, top], "k:", linewidth=0.8, label="measured = predicted")
    ax.set(
        xlabel="predicted speedup (x)",
        ylabel="measured speedup (x)",
        xlim=(0.5, top),
        ylim=(0.5, top),
        title=f"{report.environment['device_name']}, batch 1, c = {report.c:.3f}",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)  # below the axes: clear of the data
    return save(fig, out, "measured_vs_predicted")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
