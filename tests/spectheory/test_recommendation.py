"""The recommendation rule (spectheory.recommendation, docs/measuring.md "The recommendation") on constructed
sweeps: each branch, and beside it the sweep that takes the other branch (no clock anywhere)."""

import pytest

from spectheory.recommendation import (
    FORECAST_WITHIN_NOISE,
    MEASURED_BEST,
    MODEL,
    NO_GAIN,
    from_model,
    from_sweep,
    recommendation_words,
)


def sweep(*measured, half: float = 0.05) -> list:
    """Rows of a measured sweep: (gamma, speedup), each with a 95% interval of +-``half``."""
    return [
        {"gamma": gamma, "speedup": speedup, "speedup_interval": [speedup - half, speedup + half]}
        for gamma, speedup in measured
    ]


def test_no_gamma_beyond_noise_against_the_same_sweep_lifted():
    """Every interval reaches 1 (the report's T = 1 of issue 83: 0.837-0.981 measured): do not speculate, with the
    best measured and its interval; the same sweep 0.1 higher pays."""
    below = sweep((1, 0.95), (2, 0.98), (6, 0.96))
    chosen = from_sweep(below, forecast_gamma=6)
    assert (chosen.gamma, chosen.rule, chosen.speedup, chosen.answer) == (0, NO_GAIN, 1.0, "do not speculate")
    assert "gamma 2 measured 0.980x, 95% interval 0.930-1.030" in chosen.reason
    lifted = from_sweep(sweep((1, 1.05), (2, 1.08), (6, 1.06)), forecast_gamma=6)
    assert lifted.gamma == 6 and lifted.rule == FORECAST_WITHIN_NOISE


def test_forecast_within_noise_against_apart():
    """The forecast's gamma stands while its interval meets the best's; moved below it, the best measured wins."""
    near = from_sweep(sweep((1, 1.20), (2, 1.40), (6, 1.37)), forecast_gamma=6)
    assert (near.gamma, near.rule, near.speedup) == (6, FORECAST_WITHIN_NOISE, 1.37)
    apart = from_sweep(sweep((1, 1.20), (2, 1.40), (6, 1.25)), forecast_gamma=6)
    assert (apart.gamma, apart.rule, apart.speedup) == (2, MEASURED_BEST, 1.40)
    assert "the forecast's gamma 6 measured 1.250x" in apart.reason and "below the best's" in apart.reason


def test_forecast_not_paying_against_paying():
    """A forecast's gamma within the best's noise that does not itself beat 1x is not recommended."""
    rows = sweep((1, 1.03), (2, 1.10), half=0.06)  # gamma 1: 0.97-1.09 meets gamma 2's 1.04-1.16
    chosen = from_sweep(rows, forecast_gamma=1)
    assert (chosen.gamma, chosen.rule) == (2, MEASURED_BEST) and "not above 1x" in chosen.reason
    assert from_sweep(rows, forecast_gamma=2).rule == FORECAST_WITHIN_NOISE


@pytest.mark.parametrize(
    "forecast_gamma, words",
    [(0, "the forecast's do not speculate"), (None, "no forecast"), (5, "the forecast's gamma 5 was not measured")],
)
def test_measured_best_against_a_forecast_it_cannot_use(forecast_gamma, words):
    chosen = from_sweep(sweep((1, 1.2), (2, 1.3)), forecast_gamma=forecast_gamma)
    assert (chosen.gamma, chosen.rule) == (2, MEASURED_BEST) and words in chosen.reason


def test_ties_against_the_smaller_gamma():
    """Equal measured speedups: the fewer draft tokens (spectheory.optimum's one tie rule)."""
    assert from_sweep(sweep((3, 1.2), (1, 1.2)), forecast_gamma=None).gamma == 1


def test_model_rule_against_gamma_zero():
    """Without a sweep gamma 0 (1x exactly) competes: it wins when nothing is predicted above 1x, and on a tie."""
    none = from_model({0: 1.0, 1: 0.91, 2: 0.95}, "the calibrated cost model")
    assert (none.gamma, none.rule, none.answer) == (0, MODEL, "do not speculate")
    assert "the best gamma 2 at 0.950x" in none.reason
    assert from_model({1: 1.3, 2: 1.25}).gamma == 1
    assert from_model({1: 1.0}).gamma == 0


def test_words_against_the_document():
    """The printed clause names the answer, the rule and its numbers, from the saved dict as from the object."""
    chosen = from_sweep(sweep((1, 0.9)), forecast_gamma=1)
    assert (
        recommendation_words(chosen.as_dict())
        == chosen.line()
        == f"do not speculate (rule: {NO_GAIN}; the best: gamma 1 measured 0.900x, 95% interval 0.850-0.950)"
    )


def test_sweep_without_rows_against_an_error():
    with pytest.raises(ValueError, match="from_model"):
        from_sweep([], 1)
