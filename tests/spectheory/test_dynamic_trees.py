"""EAGLE-2's dynamic-tree forecast in closed form (docs/theory-trees.md §12): the calibration against a hand count and
against the sum it summarises, the harmonic mean of tokens per context against a simulated walk along a text."""

import numpy as np
import pytest

from sims.trees import simulate_walk_along
from spectheory.costs import forecast_speedup
from spectheory.dynamic_trees import (
    PathCalibration,
    calibrate_paths,
    expected_tokens_dynamic,
    replayed_tokens,
    tokens_per_context,
)


def test_calibration_against_a_hand_count():
    """Edges (-2, -1): confidences -3 and -2.5 fall in the first bin (mean of 0 and 1), none in the second (it
    borrows its nearest filled neighbour: the first, which comes first on a tie), -0.5 and -0.1 in the third."""
    calibration = calibrate_paths([[-3.0, -2.5], [-0.5, -0.1]], [[0.0, 1.0], [1.0, 0.5]], edges=(-2.0, -1.0))
    assert calibration == PathCalibration((-2.0, -1.0), (0.5, 0.5, 0.75), (2, 0, 2))
    assert calibration.predict([-np.inf, -1.5, 0.0]).tolist() == [0.5, 0.5, 0.75]


def test_calibration_on_its_own_nodes_against_the_sum_of_acceptances():
    """Over the nodes c was fitted on, the calibrated E_j add up to 1 + the measured acceptances per context exactly
    (a bin's mean times its count); per context they differ (the calibration pools contexts)."""
    rng = np.random.default_rng(0)
    confidence = np.log(rng.random((50, 6)))
    acceptance = rng.random((50, 6)) * np.exp(confidence)
    per_context = tokens_per_context(calibrate_paths(confidence, acceptance), confidence, budget=7)
    assert per_context.sum() == pytest.approx(50 + acceptance.sum(), rel=1e-12)
    assert not np.allclose(per_context, 1 + acceptance.sum(axis=1))


def test_budget_keeps_the_most_confident_nodes():
    """E_j(N) sums c over the N - 1 most confident nodes, in any order they are given."""
    calibration = PathCalibration((-2.0, -1.0), (0.1, 0.4, 0.9), (1, 1, 1))
    confidence = [[-3.0, -0.5, -1.5], [-1.5, -3.0, -0.5]]
    assert tokens_per_context(calibration, confidence, 2).tolist() == pytest.approx([1.9, 1.9])
    assert tokens_per_context(calibration, confidence, 3).tolist() == pytest.approx([2.3, 2.3])
    assert tokens_per_context(calibration, confidence, 9).tolist() == pytest.approx([2.4, 2.4])


def test_harmonic_mean_against_a_simulated_walk():
    """A text of 40 stretches of 100 positions, alternately easy and hard. Easy: three nodes accepted with 0.9, 0.8,
    0.5 along one path (law of the accepted count 0.1, 0.1, 0.3, 0.5: E_j = 3.2); hard: 0.25, 0.05, 0 (E_j = 1.3).
    The forecast from a calibration that gives those acceptances is within 1% of 200 seeded walks (1.849 against
    1.857 +- 0.001: the renewal argument is an approximation, off where a stretch ends mid-iteration); the arithmetic
    mean of E_j, the control, is 21% above."""
    easy, hard = [0.1, 0.1, 0.3, 0.5], [0.75, 0.2, 0.05, 0.0]
    laws = np.array([law for law in (easy, hard) * 20 for _ in range(100)])
    calibration = PathCalibration((-5.0, -4.0, -3.0, -2.0, -1.0), (0.0, 0.05, 0.25, 0.5, 0.8, 0.9), (1,) * 6)
    confidence = np.array([row for row in ([-0.5, -1.5, -2.5], [-3.5, -4.5, -5.5]) * 20 for _ in range(100)])
    per_context = tokens_per_context(calibration, confidence, budget=4)
    assert per_context == pytest.approx(1 + laws @ np.arange(4))
    simulated = simulate_walk_along(np.random.default_rng(1), laws, trials=200)
    forecast = expected_tokens_dynamic(calibration, confidence, budget=4)
    assert forecast == pytest.approx(1 / np.mean(1 / per_context))
    assert abs(forecast / simulated.mean - 1) < 0.01 and simulated.standard_error < 0.002, (simulated, forecast)
    assert per_context.mean() / simulated.mean > 1.2, (simulated, per_context.mean())


def test_expected_tokens_is_the_harmonic_mean_of_contexts():
    calibration = PathCalibration((-1.0,), (0.0, 1.0), (1, 1))
    assert expected_tokens_dynamic(calibration, [[0.0, 0.0, 0.0], [0.0, -2.0, -2.0]], 4) == pytest.approx(
        1 / (0.5 * (1 / 4 + 1 / 2))
    )


def test_replayed_tokens_against_a_walk_by_hand():
    """Text 1: start at 0 (2 accepted: 3 tokens), at 3 (0: 1), at 4 (1: 2 tokens, the text ends) -> 3 iterations;
    text 2: 0 (3: 4 tokens), 4 (0), 5 (0) -> 3 iterations; 12 tokens over 6 iterations."""
    assert replayed_tokens([[2, 5, 5, 0, 1, 9], [3, 0, 0, 0, 0, 0]]) == 2.0
    with pytest.raises(ValueError, match="accepted must be"):
        replayed_tokens([[0.5, 1]])


def test_speedup_against_a_hand_count():
    """64 tokens at E = 2 are 32 iterations of 3.125 ms: 400 ms of autoregression / 100 ms (the dynamic tree's forecast
    through the one forecast function, its iteration timed whole)."""
    assert forecast_speedup(2.0, 0.4 / 64, 0.0, 0.003125) == pytest.approx(4.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: calibrate_paths([[0.5]], [[0.5]]), "confidence must hold log-probabilities"),
        (lambda: calibrate_paths([[-1.0]], [[1.5]]), "acceptance must hold probabilities"),
        (lambda: calibrate_paths([[-1.0, -2.0]], [[0.5]]), "acceptance must have confidence's shape"),
        (lambda: calibrate_paths([-1.0], [0.5]), "confidence must be \\[contexts, nodes\\]"),
        (
            lambda: tokens_per_context(PathCalibration((), (1.0,), (1,)), [[-1.0]], 0),
            "budget must be a positive integer",
        ),
        (lambda: forecast_speedup(0.5, 1.0, 0.0, 1.0), "tokens_per_iteration must be"),
        (lambda: simulate_walk_along(np.random.default_rng(0), [[0.5, 0.4]], 10), "accepted_laws must be"),
    ],
)
def test_bad_input_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
