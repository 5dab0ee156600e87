"""spectheory.positional against Eq. 1, brute-force enumeration, and an independent Markov derivation."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import seeds

from spectheory.positional import (
    MarkovAcceptance,
    accepted_count_distribution,
    expected_tokens_positional,
    markov_eq1_bias,
    markov_expected_tokens,
    markov_expected_tokens_from,
    markov_iteration_start_distribution,
)
from spectheory.speedup import expected_tokens


@given(st.floats(0, 1), st.integers(1, 32))
def test_positional_with_equal_rates_against_eq_1(alpha, gamma):
    assert float(expected_tokens_positional(np.full(gamma, alpha))) == pytest.approx(
        float(expected_tokens(alpha, gamma)), rel=1e-12
    )


@given(seeds, st.integers(1, 8))
def test_positional_against_enumeration_of_accept_patterns(seed, gamma):
    rates = np.random.default_rng(seed).random(gamma)
    total = 0.0
    for pattern in itertools.product([0, 1], repeat=gamma):  # 1 = accepted if reached
        probability = np.prod([r if a else 1 - r for r, a in zip(rates, pattern)])
        accepted = next((i for i, a in enumerate(pattern) if not a), gamma)
        total += probability * (accepted + 1)
    assert float(expected_tokens_positional(rates)) == pytest.approx(total, rel=1e-12)


@given(seeds, st.integers(1, 8))
def test_accepted_count_distribution_against_enumeration_of_accept_patterns(seed, gamma):
    rates = np.random.default_rng(seed).random(gamma)
    law = np.zeros(gamma + 1)
    for pattern in itertools.product([0, 1], repeat=gamma):
        probability = np.prod([r if a else 1 - r for r, a in zip(rates, pattern)])
        law[next((i for i, a in enumerate(pattern) if not a), gamma)] += probability
    assert np.allclose(accepted_count_distribution(rates), law, rtol=1e-12, atol=1e-15)
    assert float(accepted_count_distribution(rates) @ np.arange(gamma + 1)) + 1 == pytest.approx(
        float(expected_tokens_positional(rates)), rel=1e-12
    )


def test_accepted_count_distribution_is_the_truncated_geometric():
    # alpha = 0.5, gamma = 3: P(n) = 1/2, 1/4, 1/8 and the remaining 1/8 at n = gamma.
    assert accepted_count_distribution(np.full(3, 0.5)).tolist() == [0.5, 0.25, 0.125, 0.125]
    assert accepted_count_distribution(np.full((2, 4), [[1.0], [0.0]])).tolist() == [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]]


def random_chain(seed, regimes):
    rng = np.random.default_rng(seed)
    return MarkovAcceptance(rng.dirichlet(np.ones(regimes), size=regimes), rng.random(regimes))


def brute_force_iteration(chain, gamma, start):
    """Enumerate regime paths and accept/reject outcomes of one iteration from regime ``start``.

    Returns (E[tokens], law of the next iteration's start regime).
    """
    tokens, next_start = 0.0, np.zeros(len(chain.acceptance))
    for regimes in itertools.product(range(len(chain.acceptance)), repeat=gamma + 1):
        if regimes[0] != start:
            continue
        path = np.prod([chain.transition[a, b] for a, b in zip(regimes, regimes[1:])])
        for outcome in itertools.product([0, 1], repeat=gamma):
            accepted = next((i for i, a in enumerate(outcome) if not a), gamma)
            if any(outcome[accepted + 1 :]):
                continue  # outcomes after the first rejection are not drawn
            weight = path * np.prod(
                [
                    chain.acceptance[r] if a else 1 - chain.acceptance[r]
                    for r, a in zip(regimes[: accepted + 1], outcome[: accepted + 1])
                ]
            )
            tokens += weight * (accepted + 1)
            # The next iteration starts one position after the last emitted token (position `accepted`).
            next_start += weight * chain.transition[regimes[accepted]]
    return tokens, next_start


@given(seeds, st.integers(1, 3), st.integers(1, 4))
def test_markov_expectation_against_brute_force_enumeration(seed, regimes, gamma):
    chain = random_chain(seed, regimes)
    per_start = markov_expected_tokens_from(chain, gamma)
    kernel = np.zeros((regimes, regimes))
    for r in range(regimes):
        tokens, kernel[r] = brute_force_iteration(chain, gamma, r)
        assert per_start[r] == pytest.approx(tokens, rel=1e-12)
    start = markov_iteration_start_distribution(chain, gamma)
    assert np.allclose(start @ kernel, start, atol=1e-12)
    assert markov_expected_tokens(chain, gamma) == pytest.approx(start @ per_start, rel=1e-12)


@given(seeds, st.integers(1, 3), st.integers(1, 6))
def test_markov_expectation_against_augmented_chain(seed, regimes, gamma):
    """1 / E[tokens] is the long-run fraction of positions that start an iteration (renewal argument)."""
    chain = random_chain(seed, regimes)
    width = gamma + 1
    augmented = np.zeros((regimes * width, regimes * width))
    for r, i, s in itertools.product(range(regimes), range(width), range(regimes)):
        move = chain.transition[r, s]
        if i < gamma:
            augmented[r * width + i, s * width + i + 1] += chain.acceptance[r] * move
            augmented[r * width + i, s * width] += (1 - chain.acceptance[r]) * move
        else:
            augmented[r * width + i, s * width] += move
    values, vectors = np.linalg.eig(augmented.T)
    stationary = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    stationary /= stationary.sum()
    assert markov_expected_tokens(chain, gamma) == pytest.approx(1 / stationary[::width].sum(), rel=1e-9)


def test_markov_with_one_regime_against_eq_1():
    chain = MarkovAcceptance([[1.0]], [0.7])
    assert markov_expected_tokens(chain, 5) == pytest.approx(float(expected_tokens(0.7, 5)))
    assert markov_eq1_bias(chain, 5) == pytest.approx(0.0, abs=1e-12)


def test_markov_bias_for_easy_and_hard_spans():
    """Long easy/hard spans: iterations start after rejections, i.e. in hard spans, so Eq. 1 overestimates."""
    chain = MarkovAcceptance([[0.9, 0.1], [0.3, 0.7]], [0.95, 0.3])
    assert chain.mean_acceptance == pytest.approx(0.75 * 0.95 + 0.25 * 0.3)
    assert markov_expected_tokens(chain, 3) == pytest.approx(2.7385356527599, rel=1e-12)
    assert markov_eq1_bias(chain, 3) == pytest.approx(2.7385356527599 - 2.896029296875, rel=1e-9)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: expected_tokens_positional([0.5, 1.2]), r"^acceptance must be in \[0, 1\], got 1.2"),
        (lambda: expected_tokens_positional(0.5), r"^acceptance must have a last axis"),
        (lambda: MarkovAcceptance([[0.5, 0.4], [0.5, 0.5]], [0.5, 0.5]), r"^sum of transition"),
        (lambda: MarkovAcceptance([[1.0]], [0.5, 0.5]), r"^transition must have shape \(K, K\)"),
        (lambda: markov_expected_tokens(MarkovAcceptance([[1.0]], [0.5]), -1), r"^gamma must be"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
