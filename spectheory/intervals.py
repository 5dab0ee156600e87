"""The stated interval of a forecast speedup (docs/forecasts.md, "How far a forecast holds").

A forecast (``decoders.bench.forecast.sweep``, the Spec-Bench and engine forecasts) is wrong in two ways: its prompts
are a sample of the text (the jackknife standard error over them says how much), and its costs were timed in another
minute of the machine, through a cost model, than the run it predicts (no number inside one forecast says how much). The
interval carries both, on a log scale: half-width sqrt((t SE / s)^2 + (z sigma)^2), t Student's quantile on prompts - 1
degrees of freedom (a jackknife over 3-8 prompts is itself uncertain), z the normal quantile, sigma
``FORECAST_RUN_ERROR``: the relative error of committed forecasts beyond their prompts' and their measurements' spread,
estimated from every committed forecast beside its measurement (``decoders.bench.forecast.coverage.run_error``; a test
holds the constant to that estimate, and docs/forecasts.md holds the coverage each run's rows get from the estimate made
without that run).
"""

from __future__ import annotations

import math
import statistics

from scipy import stats

from plumbing.validation import as_int

__all__ = [
    "Z95",
    "FORECAST_RUN_ERROR",
    "forecast_interval",
    "log_half_width",
    "facing_half_width",
    "covers",
    "jackknife_error",
    "leave_one_out",
]

#: The two-sided 95% point of the normal law.
Z95 = float(stats.norm.ppf(0.975))
#: One standard deviation of log(forecast / measured) beyond the prompts' and the measurement's spread.
FORECAST_RUN_ERROR = 0.15


def log_half_width(
    speedup: float,
    standard_error: float | None = None,
    prompts: int | None = None,
    *,
    level: float = 0.95,
    run_error: float = FORECAST_RUN_ERROR,
) -> float:
    """The interval's half-width on a log scale: sqrt((t SE / speedup)^2 + (z run_error)^2); the prompts' term is
    absent where there is no standard error (one prompt, or an engine forecast that pools its prompts' counters)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    z = stats.norm.ppf((1 + level) / 2)
    prompts_term = 0.0
    if standard_error is not None:
        as_int("prompts", prompts, low=2, high=1_000_000)  # a standard error over prompts needs their number
        prompts_term = stats.t.ppf((1 + level) / 2, prompts - 1) * standard_error / speedup
    return math.hypot(prompts_term, z * run_error)


def forecast_interval(
    speedup: float,
    standard_error: float | None = None,
    prompts: int | None = None,
    *,
    level: float = 0.95,
    run_error: float = FORECAST_RUN_ERROR,
) -> list:
    """[low, high]: the ``level`` interval of a forecast ``speedup`` with ``standard_error`` over ``prompts``."""
    if not speedup > 0:
        raise ValueError(f"speedup must be positive, got {speedup!r}")
    half = log_half_width(speedup, standard_error, prompts, level=level, run_error=run_error)
    return [speedup * math.exp(-half), speedup * math.exp(half)]


def facing_half_width(value: float, interval: list, other: float) -> float:
    """The log half-width of ``value``'s ``interval`` on the side that faces ``other``."""
    return math.log(interval[1] / value) if other > value else math.log(value / interval[0])


def covers(forecast: float, interval: list, measured: float, measured_interval: list) -> bool:
    """Whether ``measured`` lies inside the forecast's ``interval`` combined with the measurement's own: |log
    forecast - log measured| <= sqrt(h_f^2 + h_m^2), each h the log half-width of its interval on the side that
    faces the other value (the difference of two independent estimates)."""
    return abs(math.log(forecast / measured)) <= math.hypot(
        facing_half_width(forecast, interval, measured), facing_half_width(measured, measured_interval, forecast)
    )


def leave_one_out(items: list) -> list:
    """The n lists ``items`` without one of its n entries each, in order; [] for fewer than two (the jackknife's
    samples: one prompt leaves nothing out)."""
    return [items[:i] + items[i + 1 :] for i in range(len(items))] if len(items) > 1 else []


def jackknife_error(left_out: list) -> float | None:
    """The jackknife standard error from the n leave-one-out values of an estimate, sqrt((n - 1)/n sum_i (x_i -
    mean)^2); None for fewer than two (one prompt leaves nothing out)."""
    n = len(left_out)
    if n < 2:
        return None
    mean = statistics.fmean(left_out)
    return math.sqrt((n - 1) / n * sum((x - mean) ** 2 for x in left_out))
