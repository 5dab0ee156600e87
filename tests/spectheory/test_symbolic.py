"""Numeric functions against their sympy twins; the derivations; the exact law of speculative sampling."""

import random
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import seeds

from spectheory import acceptance, blockwise, costs, goodput, positional, speedup, symbolic, trees, vocabularies

#: Each closed form's numeric twin, called with the symbols of ``CLOSED_FORMS`` in order.
NUMERIC = {
    "expected_tokens": speedup.expected_tokens,
    "walltime_improvement": speedup.walltime_improvement,
    "operations_factor": speedup.operations_factor,
    "improvement_lower_bound": speedup.improvement_lower_bound,
    "memory_traffic_reduction": speedup.memory_traffic_reduction,
    "oracle_speedup": speedup.oracle_speedup,
    "continuous_optimal_gamma": speedup.continuous_optimal_gamma,
    "model_calls_separate": lambda m, k: blockwise.model_calls(m, k, combined=False),
    "model_calls_combined": lambda m, k: blockwise.model_calls(m, k, combined=True),
    "calibrated_speedup": costs.affine_speedup,
    "kary_expected_tokens": trees.expected_tokens_kary,
    "cross_vocabulary_tokens": vocabularies.cross_vocabulary_tokens,
    "cross_vocabulary_speedup": vocabularies.cross_vocabulary_speedup,
    "goodput_speedup": goodput.affine_goodput_speedup,
}
POINT = {  # where each symbol is drawn
    symbolic.alpha: st.floats(0.01, 0.99),
    symbolic.gamma: st.integers(0, 40),
    symbolic.c: st.floats(0.001, 0.9),
    symbolic.c_hat: st.floats(0.0, 2.0),
    symbolic.m_hat: st.floats(0.0, 2.0),
    symbolic.n_tokens: st.integers(1, 10_000),
    symbolic.block_size: st.floats(1.0, 16.0),
    symbolic.t_step: st.floats(1e-4, 1.0),
    symbolic.t_draft: st.floats(0.0, 1.0),
    symbolic.verify_intercept: st.floats(1e-4, 1.0),
    symbolic.verify_slope: st.floats(0.0, 1.0),
    symbolic.t_iteration: st.floats(0.0, 1.0),
    symbolic.p_k: st.floats(0.0, 0.999),
    symbolic.tree_depth: st.integers(0, 30),
    symbolic.tokenization_ratio: st.floats(0.25, 4.0),
    symbolic.batch: st.integers(1, 256),
    symbolic.pass_intercept: st.floats(1e-4, 1.0),
    symbolic.pass_slope: st.floats(0.0, 0.1),
    symbolic.draft_intercept: st.floats(0.0, 0.5),
    symbolic.draft_slope: st.floats(0.0, 0.05),
}


def test_every_closed_form_has_a_numeric_twin():
    assert set(NUMERIC) == set(symbolic.CLOSED_FORMS)


@pytest.mark.parametrize("name", sorted(symbolic.CLOSED_FORMS))
@settings(max_examples=30)
@given(data=st.data())
def test_numeric_against_sympy(name, data):
    form = symbolic.CLOSED_FORMS[name]
    values = [data.draw(POINT[symbol], label=str(symbol)) for symbol in form.symbols]
    exact = form.expression.evalf(30, subs=dict(zip(form.symbols, values)))
    if name == "continuous_optimal_gamma":  # the numeric one is the maximiser over gamma >= 0
        exact = max(sp.re(exact), 0)
    numeric = float(NUMERIC[name](*values))
    assert numeric == pytest.approx(float(exact), rel=1e-12, abs=1e-12), f"{name} at {values}"


def test_expected_tokens_limit_at_alpha_one_against_sympy():
    assert sp.limit(symbolic.EXPECTED_TOKENS, symbolic.alpha, 1) == symbolic.gamma + 1


def test_calibrated_speedup_reductions_against_theorem_3_8():
    """The cost model is Theorem 3.8 at c = t_draft / t_step with t_verify = t_step; with an affine verify
    cost it is Theorem 3.8 at c_eff times an efficiency (docs/theory.md §10)."""
    assert symbolic.derive_calibrated_reductions() == (0, 0)


@pytest.mark.parametrize("depth,k", [(0, 1), (1, 3), (2, 2), (3, 3), (4, 1)])
def test_kary_tree_derivation_against_rank_model_sum(depth, k):
    """The k-ary closed form is the rank model summed level by level, and Eq. 1 at k = 1 (docs/theory-trees.md §12)."""
    assert symbolic.derive_kary_tree(depth, k) == (0, 0)


def test_lemma_3_3_derivation():
    assert symbolic.derive_lemma_3_3(3) == 0


def test_optimal_gamma_derivation_and_branch():
    derived = symbolic.derive_optimal_gamma()
    assert derived.has(sp.LambertW)
    other_branch = derived.replace(sp.LambertW, lambda z: sp.LambertW(z, -1))
    for a, cost in [(0.6, 0.02), (0.8, 0.05), (0.95, 0.1), (0.99, 0.001)]:
        point = {symbolic.alpha: a, symbolic.c: cost}
        assert float(other_branch.evalf(subs=point)) == pytest.approx(float(symbolic.OPTIMAL_GAMMA.evalf(subs=point)))
        assert float(derived.evalf(subs=point)) < 0  # the principal branch is not the maximiser
        # It is a stationary point of Theorem 3.8: dS/dgamma = 0 there.
        slope = sp.diff(symbolic.WALLTIME_IMPROVEMENT, symbolic.gamma).subs(point)
        assert abs(float(slope.evalf(subs={symbolic.gamma: symbolic.OPTIMAL_GAMMA.evalf(subs=point)}))) < 1e-12


