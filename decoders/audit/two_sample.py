"""Two samplers against each other, with no model of ours (docs/engines.md §3).

Two files of continuations of one prompt, ``a: [n_a, T]`` and ``b: [n_b, T]`` token ids (e.g. an engine with
speculation on and the same engine with it off), come from the same law of the first T tokens or not. Per
position t = 1..T, two tests:

- the token at t, by Kolmogorov-Smirnov under one ordering of the tokens: by their pooled count at t,
  likeliest first, tokens of equal pooled count sharing one rank. The ranking is then a function of the
  pooled sample alone, so under the null every split of the pooled sample into the two sides is equally
  likely whatever the ranks are. Breaking ties by token id instead is not: where ids are numbered in order
  of first appearance in one sample (as ``decoders.audit.engines.sampled.as_categories`` once did), that sample's rare
  tokens rank before the other's, and on a 49k vocabulary, where most tokens after the first position are
  seen once or twice, the test failed an engine against itself every time (docs/engines.md §3). A
  temperature or filtering bug moves mass towards or away from the likeliest tokens, and there the two
  empirical CDFs differ by the total variation of the deviation;
- the prefix y_1..y_t, by a chi-square test of homogeneity over the prefixes seen, pooling those expected
  fewer than ``MIN_EXPECTED`` times in either sample into one cell: it sees dependence between positions
  (a joint law that differs while every position's marginal agrees), where prefixes repeat often enough.

The two tests are registered (``decoders.audit.battery``), and their 2T p-values combined by Bonferroni. Ties make the
KS p-value conservative (the statistic over tied ranks is at most the one over any order that breaks the ties at random,
whose null law is the continuous one), so the test's false-positive rate is at most its level;
``tests/decoders/audit/test_two_sample.py`` measures it over 100 splits each of real llama.cpp samples of SmolLM2 and of
a 49k-token Zipf stand-in.

Power: ``detectable_tv`` is the per-position total variation, contiguous in the frequency ordering, that
the KS test detects with probability >= 90%: the asymptotic KS critical value at level / (2T) plus 1.2816
times the largest standard deviation of a difference of two empirical CDFs, sqrt(1/n_a + 1/n_b) / 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from decoders.audit.battery import (
    TWO_SAMPLE,
    AuditTest,
    BatteryOutcome,
    bonferroni,
    power_line,
    register_audit_test,
    run_battery,
)
from decoders.audit.statistical import MIN_EXPECTED, POWER_Z
from plumbing.validation import as_real

__all__ = ["TwoSampleReport", "two_sample_test", "detectable_tv_two_sample"]


@dataclass(frozen=True)
class TwoSampleReport:
    """Per position: the KS p-value of the token and the chi-square p-value of the prefix; Bonferroni's
    combination; the detectable total variation (module docstring)."""

    n_a: int
    n_b: int
    horizon: int
    level: float
    token_p: tuple  # [T]
    prefix_p: tuple  # [T]
    prefix_cells: tuple  # [T], cells of each chi-square test after pooling
    p_value: float
    detectable_tv: float
    battery: tuple = ()  # every test's ``decoders.audit.battery.BatteryOutcome``, in the order run

    @property
    def passed(self) -> bool:
        return self.p_value >= self.level

    def summary(self) -> str:
        """The printed verdict, from the battery's outcomes: each test's p-value, the combination, the power."""
        tests = ", ".join(f"{outcome.name} p {outcome.p_value:.3g}" for outcome in self.battery)
        return (
            f"two-sample ({tests}; Bonferroni over {sum(outcome.share for outcome in self.battery)}): "
            f"p = {self.p_value:.3g}, detects with 90% power {power_line(self.battery)} at n = {self.n_a} + "
            f"{self.n_b}: {'PASS' if self.passed else 'FAIL'}"
        )

    def as_dict(self) -> dict:
        return {
            "test": "two-sample",
            "n_a": self.n_a,
            "n_b": self.n_b,
            "horizon": self.horizon,
            "level": self.level,
            "token_p": list(self.token_p),
            "prefix_p": list(self.prefix_p),
            "prefix_cells": list(self.prefix_cells),
            "p_value": self.p_value,
            "detectable_tv": self.detectable_tv,
            "passed": self.passed,
            "battery": [outcome.as_dict() for outcome in self.battery],
        }


def detectable_tv_two_sample(n_a: int, n_b: int, tests: int, level: float) -> float:
    """The per-position total variation detected with 90% power (module docstring)."""
    spread = math.sqrt(1 / n_a + 1 / n_b)
    critical = math.sqrt(-math.log(level / tests / 2) / 2) * spread
    return critical + POWER_Z * spread / 2


def _ks_by_pooled_frequency(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(KS distance, p-value) of tokens ``a: [n_a]`` against ``b: [n_b]``, tokens ranked by pooled count, likeliest
    first; tokens of one pooled count share one rank (module docstring)."""
    tokens, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    rank = -counts  # [K]: a function of the pooled sample only, whatever the ids are
    result = stats.ks_2samp(rank[np.searchsorted(tokens, a)], rank[np.searchsorted(tokens, b)], method="asymp")
    return float(result.statistic), float(result.pvalue)


