"""Goodput under concurrency (spectheory/goodput.py, docs/theory-goodput.md §16) against its sympy twin's crossover,
against §10's calibrated speedup at batch 1, against an exhaustive search over gamma, and against the simulator
(sims/goodput.py)."""

import numpy as np
import pytest
import sympy as sp

from sims.goodput import simulate_goodput
from spectheory import symbolic
from spectheory.costs import affine_speedup
from spectheory.goodput import (
    GoodputCosts,
    ServerCosts,
    affine_calls,
    affine_crossover,
    affine_goodput_speedup,
    batched_iterations,
    crossover_batch,
    fit_server_costs,
    fixed_count_seconds,
    fixed_count_speedups,
    goodput_gamma,
    goodput_schedule,
    goodput_speedup,
    measured_calls,
    scaled_draft,
)

#: A 2-core CPU's passes as SmolLM2-135M makes them, roughly: 4 ms a pass, 0.25 ms more a token; a draft step a
#: tenth of it. Compute-bound early: speculation stops paying at a modest batch.
PASS = (4e-3, 2.5e-4)
DRAFT = (4e-4, 2.5e-5)


def test_crossover_against_its_derivation():
    """Solving S(B, gamma) = 1 for B gives ``CROSSOVER_BATCH``."""
    (root,) = sp.solve(sp.Eq(symbolic.GOODPUT_SPEEDUP, 1), symbolic.batch)
    assert sp.simplify(root - symbolic.CROSSOVER_BATCH) == 0


@pytest.mark.parametrize("alpha, gamma", [(0.6, 2), (0.8, 4), (0.9, 6)])
def test_affine_crossover_against_the_speedup(alpha, gamma):
    """Below B* the speedup is above 1, above it below 1, and at B* it is 1 (continuous in B)."""
    crossing = affine_crossover(alpha, gamma, PASS, DRAFT, 1e-4)
    assert crossing is not None and crossing > 1
    costs = GoodputCosts(affine_calls(*PASS), affine_calls(*DRAFT), 1e-4)
    below, above = int(np.floor(crossing)), int(np.ceil(crossing)) + (crossing == np.ceil(crossing))
    assert goodput_speedup(alpha, gamma, below, costs) > 1 > goodput_speedup(alpha, gamma, above, costs)
    exact = symbolic.GOODPUT_SPEEDUP.subs(
        {
            symbolic.alpha: alpha,
            symbolic.gamma: gamma,
            symbolic.batch: crossing,
            symbolic.pass_intercept: PASS[0],
            symbolic.pass_slope: PASS[1],
            symbolic.draft_intercept: DRAFT[0],
            symbolic.draft_slope: DRAFT[1],
            symbolic.t_iteration: 1e-4,
        }
    )
    assert float(exact) == pytest.approx(1.0, rel=1e-12)


def test_batch_one_against_the_calibrated_speedup():
    """At batch 1 the goodput speedup is docs/theory.md §10's, t_step the pass of one token."""
    for alpha, gamma in [(0.5, 1), (0.8, 4), (0.95, 9)]:
        ours = affine_goodput_speedup(alpha, gamma, 1, *PASS, DRAFT[0] + DRAFT[1], 0.0, 3e-4)
        theirs = affine_speedup(alpha, gamma, PASS[0] + PASS[1], DRAFT[0] + DRAFT[1], PASS[0], PASS[1], 3e-4)
        assert ours == pytest.approx(float(theirs), rel=1e-12)


def test_schedule_against_an_exhaustive_search():
    """Per batch size the schedule's gamma is the best of every gamma 1..16 and plain decoding (ties to the smaller),
    on measured passes (calls at 1..640 tokens) with the draft scaled like them; the gamma falls as the
    batch grows and the crossover is the first batch that does not speculate. Control: the batch-1 answer (the cost
    model without the batch) speculates where the batch does not."""
    tokens = np.arange(1, 641)
    calls = measured_calls(PASS[0] + PASS[1] * tokens)
    costs = GoodputCosts(calls, scaled_draft(4.25e-4, calls), 1e-4)
    schedule = goodput_schedule(0.8, (1, 2, 4, 8, 16, 32, 64), costs, gamma_max=9)
    for choice in schedule:
        searched = {0: 1.0} | {g: goodput_speedup(0.8, g, choice.batch, costs) for g in range(1, 10)}
        best = max(searched.values())
        assert choice.gamma == min(g for g, s in searched.items() if s == best)
        assert choice.speedup == best
    gammas = [choice.gamma for choice in schedule]
    assert gammas == sorted(gammas, reverse=True) and gammas[0] > 0 and gammas[-1] == 0, gammas
    assert crossover_batch(schedule) == next(choice.batch for choice in schedule if choice.gamma == 0)
    at_one = goodput_gamma(0.8, 1, costs, gamma_max=9)  # the batch-1 answer, reused at every batch
    assert at_one.gamma > 0 and at_one.gamma != gammas[-1]


