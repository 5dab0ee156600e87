"""Every closed form of spectheory against its simulator, within 4 standard errors on a seeded grid.

A correct simulator leaves the band with probability about 6.3e-5 per comparison (two-sided normal
tail), about 1e-2 over the roughly 150 comparisons here; the seeds are fixed, so results reproduce.
"""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from sim_checks import BAND, CHI_SQUARE_LEVEL, assert_within_band, chi_square_p_value

from sims.acceptance import simulate_iid, simulate_markov, simulate_positional
from sims.blockwise import conditional_accuracies, simulate_blockwise
from sims.families import FAMILIES, Contexts, contexts_with_alpha, family_contexts
from sims.policies import draw_positions, fixed_gamma, oracle
from sims.timeline import calibrated_walltime_speedup, speculative_timeline, walltime_speedup
from sims.token_level import simulate_rejection_sampling, simulate_speculative
from spectheory.acceptance import rejection_sampling_acceptance
from spectheory.block_verification import expected_accepted_tokens
from spectheory.blockwise import expected_block_size, model_calls
from spectheory.costs import CostProfile
from spectheory.positional import (
    MarkovAcceptance,
    accepted_count_distribution,
    expected_tokens_positional,
    markov_eq1_bias,
    markov_expected_tokens,
)
from spectheory.speedup import (
    expected_tokens,
    improvement_lower_bound,
    operations_factor,
    oracle_speedup,
    walltime_improvement,
)

ALPHAS = (0.1, 0.5, 0.8, 0.95, 0.99)
GAMMAS = (1, 3, 7, 15)
COSTS = (0.0, 0.05, 0.2)


@pytest.mark.parametrize("alpha, gamma", list(itertools.product(ALPHAS, GAMMAS)))
def test_iid_tokens_per_iteration_against_eq_1(alpha, gamma):
    rng = np.random.default_rng(1000 + GAMMAS.index(gamma))
    run = simulate_iid(rng, alpha, gamma, 200_000)
    assert_within_band(run.tokens_per_iteration(), expected_tokens(alpha, gamma), alpha=alpha, gamma=gamma)


def test_band_negative_control():
    """The 4-SE band has power: the simulation at alpha = 0.8 leaves it around Eq. 1 at alpha = 0.79."""
    run = simulate_iid(np.random.default_rng(1001), 0.8, 7, 200_000)
    with pytest.raises(AssertionError, match="z = "):
        assert_within_band(run.tokens_per_iteration(), expected_tokens(0.79, 7), alpha=0.79, gamma=7)


@pytest.mark.parametrize("alpha, gamma", list(itertools.product((0.3, 0.8, 0.97), (2, 6))))
def test_bernoulli_trials_against_eq_1_and_truncated_geometric(alpha, gamma):
    """Every trial drawn (simulate_positional with equal rates): mean and full law of the accepted count."""
    run = simulate_positional(np.random.default_rng(7), np.full(gamma, alpha), 200_000)
    assert_within_band(run.tokens_per_iteration(), expected_tokens(alpha, gamma), alpha=alpha, gamma=gamma)
    counts = np.bincount(run.accepted, minlength=gamma + 1)
    p_value = chi_square_p_value(counts, accepted_count_distribution(np.full(gamma, alpha)))
    assert p_value > CHI_SQUARE_LEVEL, f"accepted-count law: p = {p_value:.2e} at alpha={alpha}, gamma={gamma}"


def test_iid_inversion_against_truncated_geometric_law():
    for alpha, gamma in itertools.product((0.3, 0.8, 0.97), (2, 6)):
        run = simulate_iid(np.random.default_rng(11), alpha, gamma, 200_000)
        counts = np.bincount(run.accepted, minlength=gamma + 1)
        p_value = chi_square_p_value(counts, accepted_count_distribution(np.full(gamma, alpha)))
        assert p_value > CHI_SQUARE_LEVEL, f"p = {p_value:.2e} at alpha={alpha}, gamma={gamma}"


def test_truncated_geometric_negative_control():
    """The chi-square test has power: counts from alpha = 0.8 fail against the law at alpha = 0.79."""
    run = simulate_iid(np.random.default_rng(11), 0.8, 6, 200_000)
    counts = np.bincount(run.accepted, minlength=7)
    assert chi_square_p_value(counts, accepted_count_distribution(np.full(6, 0.79))) < CHI_SQUARE_LEVEL


@pytest.mark.parametrize("seed", range(6))
def test_positional_against_product_formula(seed):
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.3, 1.0, size=rng.integers(1, 9))
    run = simulate_positional(rng, rates, 200_000)
    assert_within_band(run.tokens_per_iteration(), expected_tokens_positional(rates), rates=rates.round(3).tolist())


