"""The report's document (docs/measuring.md): every number `spectheory report` shows, as ``report.json`` holds it, in a
module the figures read without torch (``decoders.bench.report.pair`` measures it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from spectheory.recommendation import from_sweep

__all__ = ["ReportDocument", "recommendation_of"]


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
    recommendations: list  # per temperature: the rule's answer, the forecast judged, the calculators beside them
    bench: dict  # the benchmark's document (decoders.bench.bench.BenchReport.as_dict)
    audit: dict  # the audit's report with its gamma, temperature and prompt
    trees: dict | None = None  # tree against chain (decoders.bench.tree_bench), None where it was not measured
    policies: dict | None = None  # draft-length policies (decoders.bench.policy_bench), None where not measured
    forecast: dict | None = (
        None  # the forecast made before the sweep (``decoders.bench.forecast.sweep.forecast_sweep``), with its seconds
    )
    sweep_seconds: float | None = None  # the sweep that checks it
    sweep_prompt_ids: list | None = None  # the sweep's prompts (the forecast's are in ``forecast``)

    def as_dict(self) -> dict:
        return asdict(self)


def recommendation_of(document: dict, r: dict) -> dict:
    """The recommendation of ``r``, one temperature's entry of the report ``document``'s ``recommendations``
    (``spectheory.recommendation``): as written, or in a report written before the rule (2026-12-02) the rule applied
    to its sweep's rows and the forecast's gamma, which is all it reads."""
    if "recommendation" in r:
        return r["recommendation"]
    rows = [row for row in document["bench"]["rows"] if row["temperature"] == r["temperature"]]
    return from_sweep(rows, r["forecast_gamma"]).as_dict()
