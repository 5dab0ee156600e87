"""Where an iteration's time goes, per gamma, on the shipped pair at batch 1: the cost model's prediction
(left bar of each pair: gamma t_draft, t_verify(gamma + 1), t_iteration; docs/theory.md §10) beside the
measured phases of the benchmark's own speculative runs (right bar: draft, verify, and accept / correct /
rollback with the loop), per temperature, in milliseconds per iteration."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from decoders.bench.documents import BenchReport
from paper_figs import measured_vs_predicted
from paper_figs.style import FULL, figure, read_result, save

RESULT = measured_vs_predicted.RESULT  # the same cached bench
compute = measured_vs_predicted.compute
PARTS = (("draft", "draft", "C0"), ("verify", "verify", "C1"), ("other", "accept, correct, rollback, loop", "C2"))


def make(out: Path, results: Path) -> list[Path]:
    return draw(BenchReport.from_dict(read_result(results, RESULT)), out)


def draw(report: BenchReport, out: Path) -> list[Path]:
    """The figure of one bench (a report's, or the ``spectheory bench`` document's)."""
    temperatures = sorted({row.temperature for row in report.rows})
    fig, axes = figure(FULL, ncols=len(temperatures), sharey=True, squeeze=False)
    for ax, temperature in zip(axes[0], temperatures):
        rows = report.rows_at(temperature)
        gammas = np.array([row.gamma for row in rows])
        for offset, key, hatch in (
            (-0.2, "calibrated_seconds_per_iteration", ""),
            (0.2, "measured_seconds_per_iteration", "//"),
        ):
            bottom = np.zeros(len(rows))
            for part, label, color in PARTS:
                values = np.array([1e3 * (getattr(row, key) or {}).get(part, 0.0) for row in rows])
                ax.bar(
                    gammas + offset,
                    values,
                    0.38,
                    bottom=bottom,
                    color=color,
                    hatch=hatch,
                    edgecolor="white",
                    linewidth=0.3,
                    label=f"{'predicted' if not hatch else 'measured'}: {label}",
                )
                bottom += values
        ax.set(xlabel="$\\gamma$ (left bar predicted, right measured)", title=f"T = {temperature:g}", xticks=gammas)
    axes[0][0].set_ylabel("ms per iteration")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=3)  # below: clear of the bars
    return save(fig, out, "iteration_time")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
