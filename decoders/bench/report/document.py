"""The report's document (docs/measuring.md): every number `spectheory report` shows, typed, in a module the figures
read without torch (``decoders.bench.report.pair`` measures it). It becomes ``report.json``'s dict only at the JSON
edge (``as_dict``), and ``from_dict`` reads any committed report back, of any vintage."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from decoders.bench.rows import JudgedRow
from decoders.results import ResultRow
from spectheory.recommendation import Recommendation, from_sweep

__all__ = ["ReportDocument", "TemperatureAnswer"]


@dataclass(frozen=True, kw_only=True)
class TemperatureAnswer(ResultRow):
    """One temperature's answer: the forecast's gamma judged on the sweep
    (``decoders.bench.forecast.sweep.judge_forecast``), the recommendation (``spectheory.recommendation``) and, as
    diagnostics, the cost model calibrated on the sweep's own profile and Theorem 3.8 at the sweep's pooled alpha and
    measured c. Fields in the order report.json holds them; those with a default were added after the first reports."""

    temperature: float
    checks: dict | None = None  # the forecast's checks (spectheory.cost_checks); None before they were made
    withheld: str | None = None  # the one line of a withheld forecast; None where it stands
    forecast_gamma: int
    forecast_speedup: float
    forecast_interval: list | None = None  # its stated 95% interval; None before forecasts stated one (2026-11-28)
    measured_speedup_at_forecast_gamma: float
    forecast_loss: float  # against the best measured gamma
    forecast_within_5_percent: bool
    forecast_by_gamma: tuple  # of JudgedRow, one per swept gamma
    best_measured_gamma: int
    best_measured_speedup: float
    loss_resolved: bool | None = None  # whether the two gammas' intervals are apart
    recommendation: Recommendation | None = None  # None only before the rule (ReportDocument.from_dict applies it)
    optimal_gamma: int  # the cost model calibrated on the sweep's profile
    calibrated_speedup: float
    measured_speedup_at_optimal_gamma: float | None
    alpha: float  # the sweep's pooled alpha (acceptance counts)
    c: float
    theorem_3_8_gamma: int
    predicted_speedup: float
    expected_tokens: float

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            forecast_by_gamma=[row.as_dict() for row in self.forecast_by_gamma],
            recommendation=None if self.recommendation is None else self.recommendation.as_dict(),
        )

    @classmethod
    def from_dict(cls, saved: dict) -> TemperatureAnswer:
        chosen = saved.get("recommendation")
        return cls(
            **dict(
                saved,
                forecast_by_gamma=tuple(JudgedRow.from_dict(row) for row in saved["forecast_by_gamma"]),
                recommendation=None if chosen is None else Recommendation.from_dict(chosen),
            )
        )


@dataclass(frozen=True)
class ReportDocument:
    """Every number the report shows; ``as_dict`` is the JSON document ``report.json`` holds."""

    command: str
    created: str
    seconds: float
    target: str
    draft: str
    text: str  # where the held-out text came from
    settings: dict
    environment: dict
    alpha_text: list  # per temperature: alpha, standard_error, windows, length
    c: float
    recommendations: tuple  # of TemperatureAnswer, one per temperature
    bench: dict  # the benchmark's document (decoders.bench.bench.BenchReport.as_dict)
    audit: dict  # the audit's report with its gamma, temperature and prompt
    trees: dict | None = None  # tree against chain (decoders.bench.tree_bench), None where it was not measured
    policies: dict | None = None  # draft-length policies (decoders.bench.policy_bench), None where not measured
    forecast: dict | None = None  # the forecast made before the sweep (decoders.bench.forecast.sweep.forecast_sweep)
    sweep_seconds: float | None = None  # the sweep that checks it
    sweep_prompt_ids: list | None = None  # the sweep's prompts (the forecast's are in ``forecast``)

    def as_dict(self) -> dict:
        document = {field.name: getattr(self, field.name) for field in fields(self)}
        return dict(document, recommendations=[answer.as_dict() for answer in self.recommendations])

    @classmethod
    def from_dict(cls, saved: dict) -> ReportDocument:
        """A report.json as written (the writer's ``provenance`` set aside). In a report written before the rule
        (2026-12-02) each temperature's recommendation is the rule applied to its sweep's rows and the forecast's
        gamma, which is all it reads."""
        own = {field.name for field in fields(cls)} - {"recommendations"}
        answers = []
        for answer in map(TemperatureAnswer.from_dict, saved["recommendations"]):
            if answer.recommendation is None:
                rows = [row for row in saved["bench"]["rows"] if row["temperature"] == answer.temperature]
                answer = replace(answer, recommendation=from_sweep(rows, answer.forecast_gamma))
            answers.append(answer)
        return cls(**{key: value for key, value in saved.items() if key in own}, recommendations=tuple(answers))
