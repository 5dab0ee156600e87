"""The recommendation rule (docs/measuring.md, "The recommendation"): which gamma to run, gamma 0 ("do not
speculate") a candidate everywhere, and which rule decided.

* With a measured sweep (``from_sweep``; `spectheory report` and `bench`): a gamma *pays* when its measured 95%
  interval lies above 1 (plain decoding, exactly 1x). When none pays, the answer is gamma 0 with the sweep's best
  and its interval. Otherwise it is the best measured gamma that pays, unless the forecast's pick pays too and its
  interval meets the best's (the sweep cannot tell them apart): then the forecast's pick stands.
* Without one (``from_model``; `gamma --costs`, a forecast before its sweep): the model's best over gamma 0 and
  the gammas it prices, ties to the fewest draft tokens (``spectheory.optimum``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from spectheory.optimum import best_choice, best_gamma_row, row_value

__all__ = [
    "NO_GAIN",
    "MEASURED_BEST",
    "FORECAST_WITHIN_NOISE",
    "MODEL",
    "Recommendation",
    "from_sweep",
    "from_model",
    "recommendation_words",
]

#: The rules, as the lines and documents name them.
NO_GAIN = "no measured gamma beats plain decoding beyond its noise"
MEASURED_BEST = "the best measured gamma"
FORECAST_WITHIN_NOISE = "the forecast's gamma, within the sweep's noise of the best measured"
MODEL = "the model's best, no sweep measured"


@dataclass(frozen=True)
class Recommendation:
    """``gamma`` to run (0: do not speculate), the ``rule`` that chose it, its ``speedup`` (measured where a sweep
    was, else predicted) with its 95% ``interval`` (None where none is known; exactly 1 at gamma 0) and ``reason``,
    the numbers that decided in one clause."""

    gamma: int
    rule: str
    speedup: float
    interval: tuple | None
    reason: str

    @property
    def answer(self) -> str:
        return "do not speculate" if self.gamma == 0 else f"gamma {self.gamma}"

    def line(self) -> str:
        """The recommendation as one printed clause: the answer, then the rule and its numbers."""
        return recommendation_words(self.as_dict())

    def as_dict(self) -> dict:
        return dict(asdict(self), interval=None if self.interval is None else list(self.interval), answer=self.answer)

    @classmethod
    def from_dict(cls, saved: dict) -> Recommendation:
        """A recommendation as saved (``as_dict``): its answer is read from its gamma again."""
        interval = None if saved["interval"] is None else tuple(saved["interval"])
        return cls(saved["gamma"], saved["rule"], saved["speedup"], interval, saved["reason"])


def _measured(row) -> str:
    low, high = row_value(row, "speedup_interval")
    return (
        f"gamma {row_value(row, 'gamma')} measured {row_value(row, 'speedup'):.3f}x, 95% interval {low:.3f}-{high:.3f}"
    )


def _pays(row) -> bool:
    return row_value(row, "speedup_interval")[0] > 1.0


def _apart(row, best) -> bool:
    """Whether ``row``'s interval lies wholly below ``best``'s (the sweep tells them apart)."""
    return row_value(row, "speedup_interval")[1] < row_value(best, "speedup_interval")[0]


def from_sweep(rows: list, forecast_gamma: int | None = None) -> Recommendation:
    """The rule on a measured sweep: ``rows`` (typed or saved, ``spectheory.optimum.row_value``, with ``gamma`` >= 1,
    ``speedup`` over plain decoding and its ``speedup_interval`` [low, high]) and the forecast's pick
    ``forecast_gamma`` (0 for "do not speculate"; None: no forecast)."""
    if not rows:
        raise ValueError("from_sweep needs measured rows; without a sweep use from_model")
    paying = [row for row in rows if _pays(row)]
    if not paying:
        return Recommendation(0, NO_GAIN, 1.0, (1.0, 1.0), f"the best: {_measured(best_gamma_row(rows))}")
    best = best_gamma_row(paying)
    pick = next((row for row in rows if row_value(row, "gamma") == forecast_gamma), None)
    if pick is not None and _pays(pick) and not _apart(pick, best):
        reason = _measured(pick) + ("" if pick is best else f"; the best: {_measured(best)}")
        return Recommendation(
            forecast_gamma,
            FORECAST_WITHIN_NOISE,
            row_value(pick, "speedup"),
            tuple(row_value(pick, "speedup_interval")),
            reason,
        )
    if forecast_gamma is None:
        why = "no forecast"
    elif pick is None:
        why = (
            "the forecast's do not speculate"
            if forecast_gamma == 0
            else f"the forecast's gamma {forecast_gamma} was not measured"
        )
    else:
        why = f"the forecast's {_measured(pick)}: " + ("below the best's" if _pays(pick) else "not above 1x")
    interval = tuple(row_value(best, "speedup_interval"))
    return Recommendation(
        row_value(best, "gamma"), MEASURED_BEST, row_value(best, "speedup"), interval, f"{_measured(best)}; {why}"
    )


def from_model(speedups: dict, source: str = "the model") -> Recommendation:
    """The rule without a sweep: the best of ``speedups`` (gamma -> predicted speedup) and gamma 0 at 1x, ties to
    the smaller gamma; ``source`` names the prediction in the reason."""
    priced = [(gamma, value) for gamma, value in speedups.items() if gamma != 0]
    gamma, speedup = best_choice([(0, 1.0)] + priced, lambda c: c[1], lambda c: c[0])
    if gamma:
        reason = f"{source} predicts {speedup:.3f}x at gamma {gamma}"
    elif priced:
        runner_up = best_choice(priced, lambda c: c[1], lambda c: c[0])
        reason = f"{source} predicts no gamma above 1x, the best gamma {runner_up[0]} at {runner_up[1]:.3f}x"
    else:
        reason = f"{source} prices no gamma"
    return Recommendation(gamma, MODEL, speedup, (1.0, 1.0) if gamma == 0 else None, reason)


def recommendation_words(chosen: dict) -> str:
    """A recommendation as saved (``Recommendation.as_dict``), in words: the answer, the rule that decided and the
    numbers."""
    return f"{chosen['answer']} (rule: {chosen['rule']}; {chosen['reason']})"
