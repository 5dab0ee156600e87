"""A gamma sweep's forecast and its judgement, typed (docs/measuring.md, "Forecasts"): what
``decoders.bench.forecast.sweep.forecast_sweep`` returns (one ``SweepForecast``, a ``TemperatureForecast`` per
temperature) and what ``judge_forecast`` makes of it on the sweep (a ``Judgement``). A module without torch, so the
report's document and the figures read them; ``as_dict`` is the JSON edge and ``from_dict`` reads every committed
vintage (forecasts made before the checks carry none)."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.bench.rows import ForecastRow, JudgedRow
from decoders.results import ResultRow
from spectheory.cost_checks import CostChecks
from spectheory.costs import CostProfile

__all__ = ["TemperatureForecast", "SweepForecast", "Judgement", "BudgetForecast", "DynamicForecast"]


@dataclass(frozen=True, kw_only=True)
class TemperatureForecast(ResultRow):
    """One temperature's forecast: the gamma it recommends with its speedup, its speedup at every swept gamma, the
    prompts that would pin it to +-10%, the pooled cost profile with the spread of its components over repeats
    ({component: [min, median, max]}) and the checks its costs passed (``spectheory.cost_checks``)."""

    temperature: float
    gamma: int
    speedup: float
    speedups: tuple  # of ForecastRow, one per swept gamma
    prompts_needed: int | None
    profile: CostProfile
    spread: dict
    checks: CostChecks | None = None  # None in forecasts made before the checks: absent from their files

    OPTIONAL = ("checks",)

    @property
    def passed(self) -> bool:
        """Whether it may be shown: its checks passed (a forecast that predates them is shown)."""
        return self.checks is None or self.checks.passed

    @property
    def withheld(self) -> str:
        """The one line that withholds it where its checks failed; '' where they passed or predate it."""
        return "" if self.checks is None else self.checks.line(f"T = {self.temperature:g}: the forecast")

    @property
    def pick(self) -> int | None:
        """What the recommendation rule takes of it (``spectheory.recommendation.from_sweep``): its gamma where it is
        shown, None where withheld."""
        return None if self.withheld else self.gamma

    def at(self, gamma: int) -> ForecastRow:
        return next(row for row in self.speedups if row.gamma == gamma)

    def as_dict(self) -> dict:
        shown = dict(
            super().as_dict(), speedups=[row.as_dict() for row in self.speedups], profile=self.profile.as_dict()
        )
        return shown if self.checks is None else dict(shown, checks=self.checks.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> TemperatureForecast:
        checks = saved.get("checks")
        return cls(
            **dict(
                saved,
                speedups=tuple(map(ForecastRow.from_dict, saved["speedups"])),
                profile=CostProfile.from_dict(saved["profile"]),
                checks=None if checks is None else CostChecks.from_dict(checks),
            )
        )


@dataclass(frozen=True, kw_only=True)
class SweepForecast(ResultRow):
    """The forecast of a sweep: its acceptance along ``prompts`` other prompts (``prompt_ids``), its costs timed on
    the first ``cost_prompts`` over ``repeats`` after ``warmup``, one ``TemperatureForecast`` per temperature, and its
    seconds."""

    prompts: int
    prompt_ids: list
    cost_prompts: int
    repeats: int
    warmup: int
    temperatures: tuple  # of TemperatureForecast
    seconds: float

    def as_dict(self) -> dict:
        return dict(super().as_dict(), temperatures=[entry.as_dict() for entry in self.temperatures])

    @classmethod
    def from_dict(cls, saved: dict) -> SweepForecast:
        """A saved forecast (the bench command's also holds its ``judged``, read with ``Judgement.from_dict``)."""
        own = {key: value for key, value in saved.items() if key != "judged"}
        return cls(**dict(own, temperatures=tuple(map(TemperatureForecast.from_dict, saved["temperatures"]))))


@dataclass(frozen=True, kw_only=True)
class Judgement(ResultRow):
    """One temperature's forecast judged on the sweep (``judge_forecast``): the temperature, its checks and the line
    that withholds it where they failed, its gamma and speedup with the stated interval, that gamma's measured speedup
    and its loss against the best measured gamma (within 5%?), forecast against measured at every gamma, and whether
    the two gammas' measured intervals are apart (``loss_resolved``: where they overlap the sweep cannot tell the loss
    from noise)."""

    temperature: float
    checks: CostChecks | None = None  # None in forecasts made before the checks
    withheld: str = ""
    forecast_gamma: int
    forecast_speedup: float
    forecast_interval: list | None = None  # None before forecasts stated one
    measured_speedup_at_forecast_gamma: float
    forecast_loss: float
    forecast_within_5_percent: bool
    forecast_by_gamma: tuple  # of JudgedRow, one per swept gamma
    best_measured_gamma: int
    best_measured_speedup: float
    loss_resolved: bool | None = None  # None before it was judged

    @property
    def pick(self) -> int | None:
        """What the recommendation rule takes of the forecast: its gamma where shown, None where withheld (as
        ``TemperatureForecast.pick``)."""
        return None if self.withheld else self.forecast_gamma

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            checks=None if self.checks is None else self.checks.as_dict(),
            forecast_by_gamma=[row.as_dict() for row in self.forecast_by_gamma],
        )

    @classmethod
    def from_dict(cls, saved: dict) -> Judgement:
        return cls(**cls.typed_parts(saved))

    @staticmethod
    def typed_parts(saved: dict) -> dict[str, object]:
        """``saved`` with its checks and rows typed (a subclass adds its own parts)."""
        checks = saved.get("checks")
        return dict(
            saved,
            forecast_by_gamma=tuple(map(JudgedRow.from_dict, saved["forecast_by_gamma"])),
            checks=None if checks is None else CostChecks.from_dict(checks),
        )


@dataclass(frozen=True, kw_only=True)
class BudgetForecast(ResultRow):
    """EAGLE-2's dynamic tree at one node budget (``decoders.bench.forecast.dynamic``): tokens per call replayed along
    the continuations (the forecast) and from the fitted calibration, the tree decoder's seconds per iteration and
    tokens per call on the cost prompts, and the forecast speedup."""

    budget: int
    forecast_tokens_per_call: float
    calibrated_tokens_per_call: float
    seconds_per_iteration: float
    tokens_per_call_on_cost_prompts: float
    forecast_speedup: float


@dataclass(frozen=True, kw_only=True)
class DynamicForecast(ResultRow):
    """The forecast of EAGLE-2's trees of ``branching`` and ``depth`` (``decoders.bench.forecast.dynamic``): the path
    calibration (``spectheory.dynamic_trees.PathCalibration.as_dict``), a ``BudgetForecast`` per budget, the budget it
    recommends, the autoregressive seconds per prompt, what went into it (windows, contexts, cost prompts, length,
    tokens, repeats, seeds) and its seconds."""

    branching: int
    depth: int
    calibration: dict
    rows: tuple  # of BudgetForecast
    recommended_budget: int
    autoregressive_seconds: float
    used: dict
    seconds: float

    def at(self, budget: int) -> BudgetForecast:
        return next(row for row in self.rows if row.budget == budget)

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> DynamicForecast:
        return cls(**dict(saved, rows=tuple(map(BudgetForecast.from_dict, saved["rows"]))))