def _prefix_homogeneity(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Chi-square p-value of prefixes ``a: [n_a, t]`` against ``b: [n_b, t]`` and its number of cells; rare
    prefixes pooled into one cell, which is dropped when it alone stays rare."""
    both = np.concatenate([a, b])
    _, cell = np.unique(both, axis=0, return_inverse=True)
    cell = cell.ravel()
    table = np.stack(
        [np.bincount(cell[: len(a)], minlength=cell.max() + 1), np.bincount(cell[len(a) :], minlength=cell.max() + 1)]
    )  # [2, K]
    share = np.array([len(a), len(b)]) / len(both)
    expected_min = table.sum(axis=0) * share.min()
    common, rare = table[:, expected_min >= MIN_EXPECTED], table[:, expected_min < MIN_EXPECTED].sum(axis=1)
    if rare.sum() * share.min() >= MIN_EXPECTED:
        common = np.concatenate([common, rare[:, None]], axis=1)
    if common.shape[1] < 2:
        return 1.0, int(common.shape[1])
    return float(stats.chi2_contingency(common, correction=False).pvalue), int(common.shape[1])


def two_sample_test(a, b, level: float = 0.01) -> TwoSampleReport:
    """Whether continuations ``a: [n_a, T]`` and ``b: [n_b, T]`` (token ids) share one law (module docstring);
    a ValueError names what does not fit."""
    level = float(as_real("level", level, low=0.0, high=0.5, low_open=True))
    a, b = np.asarray(a), np.asarray(b)
    for name, sample in (("a", a), ("b", b)):
        if (
            sample.ndim != 2
            or sample.shape[0] < 2
            or sample.shape[1] < 1
            or not np.issubdtype(sample.dtype, np.integer)
        ):
            raise ValueError(
                f"sample {name} must be token ids of shape [n >= 2, horizon >= 1], got shape "
                f"{list(sample.shape)} of {sample.dtype}"
            )
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the two samples must have one horizon, got {a.shape[1]} and {b.shape[1]} tokens per row")
    outcomes = run_battery(TWO_SAMPLE, TwoSamples(a, b, level))
    p_value, tests = bonferroni(outcomes)
    found = {outcome.name: outcome for outcome in outcomes}
    return TwoSampleReport(
        len(a),
        len(b),
        a.shape[1],
        level,
        found["token"].p_values,
        found["prefix"].p_values,
        found["prefix"].details["cells"],
        p_value,
        found["token"].detectable,
        outcomes,
    )


@dataclass(frozen=True)
class TwoSamples:
    """What the two-sample battery's tests read: continuations ``a: [n_a, T]`` and ``b: [n_b, T]``, and the level."""

    a: np.ndarray
    b: np.ndarray
    level: float


def _tokens(samples: TwoSamples, order: None) -> BatteryOutcome:
    """Per position, the token by KS under the pooled-frequency ordering (module docstring); the statistic is the
    largest distance."""
    found = [_ks_by_pooled_frequency(samples.a[:, t], samples.b[:, t]) for t in range(samples.a.shape[1])]
    return BatteryOutcome("token", max(distance for distance, _ in found), tuple(p for _, p in found))


def _prefixes(samples: TwoSamples, order: None) -> BatteryOutcome:
    """Per position, the prefix by chi-square homogeneity (module docstring); the statistic is the cells tested."""
    found = [_prefix_homogeneity(samples.a[:, : t + 1], samples.b[:, : t + 1]) for t in range(samples.a.shape[1])]
    cells = tuple(count for _, count in found)
    return BatteryOutcome("prefix", float(sum(cells)), tuple(p for p, _ in found), details={"cells": cells})


for _test in (
    AuditTest(
        "token",
        TWO_SAMPLE,
        _tokens,
        "each position's token, KS by pooled frequency",
        power="a per-position TV",
        detectable=lambda s, tests: detectable_tv_two_sample(len(s.a), len(s.b), tests, s.level),
    ),
    AuditTest("prefix", TWO_SAMPLE, _prefixes, "each prefix, chi-square homogeneity over the prefixes seen"),
):
    register_audit_test(_test)
