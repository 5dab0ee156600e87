"""Expected tokens, walltime improvement, operations, optimal gamma (Leviathan et al. section 3; docs/theory.md §3).

All functions are vectorised: array arguments broadcast against each other. ``alpha`` is the mean
acceptance probability E[beta], ``gamma`` the number of draft tokens per iteration, ``c`` the cost of
one draft call relative to one target call, ``c_hat`` the draft's arithmetic per token relative to the
target's. gamma = 0 is plain autoregressive decoding (one token per target call, speedup 1).
"""

from __future__ import annotations

import numpy as np

from plumbing.validation import as_cost, as_count, as_probability, as_real
from spectheory.optimum import beats

__all__ = [
    "expected_tokens",
    "walltime_improvement",
    "operations_factor",
    "improvement_lower_bound",
    "memory_traffic_reduction",
    "oracle_speedup",
    "continuous_optimal_gamma",
    "optimal_gamma",
    "oracle_gain",
    "alpha_from_tokens_per_iteration",
    "GAMMA_MAX_LIMIT",
]

GAMMA_MAX_LIMIT = 10**6  # far beyond any useful draft length, and int64-safe in every formula here


def expected_tokens(alpha, gamma) -> np.ndarray:
    """E[tokens per iteration] = (1 - alpha^(gamma+1)) / (1 - alpha) (Eq. 1); gamma + 1 at alpha = 1.

    Computed as expm1((gamma+1) log alpha) / (alpha - 1), which keeps full precision as alpha -> 1;
    exact (gamma + 1) at alpha = 1 and at gamma = 0. ``gamma`` may be real (for the continuous optimum)
    or +inf (the limit 1 / (1 - alpha)).
    """
    alpha = as_probability("alpha", alpha)
    gamma = as_count("gamma", gamma, integer=False, allow_inf=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = np.expm1((gamma + 1) * np.log(alpha)) / (alpha - 1)
    return np.where((alpha == 1) | (gamma == 0), gamma + 1, geometric)


def walltime_improvement(alpha, gamma, c) -> np.ndarray:
    """S = (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)): walltime speedup (Theorem 3.8)."""
    c = as_cost("c", c)
    return expected_tokens(alpha, gamma) / (as_count("gamma", gamma, integer=False) * c + 1)


def operations_factor(alpha, gamma, c_hat=0.0) -> np.ndarray:
    """Arithmetic operations relative to autoregressive decoding (Theorem 3.11).

    (gamma c_hat + gamma + 1) / E[tokens]: gamma draft runs and gamma + 1 parallel target positions per
    iteration, divided by the tokens the iteration yields.
    """
    c_hat = as_cost("c_hat", c_hat)
    gamma_values = as_count("gamma", gamma, integer=False)
    return (gamma_values * c_hat + gamma_values + 1) / expected_tokens(alpha, gamma)


def improvement_lower_bound(alpha, c) -> np.ndarray:
    """(1 + alpha) / (1 + c): the speedup at gamma = 1, a lower bound on the best one (Corollary 3.9).

    Speculation helps (the bound exceeds 1) exactly when alpha > c.
    """
    return (1 + as_probability("alpha", alpha)) / (1 + as_cost("c", c))


def memory_traffic_reduction(alpha, gamma, m_hat=0.0) -> np.ndarray:
    """Factor by which memory reads per generated token shrink (section 3.4).

    The target's weights and KV cache are read once per iteration instead of once per token; the draft
    reads ``m_hat`` times the target's bytes on each of its gamma calls. The factor is
    E[tokens] / (gamma m_hat + 1) -- Theorem 3.8 with c replaced by m_hat, which is why c ~ m_hat when
    decoding is memory-bound. With m_hat = 0 it is E[tokens] itself.
    """
    return walltime_improvement(alpha, gamma, as_cost("m_hat", m_hat))


def oracle_speedup(alpha, c) -> np.ndarray:
    """Walltime speedup with an oracle gamma: 1 / (1 - alpha + c alpha) (section 3.5, 'dynamic gamma').

    The oracle drafts exactly the N tokens that will be accepted, N ~ Geometric: P(N = n) = alpha^n
    (1 - alpha). An iteration then yields N + 1 tokens (E = 1 / (1 - alpha), as the paper states) at
    cost N c + 1 target calls; by renewal-reward the speedup is E[N + 1] / E[N c + 1].
    """
    alpha = as_probability("alpha", alpha)
    with np.errstate(divide="ignore"):  # alpha = 1, c = 0: unbounded, +inf
        return 1 / (1 - alpha + as_cost("c", c) * alpha)


def _log1p_root(excess: np.ndarray) -> np.ndarray:
    """The root s > 0 of s - log1p(s) = excess (> 0), i.e. s = -W_{-1}(-exp(-1 - excess)) - 1.

    W_{-1} is evaluated by Newton's method on this defining equation rather than by
    scipy.special.lambertw, which loses accuracy near the branch point -1/e (alpha or c near 1: for
    excess = 1e-10 it gives s = 3e-10 where s = 1.4e-5). The start excess + sqrt(2 excess) lies right
    of the root for every excess > 0, where Newton on this convex increasing function converges
    monotonically; three steps reach float precision (checked against mpmath for excess in
    [1e-14, 1e14]), the fourth is a margin.
    """
    s = excess + np.sqrt(2 * excess)
    for _ in range(4):
        s = s - (s - np.log1p(s) - excess) * ((1 + s) / s)
    return s


def continuous_optimal_gamma(alpha, c) -> np.ndarray:
    """The real gamma >= 0 that maximises Theorem 3.8, in closed form (Lambert W).

    Setting dS/dgamma = 0 and substituting gives gamma* = (1 + W_{-1}(z)) / log(alpha) - 1/c with
    z = -exp(-1) alpha^((1 - c)/c); ``spectheory.symbolic.derive_optimal_gamma`` derives it with sympy.
    With s = -W_{-1}(z) - 1, the root of s - log1p(s) = -log(alpha)(1 - c)/c, this is
    gamma* = log1p(s) / (-log alpha) - 1, which avoids cancelling against 1/c for small c.
    S is quasi-concave in gamma, so this stationary point is the maximum. Returns +inf where S grows
    without bound (c = 0 < alpha, or alpha = 1 > c), and 0 where S does not increase from gamma = 0.
    """
    alpha, c = np.broadcast_arrays(as_probability("alpha", alpha), as_cost("c", c))
    interior = (alpha > 0) & (alpha < 1) & (c > 0) & (c < 1)
    unbounded = ((c == 0) & (alpha > 0)) | ((alpha == 1) & (c < 1))
    decay = -np.log(np.where(interior, alpha, 0.5))  # -log(alpha) > 0 on the interior
    c_safe = np.where(interior, c, 0.5)
    with np.errstate(over="ignore"):
        excess = decay * (1 - c_safe) / c_safe  # > 0 on the interior; huge or +inf for subnormal c
    moderate = excess < 1e300
    # Beyond that, s = excess + log1p(s) makes log1p(s) = log(excess) to double precision.
    log_root = np.where(
        moderate,
        np.log1p(_log1p_root(np.where(moderate, excess, 1.0))),
        np.log(decay) + np.log1p(-c_safe) - np.log(c_safe),
    )
    stationary = log_root / decay - 1
    return np.where(unbounded, np.inf, np.where(interior, np.maximum(stationary, 0.0), 0.0))


def optimal_gamma(alpha, c, gamma_max: int = 64) -> np.ndarray:
    """The integer gamma in [0, gamma_max] that maximises the walltime improvement (Theorem 3.8), ties within
    ``spectheory.optimum.TIE_RTOL`` going to the smaller gamma (docs/theory.md §3).

    Found without scanning: S is quasi-concave in gamma, so the integer optimum is the floor n or the
    ceiling n + 1 of the continuous optimum (capped at ``gamma_max``), and the gammas tied with it form one
    run below it, walked down to its first. At n = 0 this is Corollary 3.9: gamma = 0 (do not speculate)
    unless alpha exceeds c by more than the tolerance. ``gamma_max`` is at most ``GAMMA_MAX_LIMIT``.
    """
    gamma_max = int(as_real("gamma_max", gamma_max, low=1, high=GAMMA_MAX_LIMIT, integer=True))
    capped = np.minimum(continuous_optimal_gamma(alpha, c), gamma_max)
    alpha, c = as_probability("alpha", alpha), as_cost("c", c)
    lower = np.floor(capped)
    upper = np.minimum(lower + 1, gamma_max)
    at_lower, at_upper = walltime_improvement(alpha, lower, c), walltime_improvement(alpha, upper, c)
    best = np.maximum(at_lower, at_upper)
    gamma = np.where(beats(at_upper, at_lower), upper, lower)
    while True:  # at most gamma_max steps
        below = np.maximum(gamma - 1, 0)
        tied = (gamma > 0) & ~beats(best, walltime_improvement(alpha, below, c))
        if not np.any(tied):
            return gamma.astype(np.int64)
        gamma = np.where(tied, below, gamma)


def oracle_gain(alpha, c, gamma_max: int = 64) -> np.ndarray:
    """Oracle-gamma speedup divided by the speedup of the best fixed gamma <= gamma_max."""
    best = walltime_improvement(alpha, optimal_gamma(alpha, c, gamma_max), c)
    return oracle_speedup(alpha, c) / best


def alpha_from_tokens_per_iteration(tokens_per_iteration, gamma) -> np.ndarray:
    """The alpha for which Eq. 1 gives the measured mean tokens per iteration at this gamma.

    Eq. 1 is strictly increasing in alpha for gamma >= 1, so 60 bisection halvings of [0, 1] pin alpha
    to float64 precision. ``tokens_per_iteration`` counts the correction/bonus token and lies in
    [1, gamma + 1].
    """
    gamma = as_real("gamma", gamma, low=1, integer=True)
    tokens = as_real("tokens_per_iteration", tokens_per_iteration, low=1)
    tokens, gamma = np.broadcast_arrays(tokens, gamma)
    too_many = tokens > gamma + 1
    if np.any(too_many):
        index = tuple(int(i) for i in np.argwhere(too_many)[0])
        raise ValueError(
            f"tokens_per_iteration must be at most gamma + 1 = {gamma[index] + 1:g}, got {tokens[index].item()!r}"
        )
    low, high = np.zeros(tokens.shape), np.ones(tokens.shape)
    for _ in range(60):
        middle = (low + high) / 2
        below = expected_tokens(middle, gamma) < tokens
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    return (low + high) / 2