@pytest.mark.parametrize("alpha, gamma, c", list(itertools.product((0.5, 0.8, 0.95), (1, 4, 10), COSTS)))
def test_timeline_speedup_against_theorem_3_8(alpha, gamma, c):
    accepted = simulate_iid(np.random.default_rng(21), alpha, gamma, 200_000).accepted.reshape(2000, 100)
    assert_within_band(
        walltime_speedup(accepted, gamma, c), walltime_improvement(alpha, gamma, c), alpha=alpha, gamma=gamma, c=c
    )


@pytest.mark.parametrize("alpha, c", [(0.5, 0.0), (0.7, 0.1), (0.9, 0.3), (0.6, 0.05)])
def test_timeline_at_gamma_1_against_corollary_3_9_bound(alpha, c):
    """At gamma = 1 the speedup is (1 + alpha)/(1 + c); the best gamma found by simulation is no worse."""
    rng = np.random.default_rng(31)
    speedups = {
        gamma: walltime_speedup(simulate_iid(rng, alpha, gamma, 100_000).accepted.reshape(1000, 100), gamma, c)
        for gamma in range(1, 9)
    }
    assert_within_band(speedups[1], improvement_lower_bound(alpha, c), alpha=alpha, c=c)
    best = max(speedups.values(), key=lambda estimate: estimate.mean)
    assert best.mean + BAND * best.standard_error >= float(improvement_lower_bound(alpha, c))


def test_timeline_total_time_equals_walltime_speedup_formula():
    accepted = np.array([[3, 0, 7, 2], [7, 7, 1, 0]])
    gamma, c, encoders = 7, 0.13, {"target_encoder": 2.0, "draft_encoder": 0.4}
    speculative = [speculative_timeline(row, gamma, c, **encoders) for row in accepted]
    tokens = [timeline.tokens for timeline in speculative]
    assert tokens == [16, 19]
    expected = (2 * 2.0 + sum(tokens)) / sum(timeline.total_time for timeline in speculative)
    assert walltime_speedup(accepted, gamma, c, **encoders).mean == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("alpha, gamma", [(0.3, 2), (0.7, 5), (0.9, 3)])
def test_token_level_against_eq_1_with_alpha_as_mean_beta(family, alpha, gamma):
    """Real tokens, beta varying from position to position: Eq. 1 at alpha = E[beta], and both alpha estimates."""
    rng = np.random.default_rng(41)
    contexts = family_contexts(rng, family, 50, 32, alpha)
    run = simulate_speculative(rng, contexts, gamma, 100_000)
    parameters = dict(family=family, alpha=contexts.alpha(), gamma=gamma)
    assert_within_band(run.tokens_per_iteration(), expected_tokens(contexts.alpha(), gamma), **parameters)
    assert_within_band(run.alpha_from_acceptances(), contexts.alpha(), estimator="acceptances", **parameters)
    assert_within_band(run.alpha_from_beta(), contexts.alpha(), estimator="beta", **parameters)
    assert run.target_calls == 100_000 and run.draft_calls == 100_000 * gamma


@pytest.mark.parametrize("alpha, gamma, c_hat", [(0.6, 2, 0.0), (0.8, 5, 0.1), (0.9, 10, 0.02)])
def test_token_level_operations_against_theorem_3_11(alpha, gamma, c_hat):
    rng = np.random.default_rng(51)
    contexts = contexts_with_alpha(rng, 40, 16, alpha)
    run = simulate_speculative(rng, contexts, gamma, 100_000)
    assert_within_band(
        run.operations_per_token(c_hat),
        operations_factor(contexts.alpha(), gamma, c_hat),
        alpha=contexts.alpha(),
        gamma=gamma,
        c_hat=c_hat,
    )


@pytest.mark.parametrize("lenience", (1.0, 0.5, 0.3, 0.1))
def test_token_level_lenience_against_lenient_alpha(lenience):
    rng = np.random.default_rng(61)
    contexts = contexts_with_alpha(rng, 30, 16, 0.5)
    run = simulate_speculative(rng, contexts, 4, 100_000, lenience=lenience)
    alpha = contexts.alpha(lenience)
    assert_within_band(run.alpha_from_acceptances(), alpha, lenience=lenience)
    assert_within_band(run.tokens_per_iteration(), expected_tokens(alpha, 4), lenience=lenience, alpha=alpha)


