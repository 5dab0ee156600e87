"""spectheory.acceptance against Lemma 3.3, Theorem 3.5, appendix A.2 and A.5, and sampling."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import random_pair, seeds

from spectheory.acceptance import (
    acceptance_probability,
    d_lk,
    expected_acceptance,
    rejection_sampling_acceptance,
    total_variation,
)

vocabularies = st.integers(1, 12)
lenience = st.floats(0.01, 1.0)


@given(seeds, vocabularies)
def test_d_lk_symmetric_in_unit_interval_and_equals_tv(seed, vocabulary):
    p, q = random_pair(seed, vocabulary, batch=(3,))
    divergence = d_lk(p, q)  # [3]
    assert np.allclose(divergence, d_lk(q, p), atol=1e-15)
    assert np.all((divergence >= 0) & (divergence <= 1 + 1e-15))
    assert np.allclose(divergence, total_variation(p, q), atol=1e-15)


@given(seeds, vocabularies)
def test_d_lk_against_lemma_3_3_and_theorem_3_5(seed, vocabulary):
    p, q = random_pair(seed, vocabulary, batch=(2, 3))
    assert np.allclose(d_lk(p, q), 1 - np.minimum(p, q).sum(axis=-1), atol=1e-14)
    assert np.allclose(acceptance_probability(p, q), 1 - d_lk(p, q), atol=1e-14)


def test_d_lk_extremes_against_corollary_3_4():
    assert d_lk([0.2, 0.8], [0.2, 0.8]) == 0  # p = q
    assert d_lk([1.0, 0.0], [0.0, 1.0]) == 1  # disjoint supports


@given(seeds, vocabularies, lenience)
def test_lenient_acceptance_grows_and_is_bounded(seed, vocabulary, l):
    p, q = random_pair(seed, vocabulary)
    strict, lenient = acceptance_probability(p, q), acceptance_probability(p, q, lenience=l)
    assert strict <= lenient + 1e-15 <= 1 + 2e-15
    assert lenient == pytest.approx(np.minimum(p / l, q).sum(), abs=1e-15)


@given(seeds, vocabularies)
def test_rejection_sampling_at_most_alpha_against_appendix_a2(seed, vocabulary):
    p, q = random_pair(seed, vocabulary, batch=(4,))
    assert np.all(rejection_sampling_acceptance(p, q) <= acceptance_probability(p, q) + 1e-15)


def test_rejection_sampling_degenerate_cases():
    assert rejection_sampling_acceptance([0.5, 0.5], [1.0, 0.0]) == 0  # p puts mass where q has none
    assert rejection_sampling_acceptance([0.3, 0.7], [0.3, 0.7]) == pytest.approx(1.0)
    assert rejection_sampling_acceptance([1.0, 0.0], [0.5, 0.5]) == pytest.approx(0.5)  # M = 2


def test_acceptance_probability_against_sampled_accept_rate():
    """beta = E_{x~q} min(1, p(x)/q(x)), estimated from 400,000 draws (seed fixed).

    The standard error is <= 0.5 / sqrt(400,000) = 7.9e-4; a 5-sigma band has false-positive
    probability ~6e-7. Negative control: the accept ratio q/p (a classic bug) lands far outside it.
    """
    rng = np.random.default_rng(20261121)
    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.1, 0.2, 0.3, 0.4])
    draws = rng.choice(4, size=400_000, p=q)
    uniform = rng.random(400_000)
    band = 5 * 0.5 / np.sqrt(400_000)
    accepted = uniform < np.minimum(1, p[draws] / q[draws])
    assert abs(accepted.mean() - acceptance_probability(p, q)) < band, accepted.mean()
    wrong = uniform < np.minimum(1, q[draws] / p[draws])
    assert abs(wrong.mean() - acceptance_probability(p, q)) > band, wrong.mean()


def test_expected_acceptance_weighs_contexts():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    q = np.array([[0.0, 1.0], [0.5, 0.5]])  # beta = 0 and 1
    assert expected_acceptance(p, q) == 0.5
    assert expected_acceptance(p, q, weights=[3, 1]) == 0.25


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: d_lk([0.5, 0.6], [0.5, 0.5]), r"^sum of p over its last axis must be 1"),
        (lambda: d_lk([0.5, 0.5], [1.5, -0.5]), r"^q must be in \[0, inf\), got -0.5 at index \(1,\)"),
        (lambda: d_lk([0.5, np.nan], [0.5, 0.5]), r"^p must be"),
        (lambda: d_lk([0.5, 0.5], [1.0, 0.0, 0.0]), r"^p and q must have the same shape"),
        (lambda: acceptance_probability([0.5, 0.5], [0.5, 0.5], lenience=0), r"^lenience must be in \(0, 1\]"),
        (lambda: acceptance_probability([0.5, 0.5], [0.5, 0.5], lenience=1.5), r"^lenience must be in \(0, 1\]"),
        (lambda: expected_acceptance([[1.0, 0.0]], [[1.0, 0.0]], weights=[1, 1]), r"^weights must have shape"),
        (lambda: d_lk(0.5, 0.5), r"^p must have a non-empty last"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
