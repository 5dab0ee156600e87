"""What a measured cost profile must satisfy on any machine, checked before a forecast from it is printed
(docs/forecasts.md, "Checks before a forecast").

A forecast divides costs timed in one minute of the machine; if the load changed while they were timed, the ratios
it divides are not the machine's. Each check below is a relation that holds whatever the machine, so a profile that
breaks one measured the load, not the pair:

* ``step``: a verify call on one position *is* a decoding step (the same call and sampling), so t_verify(1) / t_step
  lies within ``STEP_BAND``;
* ``widths``: a call's cost does not jump or dip between neighbouring widths beyond the kernels' own steps: each
  width's cost within ``WIDTH_BAND`` of its neighbours' mean;
* ``floor``: no width's call below the width-1 call by more than ``STEP_BAND`` (more positions cost at least one);
* ``spread``: the repeats agree: (max - min) / median over repeats of t_step, and the median of the same over the
  widths, at most ``SPREAD_LIMIT``;
* ``tokens``: an iteration at gamma yields between 1 and gamma + 1 tokens;
* ``ceiling``: the forecast at gamma is at most max_k k t_step / t_verify(k) over the widths k <= gamma + 1 it
  verifies (and at least 1 there), the speedup of accepting every draft for free;
* ``sweep`` (once a sweep has run beside the forecast): the forecast's t_step within ``SWEEP_BAND`` of the sweep's own
  profile's: the machine the forecast was timed on is the one the sweep measured. It decides whether the forecast is
  shown, never its value.

The bands come from the profiles committed under results/, measured on quiet machines (docs/forecasts.md has the
table; ``test_quiet_profiles_pass_against_committed`` holds that at least 95% of them pass): t_verify(1) / t_step
0.76-1.40 (band 1.4; issue 97's loaded runs gave 0.12 and 1.54), a width's cost 0.72-1.36 of its neighbours' mean
(band 1.6; a loaded run gave 2.0), the cheapest width at least 0.73 of the width-1 call, spreads up to 0.68 for one
width (limit 1.0, on the median over widths), the forecast's t_step 1.04-1.23 of the sweep's (band 1.5; a loaded run
gave 4.4).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

__all__ = [
    "STEP_BAND",
    "WIDTH_BAND",
    "SPREAD_LIMIT",
    "SWEEP_BAND",
    "Check",
    "CostChecks",
    "step_check",
    "width_check",
    "floor_check",
    "spread_check",
    "tokens_check",
    "ceiling_check",
    "sweep_check",
    "check_costs",
]

STEP_BAND = 1.4  # t_verify(1) / t_step within [1 / 1.4, 1.4]
WIDTH_BAND = 1.6  # a width's call within [1 / 1.6, 1.6] of its neighbours' mean
SPREAD_LIMIT = 1.0  # (max - min) / median over repeats
SWEEP_BAND = 1.5  # the forecast's t_step within [1 / 1.5, 1.5] of the sweep's
_ROUNDOFF = 1e-9


@dataclass(frozen=True)
class Check:
    """One relation checked: its ``name``, the ``value`` measured (the worst where several are), the bounds it must
    lie in, and ``words``: what was measured, in one clause."""

    name: str
    value: float
    low: float
    high: float | None  # None: no upper bound
    words: str

    @property
    def passed(self) -> bool:
        return self.low - _ROUNDOFF <= self.value and (self.high is None or self.value <= self.high + _ROUNDOFF)

    def as_dict(self) -> dict:
        return dict(asdict(self), passed=self.passed)

    @classmethod
    def from_dict(cls, entries: dict) -> "Check":
        return cls(**{key: entries[key] for key in ("name", "value", "low", "high", "words")})


@dataclass(frozen=True)
class CostChecks:
    """The checks of one forecast's costs; ``passed`` when all hold."""

    checks: tuple

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> tuple:
        return tuple(check for check in self.checks if not check.passed)

    def __add__(self, other: "CostChecks") -> "CostChecks":
        return CostChecks(self.checks + other.checks)

    def line(self, what: str = "forecast") -> str:
        """One line: which measurement moved and by how much, and what to do; '' when every check passed."""
        if self.passed:
            return ""
        first, more = self.failed[0], len(self.failed) - 1
        others = f"; {more} more check{'s' if more > 1 else ''} failed" if more else ""
        return (
            f"{what} withheld: {first.words}{others}: the machine's load moved while the costs were timed; rerun "
            f"with nothing else running"
        )

    def as_dict(self) -> dict:
        return {"passed": self.passed, "checks": [check.as_dict() for check in self.checks]}

    @classmethod
    def from_dict(cls, entries: dict) -> "CostChecks":
        return cls(tuple(Check.from_dict(check) for check in entries["checks"]))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def step_check(t_step: float, t_verify: tuple) -> Check:
    """t_verify(1) / t_step within ``STEP_BAND``."""
    ratio = t_verify[0] / t_step
    return Check(
        "step",
        ratio,
        1 / STEP_BAND,
        STEP_BAND,
        f"a width-1 verify call took {ratio:.2f} t_step ({_ms(t_verify[0])} against {_ms(t_step)}; it is one "
        "decoding step)",
    )