@pytest.mark.parametrize("seed", range(4))
def test_rejection_sampling_rate_against_appendix_a2(seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    estimate, _ = simulate_rejection_sampling(rng, p, q, 400_000)
    assert_within_band(estimate, rejection_sampling_acceptance(p, q), seed=seed)


@pytest.mark.parametrize("verifier", ("token", "block"))
@pytest.mark.parametrize("seed", range(3))
def test_block_verification_expected_tokens_against_enumeration(verifier, seed):
    rng = np.random.default_rng(seed)
    gamma, vocabulary = 3, 5
    target = rng.dirichlet(np.full(vocabulary, 0.7), size=gamma + 1)
    draft = rng.dirichlet(np.full(vocabulary, 0.7), size=gamma + 1)
    contexts = Contexts(target, draft, np.full(gamma + 1, 1 / (gamma + 1)))
    run = simulate_speculative(rng, contexts, gamma, 200_000, verifier=verifier, schedule=np.arange(gamma + 1))
    theory = expected_accepted_tokens(target[:gamma], draft[:gamma], verifier=verifier)
    assert_within_band(run.accepted_per_iteration(), theory, verifier=verifier, seed=seed)


def markov_example():
    return MarkovAcceptance(np.array([[0.9, 0.1], [0.3, 0.7]]), np.array([0.95, 0.3]))


@pytest.mark.parametrize("gamma", (1, 3, 6))
def test_markov_against_exact_expectation_and_eq_1_bias(gamma):
    chain = markov_example()
    run = simulate_markov(np.random.default_rng(71), chain, gamma, streams=3000, iterations_per_stream=200)
    estimate = run.tokens_per_iteration()
    assert_within_band(estimate, markov_expected_tokens(chain, gamma), gamma=gamma)
    # The bias is real and the one spectheory predicts: simulation minus Eq. 1 at the same mean alpha.
    eq1 = float(expected_tokens(chain.mean_acceptance, gamma))
    bias = markov_eq1_bias(chain, gamma)
    assert abs(estimate.mean - eq1 - bias) <= BAND * estimate.standard_error
    assert abs(estimate.z_score(eq1)) > BAND, f"Eq. 1 should be rejected at gamma={gamma}, bias={bias:.4f}"


def test_markov_with_one_regime_against_eq_1():
    chain = MarkovAcceptance(np.ones((1, 1)), np.array([0.7]))
    run = simulate_markov(np.random.default_rng(72), chain, 4, streams=2000, iterations_per_stream=100)
    assert_within_band(run.tokens_per_iteration(), expected_tokens(0.7, 4), alpha=0.7, gamma=4)


@pytest.mark.parametrize("correlation", (0.0, 0.5, 0.9))
@pytest.mark.parametrize("min_block_size", (1, 3))
def test_blockwise_block_size_and_calls_against_stern(correlation, min_block_size):
    accuracies = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    run = simulate_blockwise(
        np.random.default_rng(81),
        accuracies,
        correlation=correlation,
        min_block_size=min_block_size,
        decodes=2000,
        blocks=100,
    )
    # Heads 2..l are accepted unconditionally; the later ones are conditioned on heads l+1..j-1 only.
    later = conditional_accuracies(accuracies[min_block_size - 1 :], correlation)
    block = float(expected_block_size(np.concatenate([accuracies[: min_block_size - 1], later]), min_block_size))
    parameters = dict(correlation=correlation, min_block_size=min_block_size)
    assert_within_band(run.mean_block_size(), block, **parameters)
    tokens = 100 * block  # tokens of a decode of 100 blocks
    for combined in (False, True):
        assert_within_band(
            run.model_calls_per_token(combined=combined),
            model_calls(tokens, block, combined=combined) / tokens,
            combined=combined,
            **parameters,
        )


@pytest.mark.parametrize("alpha, c", [(0.6, 0.02), (0.8, 0.05), (0.9, 0.1)])
def test_oracle_and_fixed_policies_against_theory(alpha, c):
    rng = np.random.default_rng(91)
    contexts = contexts_with_alpha(rng, 32, 64, alpha)
    draws = draw_positions(rng, contexts, 50_000, 150)
    alpha = contexts.alpha()
    assert_within_band(oracle(draws).speedup(c), oracle_speedup(alpha, c), alpha=alpha, c=c, policy="oracle")
    for gamma in (1, 4, 9):
        assert_within_band(
            fixed_gamma(draws, gamma).speedup(c), walltime_improvement(alpha, gamma, c), alpha=alpha, c=c, gamma=gamma
        )


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_calibrated_timeline_against_cost_model(gamma):
    """The timeline under a measured cost profile reproduces ``CostProfile.speedup`` within 4.5 standard
    errors (false-positive probability about 7e-6 per case); negative control: the same runs are far from
    the prediction of a profile whose verify cost is 20% higher."""
    profile = CostProfile(
        t_step=3e-3,
        t_draft=6e-4,
        t_verify=tuple(3e-3 + 1e-4 * k for k in range(9)),
        t_iteration=8e-4,
        acceptance=(0.7, 0.75, 0.8, 0.85, 0.9, 0.9, 0.9, 0.9),
    )
    rng = np.random.default_rng([7, gamma])
    accepted = simulate_positional(rng, profile.acceptance[:gamma], 400 * 50).accepted.reshape(400, 50)
    estimate = calibrated_walltime_speedup(accepted, gamma, profile)
    assert abs(estimate.z_score(profile.speedup(gamma))) < 4.5, (estimate, profile.speedup(gamma))
    slower = replace(profile, t_verify=tuple(1.2 * t for t in profile.t_verify))
    assert abs(estimate.z_score(slower.speedup(gamma))) > 10
