"""The report's document (docs/measuring.md): every number `spectheory report` shows, typed, in a module the figures
read without torch (``decoders.bench.report.pair`` measures it). It becomes ``report.json``'s dict only at the JSON
edge (``as_dict``), and ``from_dict`` reads any committed report back, of any vintage."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from decoders.audit.verdict import AuditVerdict
from decoders.bench.documents import BenchReport, PolicyBench, TreeBench
from decoders.bench.forecast.document import Judgement, SweepForecast
from decoders.results import ResultRow
from spectheory.recommendation import Recommendation, from_sweep

__all__ = ["ReportDocument", "TemperatureAnswer", "AlphaAlongText", "ReportAudit"]


@dataclass(frozen=True, kw_only=True)
class TemperatureAnswer(Judgement):
    """One temperature's answer: the forecast's gamma judged on the sweep (the ``Judgement``,
    ``decoders.bench.forecast.sweep.judge_forecast``), the recommendation (``spectheory.recommendation``) and, as
    diagnostics, the cost model calibrated on the sweep's own profile and Theorem 3.8 at the sweep's pooled alpha and
    measured c. Fields in the order report.json holds them; those with a default were added after the first reports."""

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
        chosen = self.recommendation
        return dict(super().as_dict(), recommendation=None if chosen is None else chosen.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> TemperatureAnswer:
        chosen = saved.get("recommendation")
        parts = cls.typed_parts(saved)
        return cls(**dict(parts, recommendation=None if chosen is None else Recommendation.from_dict(chosen)))


@dataclass(frozen=True, kw_only=True)
class AlphaAlongText(ResultRow):
    """Alpha along held-out text at one temperature: the mean of sum_x min(p, q) over ``windows`` windows of
    ``length`` tokens, with its standard error (docs/theory.md §2)."""

    temperature: float
    alpha: float
    standard_error: float
    windows: int
    length: int


@dataclass(frozen=True, kw_only=True)
class ReportAudit(AuditVerdict):
    """The report's audit: the verdict of speculative sampling at ``gamma`` and ``temperature`` from the prompt
    ``prompt_ids`` (``prompt``: its text on the shipped corpus, else None: the end of the first benchmark prompt)."""

    gamma: int
    temperature: float
    prompt: str | None
    prompt_ids: list


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
    alpha_text: tuple  # of AlphaAlongText, one per temperature
    c: float
    recommendations: tuple  # of TemperatureAnswer, one per temperature
    bench: BenchReport  # the gamma sweep
    audit: ReportAudit
    trees: TreeBench | None = None  # tree against chain (decoders.bench.tree_bench), None where it was not measured
    policies: PolicyBench | None = None  # draft-length policies (decoders.bench.policy_bench), None where not measured
    forecast: SweepForecast | None = None  # the forecast made before the sweep (forecast_sweep)
    sweep_seconds: float | None = None  # the sweep that checks it
    sweep_prompt_ids: list | None = None  # the sweep's prompts (the forecast's are in ``forecast``)

    def as_dict(self) -> dict:
        document = {field.name: getattr(self, field.name) for field in fields(self)}
        return dict(
            document,
            recommendations=[answer.as_dict() for answer in self.recommendations],
            alpha_text=[row.as_dict() for row in self.alpha_text],
            **{key: None if document[key] is None else document[key].as_dict() for key in _PARTS},
        )

    @classmethod
    def from_dict(cls, saved: dict) -> ReportDocument:
        """A report.json as written (the writer's ``provenance`` set aside). In a report written before the rule
        (2026-12-02) each temperature's recommendation is the rule applied to its sweep's rows and the forecast's
        gamma (none where the forecast was withheld, as ``decoders.bench.report.pair`` applies it), which is all it
        reads."""
        missing = [key for key in ("bench", "audit", "recommendations") if key not in saved]
        if missing:
            raise ValueError(f"a report.json holds {', '.join(missing)}; this one has none")
        parts = {key: kind.from_dict(saved[key]) for key, kind in _PARTS.items() if saved.get(key) is not None}
        answers = []
        for answer in map(TemperatureAnswer.from_dict, saved["recommendations"]):
            if answer.recommendation is None:
                rows = parts["bench"].rows_at(answer.temperature)
                answer = replace(answer, recommendation=from_sweep(rows, answer.pick))
            answers.append(answer)
        own = {field.name for field in fields(cls)} - {"recommendations", "alpha_text", *_PARTS}
        return cls(
            **{key: value for key, value in saved.items() if key in own},
            recommendations=tuple(answers),
            alpha_text=tuple(map(AlphaAlongText.from_dict, saved["alpha_text"])),
            **parts,
        )


#: The report's typed parts (every one but the bench and the audit may be absent).
_PARTS = {
    "bench": BenchReport,
    "audit": ReportAudit,
    "trees": TreeBench,
    "policies": PolicyBench,
    "forecast": SweepForecast,
}