def width_check(t_verify: tuple) -> Check:
    """The width whose call lies furthest (on a log scale) from its neighbours' mean: within ``WIDTH_BAND``."""
    ratios = {
        k: t_verify[k - 1] / statistics.fmean([t_verify[j - 1] for j in (k - 1, k + 1) if j <= len(t_verify)])
        for k in range(2, len(t_verify) + 1)
    }
    k = max(ratios, key=lambda width: abs(math.log(ratios[width])))
    return Check(
        "widths",
        ratios[k],
        1 / WIDTH_BAND,
        WIDTH_BAND,
        f"the verify call at width {k} took {ratios[k]:.2f} times its neighbours' mean ({_ms(t_verify[k - 1])})",
    )


def floor_check(t_verify: tuple) -> Check:
    """The cheapest call over the width-1 call: more positions cost at least one, within ``STEP_BAND``."""
    k = min(range(1, len(t_verify) + 1), key=lambda width: t_verify[width - 1])
    ratio = t_verify[k - 1] / t_verify[0]
    return Check(
        "floor",
        ratio,
        1 / STEP_BAND,
        None,
        f"the verify call at width {k} took {ratio:.2f} times the width-1 call ({_ms(t_verify[k - 1])} against "
        f"{_ms(t_verify[0])}; more positions cost at least one)",
    )


def spread_check(spread: dict) -> Check:
    """The larger of t_step's relative spread over repeats and the median of the verify widths': at most
    ``SPREAD_LIMIT``. ``spread``: {component: [min, median, max]} (``decoders.bench.profile``'s; either may be
    absent)."""

    def relative(name):
        low, median, high = spread[name]
        return (high - low) / median if median > 0 else 0.0

    widths = [relative(name) for name in spread if name.startswith("t_verify_")]
    step = relative("t_step") if "t_step" in spread else 0.0
    verify = statistics.median(widths) if widths else 0.0
    name, value = ("t_step", step) if step >= verify else ("the verify calls (median over widths)", verify)
    return Check(
        "spread",
        value,
        0.0,
        SPREAD_LIMIT,
        f"the repeats of {name} spread over {value:.0%} of their median",
    )


def tokens_check(tokens: dict) -> Check:
    """Tokens per iteration at every gamma in [1, gamma + 1]; ``tokens``: {gamma: tokens per iteration}. The value
    is the largest tokens / (gamma + 1), or the smallest tokens where one is below 1."""
    low = min(tokens, key=tokens.get)
    if tokens[low] < 1:
        return Check("tokens", tokens[low], 1.0, None, f"gamma {low} yields {tokens[low]:.3f} tokens a call")
    gamma = max(tokens, key=lambda g: tokens[g] / (g + 1))
    share = tokens[gamma] / (gamma + 1)
    return Check(
        "tokens", share, 0.0, 1.0, f"gamma {gamma} yields {tokens[gamma]:.3f} tokens a call, at most {gamma + 1}"
    )


def ceiling_check(speedups: dict, t_step: float, t_verify: tuple) -> Check:
    """Each forecast speedup over its ceiling max(1, max_k k t_step / t_verify(k), k <= gamma + 1): at most 1;
    ``speedups``: {gamma: forecast speedup}."""

    def ceiling(gamma):
        return max([1.0] + [k * t_step / t_verify[k - 1] for k in range(1, min(gamma + 1, len(t_verify)) + 1)])

    gamma = max(speedups, key=lambda g: speedups[g] / ceiling(g))
    share = speedups[gamma] / ceiling(gamma)
    return Check(
        "ceiling",
        share,
        0.0,
        1.0,
        f"the forecast at gamma {gamma} ({speedups[gamma]:.3f}x) is {share:.2f} times what accepting every draft for "
        f"free would give ({ceiling(gamma):.3f}x)",
    )


def sweep_check(t_step: float, sweep_t_step: float) -> Check:
    """The forecast's t_step over the sweep's own profile's: within ``SWEEP_BAND``."""
    ratio = t_step / sweep_t_step
    return Check(
        "sweep",
        ratio,
        1 / SWEEP_BAND,
        SWEEP_BAND,
        f"the forecast's decoding step took {ratio:.2f} times the sweep's ({_ms(t_step)} against {_ms(sweep_t_step)})",
    )


def check_costs(
    t_step: float, t_verify, *, spread: dict | None = None, tokens: dict | None = None, speedups: dict | None = None
) -> CostChecks:
    """Every check that the given measurements allow: ``step``, ``widths`` and ``floor`` from t_step and t_verify(k)
    (seconds, k = 1..), ``spread`` from {component: [min, median, max]}, ``tokens`` from {gamma: tokens per
    iteration}, ``ceiling`` from {gamma: forecast speedup}."""
    t_verify = tuple(float(t) for t in t_verify)
    if not t_step > 0 or not t_verify or not all(t > 0 for t in t_verify):
        raise ValueError(f"cost checks need positive t_step and t_verify, got {t_step!r} and {list(t_verify)}")
    checks = [step_check(t_step, t_verify)]
    if len(t_verify) > 1:
        checks += [width_check(t_verify), floor_check(t_verify)]
    if spread:
        checks.append(spread_check(spread))
    if tokens:
        checks.append(tokens_check(tokens))
    if speedups:
        checks.append(ceiling_check(speedups, t_step, t_verify))
    return CostChecks(tuple(checks))
