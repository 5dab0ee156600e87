"""How often the forecasts' stated 95% intervals hold (docs/forecasts.md, "How far a forecast holds"): every
forecast beside its measurement in a saved document (a report, a bench with ``--forecast-prompts``, a Spec-Bench
table, an engine bench), and per run whether the measured speedup lies inside the forecast's interval
(``spectheory.intervals.forecast_interval``) combined with the measurement's own 95% interval.

Combined: |log forecast - log measured| <= sqrt(h_f^2 + h_m^2), h_f the forecast interval's log half-width and h_m
the measured interval's on the side facing the forecast. The run error sigma is estimated by moments,
sigma^2 = mean(r^2 - (SE/s)^2 - (h_m/z)^2), r = log(forecast / measured); each run's coverage is judged with the
sigma estimated from the other runs only (``coverage_table``), so that no run's rows went into its own interval.
Pure: documents in, numbers out."""

from __future__ import annotations

import math
from dataclasses import dataclass

from decoders.load_results import KIND as LOAD_KIND
from spectheory.intervals import Z95, covers, facing_half_width, forecast_interval

__all__ = ["ForecastPair", "pairs_of", "run_error", "covered", "coverage_table"]


@dataclass(frozen=True)
class ForecastPair:
    """One forecast speedup beside the speedup measured for it: the forecast's standard error over ``prompts``
    (None where it has none) and the measured 95% interval [low, high]."""

    source: str  # which kind of run: report, bench, Spec-Bench, engine
    forecast: float
    standard_error: float | None
    prompts: int
    measured: float
    measured_interval: tuple

    @property
    def log_error(self) -> float:
        return math.log(self.forecast / self.measured)

    @property
    def measured_half_width(self) -> float:
        """The measured interval's log half-width on the side that faces the forecast."""
        return facing_half_width(self.measured, self.measured_interval, self.forecast)


def _pair(source: str, forecast: float, standard_error, prompts: int, measured: float, interval) -> ForecastPair:
    return ForecastPair(source, forecast, standard_error if prompts > 1 else None, prompts, measured, tuple(interval))


def _judged_rows(source: str, judged: list, prompts: int) -> list:
    """The judged rows of every forecast that was shown (a forecast withheld by its checks predicts nothing)."""
    return [
        _pair(
            source, row["forecast"], row["forecast_standard_error"], prompts, row["measured"], row["measured_interval"]
        )
        for one in judged
        if not one.get("withheld")
        for row in one["forecast_by_gamma"]
    ]


def _engine_rows(source: str, document: dict) -> list:
    """An engine bench's rows, with the jackknife's standard error over the forecast's prompts where the row states it
    (engine benches before 2026-12-07 pooled their prompts' counters and state none)."""
    prompts = document["forecast"]["prompts"]
    if document["forecast"].get("withheld"):
        return []
    return [
        _pair(
            source,
            row["forecast_speedup"],
            row.get("forecast_standard_error"),
            prompts,
            row["speedup"],
            row["speedup_interval"],
        )
        for row in document["rows"]
        if row.get("forecast_speedup") is not None
    ]


def pairs_of(document: dict) -> list:
    """Every forecast shown beside its measurement in a saved document; [] where it holds none. The dynamic
    tree's Spec-Bench rows have no measured interval and are left out, and so is a cross-vocabulary bench (its rows
    state no bootstrap interval: ``decoders.bench.cross_bench``) and an engine bench of suffix decoding made before its
    forecast counted a second pass (its bench repeats the prompts it remembers, which the forecast's single pass did
    not: docs/findings/forecasts-real.md). An engine under load (``decoders.load_results.KIND``) is left out too: its
    forecast's interval is over sets of questions, not the jackknife with the run error this table judges
    (docs/engines-load.md; judged in docs/findings/goodput.md)."""
    forecast = document.get("forecast")
    if not forecast or "vocabularies" in document or document.get("kind") == LOAD_KIND:
        return []
    if (document.get("engine_settings") or {}).get("method") == "suffix" and forecast.get("passes", 1) < 2:
        return []  # it drafts from its earlier answers, and the bench repeats its prompts: not that forecast's workload
    if "recommendations" in document:
        return _judged_rows("report", document["recommendations"], forecast["prompts"])
    if "judged" in forecast:
        return _judged_rows("bench", forecast["judged"], forecast["prompts"])
    if "categories" in document:
        ours = [
            _pair(
                "Spec-Bench",
                row["forecast"],
                row["forecast_standard_error"],
                forecast["questions"],
                row["measured"],
                row["measured_interval"],
            )
            for category in document["categories"].values()
            if "forecast" in category  # none where the forecast was withheld
            for row in category["forecast"]["judged"]["rows"]
            if row["measured_interval"] is not None
        ]
        engine = document.get("engine") or {"categories": {}}
        return ours + [
            pair
            for category in engine["categories"].values()
            if category.get("forecast")
            for pair in _engine_rows("Spec-Bench, engine", category)
        ]
    return _engine_rows("engine bench", document)


def run_error(pairs: list) -> float:
    """sigma of log(forecast / measured) beyond the prompts' standard error and the measurement's (moments)."""
    if not pairs:
        raise ValueError("run_error needs at least one forecast beside its measurement")
    excess = [
        pair.log_error**2
        - (pair.measured_half_width / Z95) ** 2
        - (0.0 if pair.standard_error is None else pair.standard_error / pair.forecast) ** 2
        for pair in pairs
    ]
    return math.sqrt(max(0.0, sum(excess) / len(excess)))


def covered(pair: ForecastPair, sigma: float, level: float = 0.95) -> bool:
    """Whether the measured speedup lies inside the forecast's ``level`` interval combined with the measurement's."""
    interval = forecast_interval(pair.forecast, pair.standard_error, pair.prompts, level=level, run_error=sigma)
    return covers(pair.forecast, interval, pair.measured, pair.measured_interval)


@dataclass(frozen=True)
class CoverageRow:
    """One run's forecasts judged with the run error estimated from the other runs."""

    run: str
    source: str
    rows: int
    covered: int
    run_error: float  # estimated without this run


def coverage_table(documents: dict, level: float = 0.95) -> list:
    """Per named document (``{name: document}``) its rows, how many its interval covers, and the run error it was
    judged with, estimated from every other document's pairs (leave one run out)."""
    pairs = {name: pairs_of(document) for name, document in documents.items()}
    table = []
    for name, own in pairs.items():
        if not own:
            continue
        sigma = run_error([pair for other, theirs in pairs.items() if other != name for pair in theirs])
        sources = " and ".join(dict.fromkeys(pair.source for pair in own))
        table.append(CoverageRow(name, sources, len(own), sum(covered(pair, sigma, level) for pair in own), sigma))
    return table
