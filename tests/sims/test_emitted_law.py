"""The law of the tokens the token-level simulator emits, against the target's (chi-square).

Each iteration's emitted block is completed with fresh target draws up to gamma + 1 positions; for an
exact sampler every completed position then has the target's law, whatever q is (Leviathan et al.
appendix A.1). Per-position tests are combined with a Bonferroni correction, so a correct simulator
fails a test here with probability at most CHI_SQUARE_LEVEL = 1e-4 (seeds are fixed). The negative
controls plant the classic bug (the correction drawn from p instead of norm(max(0, p - q))) in the
simulator's own code path and require the same test to fail.
"""

from fractions import Fraction

import numpy as np
import pytest
from sim_checks import CHI_SQUARE_LEVEL, chi_square_p_value

import sims.token_level
from sims.families import Contexts
from sims.token_level import simulate_rejection_sampling, simulate_speculative
from spectheory.symbolic import speculative_sampling_law


def completed_blocks(rng, run, contexts):
    """Emitted tokens, then target draws at the positions after each iteration's last token.  # [N, gamma + 1]"""
    positions = np.arange(run.gamma + 1)
    missing = positions > run.accepted[:, None]
    cdf = np.cumsum(contexts.p[run.contexts], axis=-1)  # [N, gamma + 1, V]
    fresh = (cdf <= rng.random(run.contexts.shape)[..., None]).sum(axis=-1)
    return np.where(missing, np.minimum(fresh, contexts.vocabulary - 1), run.tokens)


def smallest_position_p_value(rng, run, contexts):
    """Min over positions of the chi-square p-value of (context, token) counts against weights_k p_k(y)."""
    blocks = completed_blocks(rng, run, contexts)
    law = contexts.weights[:, None] * contexts.p  # [K, V]
    p_values = []
    for j in range(run.gamma + 1):
        counts = np.zeros_like(law)
        np.add.at(counts, (run.contexts[:, j], blocks[:, j]), 1)
        p_values.append(chi_square_p_value(counts, law))
    return min(p_values), len(p_values)


def three_contexts():
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.full(8, 0.6), size=3)
    q = rng.dirichlet(np.full(8, 0.6), size=3)
    return Contexts(p, q, np.array([0.5, 0.3, 0.2]))


def residual_from_p(p, q):
    """The planted bug: replace a rejected token from p, ignoring what the draft already covered."""
    return p


@pytest.mark.parametrize("planted_bug", (False, True))
def test_emitted_law_against_target_and_negative_control(monkeypatch, planted_bug):
    if planted_bug:
        monkeypatch.setattr(sims.token_level, "residual_weights", residual_from_p)
    contexts = three_contexts()
    rng = np.random.default_rng(2024)
    run = simulate_speculative(rng, contexts, 3, 100_000)
    smallest, tests = smallest_position_p_value(rng, run, contexts)
    if planted_bug:
        assert smallest < CHI_SQUARE_LEVEL / tests, f"the residual-from-p bug went unnoticed: p = {smallest:.2e}"
    else:
        assert smallest >= CHI_SQUARE_LEVEL / tests, f"emitted tokens are not p-distributed: p = {smallest:.2e}"


@pytest.mark.parametrize("planted_bug", (False, True))
def test_joint_law_of_first_two_tokens_against_target(monkeypatch, planted_bug):
    """Pairs (Y_1, Y_2) of one context against p x p: catches dependence that marginals miss."""
    if planted_bug:
        monkeypatch.setattr(sims.token_level, "residual_weights", residual_from_p)
    rng = np.random.default_rng(7)
    contexts = Contexts.single(rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6)))
    run = simulate_speculative(rng, contexts, 2, 200_000)
    blocks = completed_blocks(rng, run, contexts)
    counts = np.zeros((6, 6))
    np.add.at(counts, (blocks[:, 0], blocks[:, 1]), 1)
    p_value = chi_square_p_value(counts, np.outer(contexts.p[0], contexts.p[0]))
    assert (p_value < CHI_SQUARE_LEVEL) == planted_bug, f"p = {p_value:.2e}, planted bug: {planted_bug}"


def test_block_verifier_emitted_law_against_target():
    rng = np.random.default_rng(9)
    gamma = 3
    contexts = Contexts(
        rng.dirichlet(np.full(6, 0.7), size=gamma + 1),
        rng.dirichlet(np.full(6, 0.7), size=gamma + 1),
        np.full(gamma + 1, 0.25),
    )
    run = simulate_speculative(rng, contexts, gamma, 100_000, verifier="block", schedule=np.arange(gamma + 1))
    blocks = completed_blocks(rng, run, contexts)
    p_values = [chi_square_p_value(np.bincount(blocks[:, j], minlength=6), contexts.p[j]) for j in range(gamma + 1)]
    assert min(p_values) >= CHI_SQUARE_LEVEL / (gamma + 1), f"per-position p-values {p_values}"


@pytest.mark.parametrize("lenience", (0.5, 0.2))
def test_lenient_first_token_law_against_exact_rational_law(lenience):
    """With l < 1 the output is no longer p; it is the law spectheory.symbolic derives in rationals."""
    rng = np.random.default_rng(11)
    p, q = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    contexts = Contexts.single(p, q)
    run = simulate_speculative(rng, contexts, 2, 200_000, lenience=lenience)
    exact = speculative_sampling_law([Fraction(x) for x in p], [Fraction(x) for x in q], Fraction(lenience))
    counts = np.bincount(run.tokens[:, 0], minlength=7)
    assert chi_square_p_value(counts, [float(x) for x in exact]) >= CHI_SQUARE_LEVEL
    assert chi_square_p_value(counts, p) < CHI_SQUARE_LEVEL, "lenience should visibly move the law away from p"


def test_rejection_sampling_output_against_target():
    rng = np.random.default_rng(13)
    p, q = rng.dirichlet(np.ones(9)), rng.dirichlet(np.ones(9))
    _, tokens = simulate_rejection_sampling(rng, p, q, 200_000)
    assert chi_square_p_value(np.bincount(tokens, minlength=9), p) >= CHI_SQUARE_LEVEL
