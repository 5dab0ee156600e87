"""Which gamma? Walltime speedup of the shipped pair against gamma on this machine at batch 1: Theorem 3.8
at the measured alpha and c (lines; gamma = 0 is autoregressive decoding), the cost model calibrated on the sweep
(dashed, shaded two standard errors of the measurement either side, docs/theory.md §9-§10), the forecast made
before the sweep with its stated 95% interval (squares with bars, where the document has one:
``spectheory.intervals``) and the measured speedup over our autoregressive decoder (circles, with their 95%
intervals), per temperature. The theory's optimum is marked with a star."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from decoders.bench.documents import BenchReport
from decoders.bench.forecast.document import SweepForecast
from paper_figs import measured_vs_predicted
from paper_figs.style import figure, read_result, save
from spectheory.speedup import optimal_gamma, walltime_improvement

RESULT = measured_vs_predicted.RESULT  # the same cached bench
compute = measured_vs_predicted.compute


def make(out: Path, results: Path) -> list[Path]:
    document = read_result(results, RESULT)
    forecast = document.get("forecast")
    return draw(BenchReport.from_dict(document), out, None if forecast is None else SweepForecast.from_dict(forecast))


def draw(report: BenchReport, out: Path, forecast: SweepForecast | None = None) -> list[Path]:
    """The figure of one bench (a report's, or the ``spectheory bench`` document's), with its ``forecast`` where
    there is one."""
    ahead = {
        entry.temperature: entry.speedups
        for entry in (forecast.temperatures if forecast else ())
        if entry.passed  # a withheld forecast is not drawn (docs/forecasts.md, "Checks before a forecast")
    }
    fig, ax = figure()
    c, top = report.c, max(report.settings["gammas"])
    gammas = np.arange(0, top + 1)
    for color, (temperature, alpha) in zip(("C0", "C1", "C2", "C3"), report.alpha.items()):
        alpha = min(float(alpha), 1.0)
        ax.plot(
            gammas,
            walltime_improvement(alpha, gammas, c),
            color=color,
            label=f"Theorem 3.8, T = {float(temperature):g} ($\\alpha$ = {alpha:.3f})",
        )
        best = int(optimal_gamma(alpha, c, gamma_max=top))
        ax.plot(best, walltime_improvement(alpha, best, c), "*", color=color, ms=8)
        rows = report.rows_at(temperature)
        swept = [row.gamma for row in rows]
        model = np.array([row.calibrated_speedup for row in rows])
        band = 2 * np.array([row.speedup_standard_error or 0.0 for row in rows])
        ax.plot(swept, model, "--", color=color, linewidth=1.0, label=f"cost model, T = {float(temperature):g}")
        ax.fill_between(swept, model - band, model + band, color=color, alpha=0.15, linewidth=0)
        measured = np.array([row.speedup for row in rows])
        bars = np.abs(np.array([row.speedup_interval or [s, s] for row, s in zip(rows, measured)]).T - measured)
        ax.errorbar(
            swept,
            measured,
            yerr=bars,
            fmt="o",
            color=color,
            ms=3.5,
            mfc="none",
            elinewidth=0.8,
            label=f"measured, T = {float(temperature):g}",
        )
        if temperature in ahead:
            _forecast(ax, ahead[temperature], color, temperature)
    ax.axhline(1.0, color="k", linewidth=0.6)
    ax.set(
        xlabel="draft tokens per iteration $\\gamma$",
        ylabel="speedup over autoregressive (x)",
        title=f"{report.environment['device_name']}, batch 1, c = {c:.3f}",
        xlim=(-0.3, top + 0.3),
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)  # below the axes: clear of the data
    return save(fig, out, "speedup_vs_gamma")


def _forecast(ax, speedups: tuple, color: str, temperature: float) -> None:
    """The forecast at each gamma (``ForecastRow``s) with its stated 95% interval, beside the measurement (shifted
    right)."""
    gammas = np.array([row.gamma for row in speedups], dtype=float) + 0.18
    values = np.array([row.speedup for row in speedups])
    bars = np.abs(np.array([row.interval or [v, v] for row, v in zip(speedups, values)]).T - values)
    ax.errorbar(
        gammas,
        values,
        yerr=bars,
        fmt="s",
        color=color,
        ms=3.0,
        elinewidth=0.8,
        capsize=1.5,
        label=f"forecast (95% interval), T = {temperature:g}",
    )


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
