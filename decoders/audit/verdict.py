"""A statistical audit's verdict as its documents hold it (docs/theory.md §8): the numbers of
``decoders.audit.statistical.AuditReport`` typed, in a module without torch so the report's document and its
renderer read them; ``from_dict`` reads every committed vintage (reports before the battery lack it)."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.results import ResultRow

__all__ = ["AuditVerdict"]


@dataclass(frozen=True, kw_only=True)
class AuditVerdict(ResultRow):
    """``passed`` when the Bonferroni ``p_value`` over ``tests`` tests is at least ``level``; ``n`` samples of
    ``horizon`` tokens; each test's p-value, the per-position ones, the strongest pair per ordering, what it would
    detect with 90% power, its seconds, where the samples deviate most and every test's outcome as saved."""

    passed: bool
    p_value: float
    level: float
    n: int
    horizon: int
    tests: int
    test_p_values: dict
    position_p_values: dict
    strongest_pairs: dict
    joint_tokens: int
    impossible_tokens: int
    detectable_tv: float
    detectable_correlation: float | None
    detectable_mean_correlation: float | None
    seconds: float
    sampling_seconds: float
    deviation: dict | None = None
    battery: list | None = None  # each test's outcome (BatteryOutcome.as_dict); None before the battery

    OPTIONAL = ("battery",)
