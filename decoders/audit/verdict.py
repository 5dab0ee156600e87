"""An audit's verdict as its documents hold it (docs/theory.md §8), in a module without torch so the report's
document, the device check's and their renderers read them: a statistical audit's numbers
(``decoders.audit.statistical.AuditReport`` typed: ``AuditVerdict``; ``from_dict`` reads every committed vintage,
reports before the battery lack it) and an exact law against the target's (``ExactReport``, made by
``decoders.audit.exact.compare_laws``)."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.results import ResultRow

__all__ = ["AuditVerdict", "TOLERANCE", "ExactReport"]

TOLERANCE = 1e-9  # float64 sums over at most a few thousand branches are good to ~1e-15


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


@dataclass(frozen=True)
class ExactReport:
    """An exact law held against the target's: max |difference| and total variation over sequences."""

    method: str
    horizon: int
    branches: int
    sequences: int
    total_mass: float
    max_abs_difference: float
    total_variation: float
    largest_deviations: tuple  # ((tokens, law, target law), ...), the five largest |differences|
    tolerance: float = TOLERANCE

    @property
    def passed(self) -> bool:
        return self.max_abs_difference <= self.tolerance

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "horizon": self.horizon,
            "branches": self.branches,
            "sequences": self.sequences,
            "total_mass": self.total_mass,
            "max_abs_difference": self.max_abs_difference,
            "total_variation": self.total_variation,
            "largest_deviations": [
                {"tokens": list(tokens), "law": law, "target": target}
                for tokens, law, target in self.largest_deviations
            ],
            "tolerance": self.tolerance,
            "passed": self.passed,
        }

    @classmethod
    def from_dict(cls, saved: dict) -> ExactReport:
        """A saved report (``passed`` is derived and set aside; the deviations as (tokens, law, target law))."""
        deviations = tuple((tuple(d["tokens"]), d["law"], d["target"]) for d in saved["largest_deviations"])
        own = {key: value for key, value in saved.items() if key != "passed"}
        return cls(**dict(own, largest_deviations=deviations))