def test_oracle_speedup_derivation():
    assert sp.simplify(symbolic.derive_oracle_speedup() - symbolic.ORACLE_SPEEDUP) == 0


def random_rational_distribution(rng: random.Random, size: int, zeros: bool) -> list[Fraction]:
    weights = [rng.randint(0 if zeros else 1, 9) for _ in range(size)]
    if sum(weights) == 0:
        weights[0] = 1
    return [Fraction(w, sum(weights)) for w in weights]


@given(seeds, st.integers(2, 6))
def test_distribution_functions_against_sympy(seed, size):
    rng = random.Random(seed)
    p = random_rational_distribution(rng, size, zeros=True)
    q = random_rational_distribution(rng, size, zeros=True)
    l = Fraction(rng.randint(1, 10), 10)
    p_sym, q_sym = ([sp.Rational(x.numerator, x.denominator) for x in dist] for dist in (p, q))
    p_num, q_num = np.array(p, dtype=float), np.array(q, dtype=float)
    pairs = [
        (acceptance.d_lk(p_num, q_num), symbolic.d_lk(p_sym, q_sym)),
        (acceptance.total_variation(p_num, q_num), symbolic.total_variation(p_sym, q_sym)),
        (
            acceptance.acceptance_probability(p_num, q_num, lenience=float(l)),
            symbolic.acceptance_probability(p_sym, q_sym, sp.Rational(l.numerator, l.denominator)),
        ),
        (acceptance.rejection_sampling_acceptance(p_num, q_num), symbolic.rejection_sampling_acceptance(p_sym, q_sym)),
    ]
    for numeric, exact in pairs:
        assert float(numeric) == pytest.approx(float(exact), rel=1e-12, abs=1e-12)


@given(seeds, st.integers(1, 8), st.integers(1, 8))
def test_positional_and_blockwise_against_sympy(seed, gamma, minimum):
    rates = [sp.Rational(random.Random(seed + i).randint(0, 100), 100) for i in range(gamma)]
    assume(minimum <= gamma + 1)
    assert float(positional.expected_tokens_positional(np.array(rates, dtype=float))) == pytest.approx(
        float(symbolic.expected_tokens_positional(rates)), rel=1e-12
    )
    assert float(blockwise.expected_block_size(np.array(rates, dtype=float), minimum)) == pytest.approx(
        float(symbolic.expected_block_size(rates, minimum)), rel=1e-12
    )


@pytest.mark.parametrize("seed, regimes, gamma", [(0, 1, 3), (1, 2, 1), (2, 2, 3), (3, 3, 2), (4, 3, 4)])
def test_markov_against_sympy_augmented_chain(seed, regimes, gamma):
    rng = random.Random(seed)
    transition = [random_rational_distribution(rng, regimes, zeros=False) for _ in range(regimes)]
    rates = [Fraction(rng.randint(0, 20), 20) for _ in range(regimes)]
    exact = symbolic.markov_expected_tokens(
        [[sp.Rational(x.numerator, x.denominator) for x in row] for row in transition],
        [sp.Rational(x.numerator, x.denominator) for x in rates],
        gamma,
    )
    chain = positional.MarkovAcceptance(np.array(transition, dtype=float), np.array(rates, dtype=float))
    assert positional.markov_expected_tokens(chain, gamma) == pytest.approx(float(exact), rel=1e-12)


def wrong_law_residual_from_p(p, q):
    """Negative control: the classic bug of resampling a rejected token from p instead of norm(max(0, p - q))."""
    accepted = [min(pi, qi) for pi, qi in zip(p, q)]
    return [acc + (1 - sum(accepted)) * pi for acc, pi in zip(accepted, p)]


def test_speculative_sampling_returns_p_exactly_with_negative_control():
    """Leviathan appendix A.1 in exact rationals: 2,000 random (p, q) over V = 2..6, zeros included.

    Negative control: the residual drawn from p returns p only where that is no bug at all (p = q, or
    norm(max(0, p - q)) = p, e.g. disjoint supports) and misses p on every other draw.
    """
    rng = random.Random(20261121)
    wrong_differs = 0
    for trial in range(2000):
        size = 2 + trial % 5
        p = random_rational_distribution(rng, size, zeros=True)
        q = random_rational_distribution(rng, size, zeros=True)
        assert symbolic.speculative_sampling_law(p, q) == p, (p, q)
        residual = [max(Fraction(0), pi - qi) for pi, qi in zip(p, q)]
        harmless = p == q or [r / sum(residual) for r in residual] == p
        assert (wrong_law_residual_from_p(p, q) == p) == harmless, (p, q)
        wrong_differs += not harmless
    assert wrong_differs >= 1800, wrong_differs


@given(seeds, st.integers(2, 6), st.integers(1, 10))
def test_lenient_law_bounded_by_p_over_l(seed, size, tenths):
    rng = random.Random(seed)
    p = random_rational_distribution(rng, size, zeros=True)
    q = random_rational_distribution(rng, size, zeros=True)
    lenience = Fraction(tenths, 10)
    law = symbolic.speculative_sampling_law(p, q, lenience)
    assert sum(law) == 1
    assert all(x <= pi / lenience for x, pi in zip(law, p))


def test_latex_export_covers_every_closed_form():
    exported = symbolic.latex()
    assert set(exported) == set(symbolic.CLOSED_FORMS)
    assert "W_{-1}" in exported["continuous_optimal_gamma"]
    assert exported["expected_tokens"] == r"\frac{1 - \alpha^{\gamma + 1}}{1 - \alpha}"
