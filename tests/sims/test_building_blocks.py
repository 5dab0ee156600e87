"""The simulators' building blocks: draws, estimates, families, timelines, policies, input errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_checks import CHI_SQUARE_LEVEL, assert_within_band, chi_square_p_value
from strategies import seeds

from sims._draws import RowSampler, categorical, leading_true_count
from sims._stats import Moments, as_generator, mean_estimate, ratio_estimate
from sims.acceptance import simulate_iid, simulate_markov
from sims.families import (
    FAMILIES,
    Contexts,
    contexts_with_alpha,
    dirichlet_pairs,
    family_contexts,
    mix_to_acceptance,
    zipf_pairs,
)
from sims.policies import (
    HEURISTIC_START,
    compare_policies,
    confidence_threshold,
    draw_positions,
    fixed_gamma,
    heuristic,
    oracle,
    policy_gain_grid,
    rejection_threshold,
)
from sims.throughput import loop_iid, loop_token_level
from sims.timeline import autoregressive_timeline, speculative_timeline
from sims.token_level import simulate_speculative
from spectheory.acceptance import acceptance_probability
from spectheory.positional import MarkovAcceptance


@given(
    st.lists(st.lists(st.booleans(), min_size=0, max_size=6), min_size=1, max_size=5).filter(
        lambda rows: len({len(row) for row in rows}) == 1
    )
)
def test_leading_true_count_against_python(rows):
    expected = [next((i for i, value in enumerate(row) if not value), len(row)) for row in rows]
    assert leading_true_count(np.array(rows, dtype=bool).reshape(len(rows), -1)).tolist() == expected


@pytest.mark.parametrize("sampler", ("guide table", "inverse cdf"))
def test_row_sampler_and_categorical_against_table(sampler):
    """Chi-square per row (false-positive rate <= 1e-4 over the rows, Bonferroni); zero entries never drawn."""
    table = np.array([[0.2, 0.0, 0.8, 0.0], [0.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 4, 200_000)
    tokens = RowSampler(table).draw(rng, rows) if sampler == "guide table" else categorical(rng, table[rows])
    for k in range(4):
        counts = np.bincount(tokens[rows == k], minlength=4)
        assert chi_square_p_value(counts, table[k]) >= CHI_SQUARE_LEVEL / 4, (k, counts)


def test_row_sampler_detects_a_wrong_table():
    rng = np.random.default_rng(3)
    tokens = RowSampler(np.array([[0.25, 0.25, 0.5]])).draw(rng, np.zeros(100_000, dtype=int))
    assert chi_square_p_value(np.bincount(tokens, minlength=3), [0.3, 0.2, 0.5]) < CHI_SQUARE_LEVEL


@given(seeds)
def test_row_sampler_never_draws_zero_probability_tokens(seed):
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(9, 0.3), size=5) * (rng.random((5, 9)) < 0.5)
    table[:, rng.integers(9)] += 0.1  # every row keeps some mass
    tokens = RowSampler(table).draw(rng, np.repeat(np.arange(5), 200))
    assert np.all(table[np.repeat(np.arange(5), 200), tokens] > 0)


def test_row_sampler_refuses_an_all_zero_row():
    with pytest.raises(ValueError, match="all-zero row"):
        RowSampler(np.array([[0.0, 0.0], [0.5, 0.5]])).draw(np.random.default_rng(0), np.array([0, 1]))


def test_mean_and_ratio_estimates_against_textbook_formulas():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    estimate = mean_estimate(x)
    assert estimate.mean == pytest.approx(3.5)
    assert estimate.standard_error == pytest.approx(np.std(x, ddof=1) / 2)
    y = np.array([1.0, 1.0, 2.0, 2.0])
    ratio = ratio_estimate(x, y)
    residual = x - ratio.mean * y
    assert ratio.mean == pytest.approx(14 / 6)
    assert ratio.standard_error == pytest.approx(np.std(residual, ddof=1) / np.sqrt(4) / 1.5)
    assert (Moments.of(x[:2], y[:2]) + Moments.of(x[2:], y[2:])).ratio() == ratio


def test_as_generator_refuses_seeds_and_legacy_state():
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        as_generator(42)
    with pytest.raises(ValueError, match="RandomState"):
        simulate_iid(np.random.RandomState(0), 0.5, 3, 10)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("alpha", (0.05, 0.5, 0.99))
def test_family_contexts_hit_requested_alpha(family, alpha):
    contexts = family_contexts(np.random.default_rng(1), family, 40, 20, alpha)
    assert contexts.alpha() == pytest.approx(alpha, abs=1e-9)


def test_mixture_contexts_vary_beta_around_alpha():
    contexts = contexts_with_alpha(np.random.default_rng(2), 50, 200, 0.7, spread=0.5)
    beta = contexts.beta()
    assert contexts.alpha() == pytest.approx(0.7, abs=1e-9)
    assert beta.std() > 0.1
    assert np.all(contexts_with_alpha(np.random.default_rng(2), 50, 20, 0.7, spread=0.0).beta() == pytest.approx(0.7))


@given(seeds, st.floats(0.0, 1.0))
def test_mix_to_acceptance_against_theorem_3_5(seed, fraction):
    rng = np.random.default_rng(seed)
    p, r = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    floor = 1 - 0.5 * np.abs(p - r).sum()
    beta = floor + fraction * (1 - floor)
    q = mix_to_acceptance(p, r, beta)
    assert float(acceptance_probability(p, q)) == pytest.approx(beta, abs=1e-12)


def test_mix_to_acceptance_names_unreachable_beta():
    p, r = np.array([0.5, 0.5]), np.array([0.6, 0.4])
    with pytest.raises(ValueError, match=r"beta must be at least 1 - TV\(p, r\) = 0.9 for this pair, got 0.5$"):
        mix_to_acceptance(p, r, 0.5)


def test_pair_families_have_the_requested_shape_and_knobs():
    rng = np.random.default_rng(4)
    p, q = dirichlet_pairs(rng, 30, 5, agreement=1e6)
    assert p.shape == q.shape == (5, 30) and np.all(acceptance_probability(p, q) > 0.99)
    p, q = zipf_pairs(rng, 30, 5, perturbation=0.0)
    assert np.allclose(p, q)
    p, q = zipf_pairs(rng, 30, 5, draft_temperature=3.0, perturbation=0.0)
    assert np.all(acceptance_probability(p, q) < 0.99)
    with pytest.raises(ValueError, match="vocabulary must be a positive integer"):
        dirichlet_pairs(rng, 0, 5)


def test_contexts_validate_shapes():
    with pytest.raises(ValueError, match="weights shape"):
        Contexts(np.full((2, 3), 1 / 3), np.full((2, 3), 1 / 3), np.ones(3) / 3)
    with pytest.raises(ValueError, match="sum of q"):
        Contexts(np.full((2, 3), 1 / 3), np.full((2, 3), 0.5), np.ones(2) / 2)


def test_simulate_speculative_rejects_bad_arguments():
    contexts = Contexts.single([0.5, 0.5], [0.9, 0.1])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="gamma must be a positive integer"):
        simulate_speculative(rng, contexts, 0, 10)
    with pytest.raises(ValueError, match="lenience must be 1 with the block verifier"):
        simulate_speculative(rng, contexts, 2, 10, verifier="block", lenience=0.5)
    with pytest.raises(ValueError, match="verifier must be one of"):
        simulate_speculative(rng, contexts, 2, 10, verifier="tree")
    with pytest.raises(ValueError, match="schedule must be gamma \\+ 1 = 3"):
        simulate_speculative(rng, contexts, 2, 10, schedule=[0, 0])
    with pytest.raises(ValueError, match="lenience must be in"):
        simulate_speculative(rng, contexts, 2, 10, lenience=0.0)


def test_token_level_degenerate_pairs():
    """q = p accepts everything; a one-hot draft on a token p never emits is always rejected."""
    rng = np.random.default_rng(0)
    same = simulate_speculative(rng, Contexts.single([0.2, 0.8], [0.2, 0.8]), 4, 1000)
    assert np.all(same.accepted == 4)
    wrong = simulate_speculative(rng, Contexts.single([0.0, 1.0], [1.0, 0.0]), 4, 1000)
    assert np.all(wrong.accepted == 0) and np.all(wrong.tokens[:, 0] == 1)


def test_timelines_lay_out_figure_5():
    timeline = speculative_timeline([7, 2], gamma=7, c=0.05, target_encoder=1.0, draft_encoder=0.05)
    assert list(timeline.phase[:2]) == ["encode", "encode"]
    assert list(timeline.model[2:10]) == ["draft"] * 7 + ["target"]
    assert timeline.accepted[9] == 7 and timeline.accepted[-1] == 2 and timeline.tokens == 11
    assert timeline.total_time == pytest.approx(1.05 + 2 * (7 * 0.05 + 1))
    assert np.allclose(timeline.start[1:], timeline.start[:-1] + timeline.duration[:-1])
    baseline = autoregressive_timeline(11, target_encoder=1.0)
    assert baseline.total_time == pytest.approx(12.0) and set(baseline.phase[1:]) == {"decode"}
    with pytest.raises(ValueError, match="accepted must be"):
        speculative_timeline([8], gamma=7, c=0.0)


def test_policies_special_cases_equal_fixed_gamma():
    rng = np.random.default_rng(5)
    draws = draw_positions(rng, contexts_with_alpha(rng, 20, 16, 0.7), 5000, 12)
    full = fixed_gamma(draws, 12)
    assert np.array_equal(confidence_threshold(draws, 0.0).drafts, full.drafts)
    assert np.array_equal(rejection_threshold(draws, 1.0, cap=12).accepted, full.accepted)
    assert np.array_equal(
        confidence_threshold(draws, 1.0).drafts.ravel(), np.where(draws.confidence[:, 0] >= 1.0, 2, 1)
    )  # stops after the first token
    optimal = oracle(draws)
    assert np.array_equal(optimal.drafts, optimal.accepted)


def test_heuristic_follows_plus_two_minus_one_rule():
    rng = np.random.default_rng(6)
    run = heuristic(rng, contexts_with_alpha(rng, 20, 16, 0.8), 50, 30, 40)
    full = run.accepted == run.drafts  # [streams, iterations]
    before = run.drafts[:, :-1]
    expected_next = np.where(full[:, :-1], np.minimum(before + 2, 40), np.maximum(before - 1, 1))
    assert np.array_equal(run.drafts[:, 1:], expected_next)
    assert np.all(run.drafts[:, 0] == HEURISTIC_START)


def test_dynamic_policies_never_lose_to_best_fixed_gamma_by_construction():
    rng = np.random.default_rng(8)
    for comparison in compare_policies(rng, contexts_with_alpha(rng, 20, 32, 0.8), [0.0, 0.05], iterations=4000):
        gains = comparison.gains()
        assert gains["confidence"] >= 1 - 1e-12 and gains["rejection"] >= 1 - 1e-12
        assert gains["oracle"] >= 1 - 1e-12


def test_gain_grid_oracle_against_closed_form_gain():
    grid = policy_gain_grid(np.random.default_rng(9), [0.6, 0.9], [0.02, 0.1], iterations=20000)
    assert grid.oracle.shape == (2, 2)
    assert np.allclose(grid.oracle, grid.theory_oracle, rtol=0.03), (grid.oracle, grid.theory_oracle)
    assert set(grid.as_dict()) >= {"alphas", "cs", "oracle", "theory_oracle", "comparisons"}


def test_markov_simulation_validates_chain():
    with pytest.raises(ValueError, match="chain must be"):
        simulate_markov(np.random.default_rng(0), {"transition": [[1.0]]}, 3)
    run = simulate_markov(
        np.random.default_rng(0),
        MarkovAcceptance(np.ones((1, 1)), np.array([1.0])),
        3,
        streams=5,
        iterations_per_stream=4,
    )
    assert run.tokens_per_iteration().mean == 4.0 and run.accepted_distribution().tolist() == [0, 0, 0, 1]


def test_benchmark_loops_simulate_the_same_process():
    """The loop baselines of sims.throughput against the vectorised simulators: same mean within 4 SE."""
    rng = np.random.default_rng(10)
    contexts = contexts_with_alpha(rng, 100, 8, 0.7)
    looped = mean_estimate(loop_token_level(rng, contexts.p, contexts.q, contexts.weights, 3, 4000) + 1)
    vectorised = simulate_speculative(rng, contexts, 3, 100_000).tokens_per_iteration()
    assert_within_band(looped, vectorised.mean, loop="token level")
    looped = mean_estimate(loop_iid(rng, 0.7, 3, 20_000) + 1)
    assert_within_band(looped, simulate_iid(rng, 0.7, 3, 200_000).tokens_per_iteration().mean, loop="iid")