def test_measured_calls_refuse_a_pass_they_did_not_measure():
    with pytest.raises(ValueError, match=r"outside the measured t_verify\(1..9\): measure wider calls"):
        measured_calls([1.0] * 9)(10)


@pytest.mark.parametrize("alpha, gamma, batch", [(0.5, 2, 1), (0.8, 4, 4), (0.9, 3, 16), (0.7, 6, 8)])
def test_simulated_goodput_against_theory(alpha, gamma, batch):
    """The simulator's goodput speedup (20,000 iterations, requests of 100,000 tokens) within 4 standard errors of the
    closed form (false-failure probability per case 6e-5, seeded). Negative control: the batch-1 closed form (passes
    priced at one request's tokens) is far outside at batch 16."""
    costs = GoodputCosts(affine_calls(*PASS), affine_calls(*DRAFT), 1e-4)
    estimate = simulate_goodput(
        np.random.default_rng([int(alpha * 100), gamma, batch]),
        alpha,
        gamma,
        batch,
        costs,
        iterations=20_000,
        length=100_000,
    )
    assert abs(estimate.z_score(goodput_speedup(alpha, gamma, batch, costs))) < 4
    if batch == 16:
        assert abs(estimate.z_score(goodput_speedup(alpha, gamma, 1, costs))) > 20


def test_fit_server_costs_recovers_the_costs_it_priced_against_theory():
    """Runs priced by ``fixed_count_seconds`` at known costs give those costs back (a prefill's token from the
    seconds to the first token at concurrency 1, the plain steps, a round's own seconds at each concurrency)."""
    truth = ServerCosts({1: 0.044, 4: 0.056}, 2e-4, {1: 0.025, 4: 0.04})
    prompts, rounds, tokens = [12, 40, 7, 90], [5, 7, 9, 3], 10
    first = [truth.iteration(1, n - 1, speculative=False) for n in prompts]
    plain = {c: fixed_count_seconds(truth, [tokens] * 4, prompts, c) for c in (1, 4)}
    speculative = [
        (c, rounds, 1.5, fixed_count_seconds(truth, [1 + r for r in rounds], prompts, c, 1.5)) for c in (1, 4)
    ]
    fitted = fit_server_costs(prompts, first, tokens, plain, speculative)
    assert fitted.token_seconds == pytest.approx(2e-4)
    assert fitted.plain_step == pytest.approx({1: 0.044, 4: 0.056})
    assert fitted.round_step == pytest.approx({1: 0.025, 4: 0.04})


def test_fit_server_costs_solves_a_round_that_is_not_affine_in_rising_concurrency_against_theory():
    """Three runs whose iterations of fewer rows than slots fall between the concurrencies already solved: a round of
    10, 30 and 35 ms at 1, 2 and 4 rows comes back exactly, and a run made faster than its passes is read as 0."""
    truth = ServerCosts({1: 0.05, 2: 0.06, 4: 0.07}, 1e-4, {1: 0.010, 2: 0.030, 4: 0.035})
    prompts, rounds, tokens = [9, 30, 14, 50, 21], [9, 4, 12, 6, 2], 8
    plain = {c: fixed_count_seconds(truth, [tokens] * 5, prompts, c) for c in (1, 2, 4)}
    speculative = [
        (c, rounds, 2.0, fixed_count_seconds(truth, [1 + r for r in rounds], prompts, c, 2.0)) for c in (4, 1, 2)
    ]
    first = [truth.iteration(1, n - 1, speculative=False) for n in prompts]
    assert fit_server_costs(prompts, first, tokens, plain, speculative).round_step == pytest.approx(
        {1: 0.010, 2: 0.030, 4: 0.035}
    )
    faster = [(c, r, d, seconds * 0.5 if c == 2 else seconds) for c, r, d, seconds in speculative]
    assert fit_server_costs(prompts, first, tokens, plain, faster).round_step[2] == 0.0
    with pytest.raises(ValueError, match="runs must be at distinct concurrencies"):
        fit_server_costs(prompts, first, tokens, plain, speculative + speculative[:1])


def test_fixed_count_speedups_of_a_round_that_emits_one_token_cost_more_than_plain_against_theory():
    costs = ServerCosts({1: 0.05}, 0.0, {1: 0.01})
    speedups, plain = fixed_count_speedups(costs, [31] * 4, 0.0, [8] * 4, 32, [1])
    assert speedups[1] == pytest.approx(32 * 0.05 / (32 * 0.06))
    assert plain[1] == pytest.approx(1 / 0.05)


def test_batched_iterations_refill_a_slot_in_the_next_iteration_against_theory():
    assert batched_iterations([3, 1, 2], 2) == [(0, 1), (0, 2), (0, 2)]
    assert len(batched_iterations([64] * 16, 16)) == 64  # as many requests as slots: the slowest's length
    assert len(batched_iterations([64] * 16, 4)) == 256  # four waves
    assert len(batched_iterations([10, 60, 10, 10], 4)) == 60  # the slowest request sets a single wave's length
