"""The cross-vocabulary acceptances (spectheory.vocabularies, docs/theory-vocabularies.md §15) against their sympy
twins in exact rationals, and against same-vocabulary speculative sampling where the vocabularies agree."""

import random
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from spectheory import acceptance, symbolic, vocabularies


def _rational_law(rng: random.Random, size: int) -> list:
    weights = [rng.randint(0, 6) for _ in range(size)]
    weights[rng.randrange(size)] += 1
    return [Fraction(w, sum(weights)) for w in weights]


@pytest.mark.parametrize("seed", range(12))
def test_intersection_acceptance_against_sympy(seed):
    """TLI's beta over a 5-token target and a 4-token draft sharing some pieces, at drawn rational laws."""
    rng = random.Random(seed)
    p, q = _rational_law(rng, 5), _rational_law(rng, 4)
    shared = rng.sample(range(5), 3) + [-1]
    rng.shuffle(shared)
    assume_shared = sum(qi for qi, t in zip(q, shared) if t >= 0)
    exact = symbolic.intersection_acceptance([sp.Rational(x) for x in p], [sp.Rational(x) for x in q], shared)
    numeric = vocabularies.intersection_acceptance(np.array(p, float), np.array(q, float), shared)
    expected = float(exact) if assume_shared else 0.0
    assert float(numeric) == pytest.approx(expected, abs=1e-12)


def test_intersection_acceptance_against_speculative_sampling_on_one_vocabulary():
    """Where every draft piece is a target piece in the same order, TLI is speculative sampling: sum min(p, q)."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(6), size=4), rng.dirichlet(np.ones(6), size=4)
    assert vocabularies.intersection_acceptance(p, q, range(6)) == pytest.approx(
        acceptance.acceptance_probability(p, q)
    )


def test_intersection_law_renormalises_on_the_shared_pieces():
    law = vocabularies.intersection_law([0.5, 0.25, 0.25], [2, -1, 0], 3)
    assert law.tolist() == pytest.approx([1 / 3, 0.0, 2 / 3])
    assert vocabularies.intersection_law([0.0, 1.0], [0, -1], 2).tolist() == [0.0, 0.0]  # nothing shared drawn


@pytest.mark.parametrize("seed", range(6))
def test_exact_match_acceptance_against_sympy_and_below_speculative_sampling(seed):
    """SLEM's beta = sum r p, never above sum min(p, r), equal to it when both are one-hot."""
    rng = random.Random(seed)
    p, r = _rational_law(rng, 5), _rational_law(rng, 5)
    exact = symbolic.exact_match_acceptance([sp.Rational(x) for x in p], [sp.Rational(x) for x in r])
    numeric = vocabularies.exact_match_acceptance(np.array(p, float), np.array(r, float))
    assert float(numeric) == pytest.approx(float(exact), abs=1e-12)
    assert float(numeric) <= float(acceptance.acceptance_probability(np.array(p, float), np.array(r, float))) + 1e-12
    one_hot = np.eye(5)[2]
    assert vocabularies.exact_match_acceptance(one_hot, one_hot) == 1.0


def test_cross_vocabulary_speedup_against_theorem_3_8_at_ratio_one():
    """At one target token per draft token the speedup is Theorem 3.8's."""
    from spectheory.speedup import walltime_improvement

    assert vocabularies.cross_vocabulary_speedup(0.7, 4, 0.1, 1.0) == pytest.approx(walltime_improvement(0.7, 4, 0.1))
    assert vocabularies.cross_vocabulary_tokens(0.7, 4, 0.5) == pytest.approx((1 - 0.7**3) / 0.3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: vocabularies.cross_vocabulary_tokens(0.5, 2, 0), "ratio must be"),
        (lambda: vocabularies.intersection_law([0.5, 0.5], [0, 5], 3), "shared must hold"),
        (lambda: vocabularies.exact_match_acceptance([1.0], [0.5, 0.5]), "same shape"),
        (lambda: vocabularies.string_acceptance([0.5, 0.6], [0.5, 0.5]), "sum of p_strings"),
    ],
)
def test_bad_arguments_name_themselves(call, message):
    with pytest.raises(ValueError, match=message):
        call()
