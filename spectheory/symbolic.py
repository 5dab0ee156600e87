"""Sympy twins of every closed form, their derivations, LaTeX export, and exact-rational checks.

The numeric functions in ``spectheory`` are tested against these expressions at drawn points. Where a
closed form is an algorithm rather than a formula (Markov acceptance), the twin is an independent
derivation in exact arithmetic, not a transcription of the numeric code.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import sympy as sp

__all__ = [
    "alpha",
    "gamma",
    "c",
    "c_hat",
    "m_hat",
    "n_tokens",
    "block_size",
    "EXPECTED_TOKENS",
    "WALLTIME_IMPROVEMENT",
    "OPERATIONS_FACTOR",
    "IMPROVEMENT_LOWER_BOUND",
    "MEMORY_TRAFFIC_REDUCTION",
    "ORACLE_SPEEDUP",
    "OPTIMAL_GAMMA",
    "MODEL_CALLS_SEPARATE",
    "MODEL_CALLS_COMBINED",
    "CALIBRATED_SPEEDUP",
    "t_step",
    "t_draft",
    "verify_intercept",
    "verify_slope",
    "t_iteration",
    "p_k",
    "tree_depth",
    "KARY_EXPECTED_TOKENS",
    "tokenization_ratio",
    "CROSS_VOCABULARY_TOKENS",
    "CROSS_VOCABULARY_SPEEDUP",
    "batch",
    "pass_intercept",
    "pass_slope",
    "draft_intercept",
    "draft_slope",
    "GOODPUT_SPEEDUP",
    "CROSSOVER_BATCH",
    "intersection_acceptance",
    "exact_match_acceptance",
    "ClosedForm",
    "CLOSED_FORMS",
    "derive_calibrated_reductions",
    "derive_kary_tree",
    "d_lk",
    "total_variation",
    "acceptance_probability",
    "rejection_sampling_acceptance",
    "expected_tokens_positional",
    "expected_block_size",
    "markov_expected_tokens",
    "derive_optimal_gamma",
    "derive_oracle_speedup",
    "derive_lemma_3_3",
    "speculative_sampling_law",
    "latex",
]

alpha = sp.Symbol("alpha", nonnegative=True)
gamma = sp.Symbol("gamma", nonnegative=True)
c = sp.Symbol("c", nonnegative=True)
c_hat = sp.Symbol("hat{c}", nonnegative=True)
m_hat = sp.Symbol("hat{m}", nonnegative=True)
n_tokens = sp.Symbol("m", positive=True)
block_size = sp.Symbol("hat{k}", positive=True)
t_step, t_draft = sp.Symbol("t_step", positive=True), sp.Symbol("t_draft", nonnegative=True)
verify_intercept, verify_slope = sp.Symbol("v_0", positive=True), sp.Symbol("v_1", nonnegative=True)
t_iteration = sp.Symbol("t_iteration", nonnegative=True)
p_k, tree_depth = sp.Symbol("P_k", nonnegative=True), sp.Symbol("d", nonnegative=True)

#: Eq. 1: expected tokens per iteration with i.i.d. acceptance.
EXPECTED_TOKENS = (1 - alpha ** (gamma + 1)) / (1 - alpha)
#: Theorem 3.8: walltime improvement.
WALLTIME_IMPROVEMENT = EXPECTED_TOKENS / (gamma * c + 1)
#: Theorem 3.11: factor of arithmetic operations.
OPERATIONS_FACTOR = (gamma * c_hat + gamma + 1) / EXPECTED_TOKENS
#: Corollary 3.9: the gamma = 1 speedup, a lower bound on the optimum.
IMPROVEMENT_LOWER_BOUND = (1 + alpha) / (1 + c)
#: Section 3.4: reduction of memory reads per token (draft reads m_hat of the target's bytes per call).
MEMORY_TRAFFIC_REDUCTION = EXPECTED_TOKENS / (gamma * m_hat + 1)
#: Section 3.5: oracle-gamma speedup (see derive_oracle_speedup).
ORACLE_SPEEDUP = 1 / (1 - alpha + c * alpha)
#: The continuous maximiser of Theorem 3.8 (see derive_optimal_gamma); W_{-1} is the right branch.
OPTIMAL_GAMMA = (1 + sp.LambertW(-sp.exp(-1) * alpha ** ((1 - c) / c), -1)) / sp.log(alpha) - 1 / c
#: Stern et al. section 4: model calls for m tokens with mean accepted block size k_hat.
MODEL_CALLS_SEPARATE = 2 * n_tokens / block_size
MODEL_CALLS_COMBINED = n_tokens / block_size + 1
#: docs/theory.md §10: the speedup with measured costs and an affine verify cost v0 + v1 k.
CALIBRATED_SPEEDUP = (
    EXPECTED_TOKENS * t_step / (gamma * t_draft + verify_intercept + verify_slope * (gamma + 1) + t_iteration)
)

#: docs/theory-trees.md §12: expected tokens per call of the full k-ary tree of depth d, P_k = a_1 + ... + a_k.
KARY_EXPECTED_TOKENS = (1 - p_k ** (tree_depth + 1)) / (1 - p_k)

#: docs/theory-vocabularies.md §15: gamma draft tokens read by the target as rho gamma candidates.
tokenization_ratio = sp.Symbol("rho", positive=True)
CROSS_VOCABULARY_TOKENS = (1 - alpha ** (tokenization_ratio * gamma + 1)) / (1 - alpha)
CROSS_VOCABULARY_SPEEDUP = CROSS_VOCABULARY_TOKENS / (gamma * c + 1)

#: docs/theory-goodput.md §16: goodput of B requests decoded in one batch over plain decoding's, a pass of n tokens
#: costing a + b n and a draft step at batch B d_a + d_b B.
batch = sp.Symbol("B", positive=True)
pass_intercept, pass_slope = sp.Symbol("a", positive=True), sp.Symbol("b", nonnegative=True)
draft_intercept, draft_slope = sp.Symbol("d_a", nonnegative=True), sp.Symbol("d_b", nonnegative=True)
GOODPUT_SPEEDUP = (
    EXPECTED_TOKENS
    * (pass_intercept + pass_slope * batch)
    / (
        pass_intercept
        + pass_slope * batch * (gamma + 1)
        + gamma * (draft_intercept + draft_slope * batch)
        + t_iteration
    )
)
#: The batch size where it equals 1 (below it gamma pays).
CROSSOVER_BATCH = (pass_intercept * (EXPECTED_TOKENS - 1) - gamma * draft_intercept - t_iteration) / (
    pass_slope * (gamma + 1 - EXPECTED_TOKENS) + gamma * draft_slope
)


@dataclass(frozen=True)
class ClosedForm:
    """A closed form, the symbols it takes (in order), and where it comes from."""

    expression: sp.Expr
    symbols: tuple[sp.Symbol, ...]
    reference: str


CLOSED_FORMS: dict[str, ClosedForm] = {
    "expected_tokens": ClosedForm(EXPECTED_TOKENS, (alpha, gamma), "Leviathan et al. Eq. 1"),
    "walltime_improvement": ClosedForm(WALLTIME_IMPROVEMENT, (alpha, gamma, c), "Theorem 3.8"),
    "operations_factor": ClosedForm(OPERATIONS_FACTOR, (alpha, gamma, c_hat), "Theorem 3.11"),
    "improvement_lower_bound": ClosedForm(IMPROVEMENT_LOWER_BOUND, (alpha, c), "Corollary 3.9"),
    "memory_traffic_reduction": ClosedForm(MEMORY_TRAFFIC_REDUCTION, (alpha, gamma, m_hat), "Section 3.4"),
    "oracle_speedup": ClosedForm(ORACLE_SPEEDUP, (alpha, c), "Section 3.5, oracle gamma"),
    "continuous_optimal_gamma": ClosedForm(OPTIMAL_GAMMA, (alpha, c), "Section 3.5, Lambert W"),
    "model_calls_separate": ClosedForm(MODEL_CALLS_SEPARATE, (n_tokens, block_size), "Stern et al. §4"),
    "model_calls_combined": ClosedForm(MODEL_CALLS_COMBINED, (n_tokens, block_size), "Stern et al. §4"),
    "calibrated_speedup": ClosedForm(
        CALIBRATED_SPEEDUP,
        (alpha, gamma, t_step, t_draft, verify_intercept, verify_slope, t_iteration),
        "docs/theory.md §10",
    ),
    "kary_expected_tokens": ClosedForm(KARY_EXPECTED_TOKENS, (p_k, tree_depth), "docs/theory-trees.md §12"),
    "goodput_speedup": ClosedForm(
        GOODPUT_SPEEDUP,
        (alpha, gamma, batch, pass_intercept, pass_slope, draft_intercept, draft_slope, t_iteration),
        "docs/theory-goodput.md §16",
    ),
    "cross_vocabulary_tokens": ClosedForm(
        CROSS_VOCABULARY_TOKENS, (alpha, gamma, tokenization_ratio), "docs/theory-vocabularies.md §15"
    ),
    "cross_vocabulary_speedup": ClosedForm(
        CROSS_VOCABULARY_SPEEDUP, (alpha, gamma, c, tokenization_ratio), "docs/theory-vocabularies.md §15"
    ),
}


def latex() -> dict[str, str]:
    """LaTeX for every closed form, keyed like ``CLOSED_FORMS``."""
    return {name: sp.latex(form.expression) for name, form in CLOSED_FORMS.items()}


# --- distributions over a small vocabulary (sequences of sympy numbers or symbols) -------------------


def d_lk(p: Sequence, q: Sequence) -> sp.Expr:
    """D_LK(p, q) = sum_x |p(x) - (p(x) + q(x)) / 2|."""
    return sp.Add(*[sp.Abs(pi - (pi + qi) / 2) for pi, qi in zip(p, q)])


def total_variation(p: Sequence, q: Sequence) -> sp.Expr:
    """TV(p, q) = sum_x |p(x) - q(x)| / 2."""
    return sp.Add(*[sp.Abs(pi - qi) for pi, qi in zip(p, q)]) / 2


def acceptance_probability(p: Sequence, q: Sequence, lenience=1) -> sp.Expr:
    """beta = sum_x min(p(x) / l, q(x))."""
    return sp.Add(*[sp.Min(pi / lenience, qi) for pi, qi in zip(p, q)])


def rejection_sampling_acceptance(p: Sequence, q: Sequence) -> sp.Expr:
    """sum_x p(x) / M with M = max over p(x) > 0 of p(x) / q(x) (0 when some q(x) = 0 < p(x))."""
    if any(pi > 0 and qi == 0 for pi, qi in zip(p, q)):
        return sp.Integer(0)
    bound = sp.Max(*[pi / qi for pi, qi in zip(p, q) if pi > 0])
    return sp.Add(*p) / bound


def intersection_acceptance(p: Sequence, q: Sequence, shared: Sequence) -> sp.Expr:
    """TLI: sum over target tokens t of min(p(t), q'(t)), q' the draft's mass on the draft token ``shared`` maps to t
    (-1: not shared), over the shared mass."""
    kept = sp.Add(*[qi for qi, t in zip(q, shared) if t >= 0])
    law = [sp.Add(*[qi for qi, u in zip(q, shared) if u == t]) / kept for t in range(len(p))]
    return sp.Add(*[sp.Min(pi, li) for pi, li in zip(p, law)])


def exact_match_acceptance(p: Sequence, r: Sequence) -> sp.Expr:
    """SLEM: sum_t r(t) p(t), the probability that a draw from p equals a candidate drawn from r."""
    return sp.Add(*[pi * ri for pi, ri in zip(p, r)])


def derive_lemma_3_3(size: int = 3) -> sp.Expr:
    """D_LK - (1 - sum min(p, q)) for symbolic p, q on ``size`` outcomes; simplifies to 0 (Lemma 3.3)."""
    p = sp.symbols(f"p0:{size}", nonnegative=True)
    q = sp.symbols(f"q0:{size}", nonnegative=True)
    # Impose sum p = sum q = 1 by substituting the last entries.
    constraints = {p[-1]: 1 - sp.Add(*p[:-1]), q[-1]: 1 - sp.Add(*q[:-1])}
    difference = d_lk(p, q) - (1 - acceptance_probability(p, q))
    # |p - q| / 2 = (p + q)/2 - min(p, q) holds termwise: rewrite Min through Abs and simplify.
    termwise = difference.replace(sp.Min, lambda a, b: (a + b - sp.Abs(a - b)) / 2)
    return sp.simplify(termwise.subs(constraints))


# --- position-dependent, blockwise and Markov acceptance ---------------------------------------------


def expected_tokens_positional(acceptance: Sequence) -> sp.Expr:
    """1 + sum_{i} prod_{j<=i} a_j."""
    return 1 + sp.Add(*[sp.Mul(*acceptance[: i + 1]) for i in range(len(acceptance))])


def expected_block_size(head_accuracies: Sequence, min_block_size: int = 1) -> sp.Expr:
    """l + sum_{i>l} prod_{l<j<=i} a_j over heads 2..k."""
    return (min_block_size - 1) + expected_tokens_positional(head_accuracies[min_block_size - 1 :])


def markov_expected_tokens(transition: Sequence[Sequence], acceptance: Sequence, gamma_value: int) -> sp.Expr:
    """Long-run tokens per iteration under Markov-modulated acceptance, exactly.

    Derived independently of ``spectheory.positional``: the token stream is a Markov chain on
    (regime r, index i of the position inside its iteration). From (r, i < gamma) the draft is
    accepted with probability a_r, leading to (s, i + 1), or rejected, leading to (s, 0); from
    (r, gamma) (the bonus token) it goes to (s, 0); s ~ P[r]. One position in E[tokens] starts an
    iteration, so E[tokens] = 1 / (stationary mass of the states with i = 0).
    """
    transition = sp.Matrix(transition)
    regimes, width = len(acceptance), gamma_value + 1
    chain = sp.zeros(regimes * width, regimes * width)
    for r in range(regimes):
        for i in range(width):
            for s in range(regimes):
                move = transition[r, s]
                if i < gamma_value:
                    chain[r * width + i, s * width + i + 1] += acceptance[r] * move
                    chain[r * width + i, s * width] += (1 - acceptance[r]) * move
                else:
                    chain[r * width + i, s * width] += move
    size = regimes * width
    system = (chain.T - sp.eye(size)).col_join(sp.ones(1, size))
    stationary = system.solve_least_squares(sp.Matrix([0] * size + [1]))
    return 1 / sum(stationary[r * width] for r in range(regimes))


# --- derivations --------------------------------------------------------------------------------------


def derive_optimal_gamma() -> sp.Expr:
    """Solve dS/dgamma = 0 for Theorem 3.8 with sympy; returns its solution (principal branch).

    sympy answers (c W(z) + c - log alpha) / (c log alpha) = (1 + W(z)) / log(alpha) - 1/c with
    z = -exp((log alpha - c)/c) / alpha = -exp(-1) alpha^((1-c)/c) in (-1/e, 0). On the principal branch
    W_0(z) > -1, which makes gamma negative; the maximiser with gamma >= 0 is the W_{-1} branch,
    ``OPTIMAL_GAMMA``.
    """
    a, g, cost = sp.symbols("alpha gamma c", positive=True)
    speedup = (1 - a ** (g + 1)) / ((1 - a) * (g * cost + 1))
    (solution,) = sp.solve(sp.diff(speedup, g), g)
    return solution.subs({a: alpha, g: gamma, cost: c})


def derive_calibrated_reductions() -> tuple[sp.Expr, sp.Expr]:
    """Two differences that simplify to 0 (docs/theory.md §10): the calibrated speedup minus Theorem 3.8 at
    t_draft = c t_step, t_verify = t_step, t_iteration = 0; and the calibrated speedup with an affine verify
    cost minus efficiency * Theorem 3.8 at c_eff = (t_draft + v1) / T0, efficiency = t_step / T0,
    T0 = v0 + v1 + t_iteration."""
    theorem = CALIBRATED_SPEEDUP.subs({t_draft: c * t_step, verify_intercept: t_step, verify_slope: 0, t_iteration: 0})
    base = verify_intercept + verify_slope + t_iteration
    scaled = t_step / base * WALLTIME_IMPROVEMENT.subs(c, (t_draft + verify_slope) / base)
    return sp.simplify(theorem - WALLTIME_IMPROVEMENT), sp.simplify(CALIBRATED_SPEEDUP - scaled)


def derive_kary_tree(depth: int, k: int) -> tuple[sp.Expr, sp.Expr]:
    """Two differences that simplify to 0 (docs/theory-trees.md §12): the rank model summed over the nodes of the
    full k-ary tree of ``depth`` (a node at level i with ranks r_1..r_i has probability a_r1 ... a_ri, for
    symbols a_1..a_k) minus the closed form at P_k = a_1 + ... + a_k; and the closed form at k = 1 minus
    Eq. 1 at alpha = a_1."""
    rates = sp.symbols(f"a_1:{k + 1}", nonnegative=True)
    levels = [sp.Integer(1)]
    for _ in range(depth):
        levels.append(sp.expand(levels[-1] * sp.Add(*rates)))  # every node times each child rank's rate
    closed = KARY_EXPECTED_TOKENS.subs({p_k: sp.Add(*rates), tree_depth: depth})
    chain = KARY_EXPECTED_TOKENS.subs(p_k, alpha) - EXPECTED_TOKENS.subs(gamma, tree_depth)
    return sp.simplify(sp.Add(*levels) - closed), sp.simplify(chain)


def derive_oracle_speedup() -> sp.Expr:
    """E[N + 1] / E[N c + 1] for N ~ Geometric (P(N = n) = alpha^n (1 - alpha)), simplified.

    The oracle drafts the N tokens that will be accepted (N draft calls, one target call) and emits
    N + 1 tokens; renewal-reward makes the long-run speedup the ratio of expectations.
    """
    n = sp.Symbol("n", integer=True, nonnegative=True)
    odds = sp.Symbol("t", positive=True)  # alpha = 1 / (1 + t) in (0, 1): the series converge
    law = (1 + odds) ** (-n) * odds / (1 + odds)  # alpha^n (1 - alpha); sympy sums this form in 3 s, not 13
    tokens = sp.summation((n + 1) * law, (n, 0, sp.oo))
    cost = sp.summation((n * c + 1) * law, (n, 0, sp.oo))
    return sp.simplify((tokens / cost).subs(odds, 1 / alpha - 1))


# --- exact law of speculative sampling ----------------------------------------------------------------


def speculative_sampling_law(
    p: Sequence[Fraction], q: Sequence[Fraction], lenience: Fraction = Fraction(1)
) -> list[Fraction]:
    """The exact law of one token from speculative sampling (Leviathan et al. §2.3, appendix A.1).

    Draw x ~ q, accept with min(1, p(x) / (l q(x))); on rejection draw from norm(max(0, p - q)).
    With l = 1 the result is p for every q; with l < 1 no entry exceeds p(x) / l (appendix A.5).
    Rational in, rational out, no rounding.
    """
    accepted = [min(qi, pi / lenience) for pi, qi in zip(p, q)]  # q(x) min(1, p / (l q))
    rejected = 1 - sum(accepted)
    residual = [max(Fraction(0), pi - qi) for pi, qi in zip(p, q)]
    mass = sum(residual)
    if rejected == 0:
        return accepted
    return [acc + rejected * res / mass for acc, res in zip(accepted, residual)]
