"""Acceptance of draft tokens: D_LK, total variation, beta, alpha, lenience, rejection sampling (docs/theory.md §2).

Every function takes target ``p`` and draft ``q`` as probability vectors along the last axis and is
batched over any leading axes: ``p, q: [..., V] -> [...]``. Sampling settings (temperature, top-k, ...)
must already be folded into p and q (Leviathan et al. section 2.2).
"""

from __future__ import annotations

import numpy as np

from plumbing.validation import SUM_TOLERANCE, as_distribution_pair, as_lenience, as_real

__all__ = [
    "excess",
    "d_lk",
    "total_variation",
    "acceptance_probability",
    "expected_acceptance",
    "rejection_sampling_acceptance",
]


def d_lk(p, q, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """D_LK(p, q) = sum_x |p(x) - M(x)| with M = (p + q) / 2 (Leviathan et al. section 3.2).

    Symmetric, in [0, 1], and equal to ``1 - sum_x min(p, q)`` and to the total variation (Lemma 3.3).
    """
    p, q = as_distribution_pair(p, q, atol=atol)
    midpoint = (p + q) / 2
    return np.abs(p - midpoint).sum(axis=-1)


def total_variation(p, q, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """TV(p, q) = (1/2) sum_x |p(x) - q(x)|; equals D_LK by Lemma 3.3."""
    p, q = as_distribution_pair(p, q, atol=atol)
    return 0.5 * np.abs(p - q).sum(axis=-1)


def acceptance_probability(p, q, *, lenience: float = 1.0, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """beta = sum_x min(p(x) / l, q(x)): the probability that a token drawn from q is accepted.

    With ``lenience`` l = 1 this is Theorem 3.5, beta = 1 - D_LK(p, q). With l < 1 the accept test is
    min(1, p / (l q)) (appendix A.5), so beta grows while no token is emitted more than p(x) / l.
    """
    p, q = as_distribution_pair(p, q, atol=atol)
    lenience = as_lenience(lenience)
    return np.minimum(p / lenience[..., None], q).sum(axis=-1)


def expected_acceptance(p, q, *, weights=None, lenience: float = 1.0, atol: float = SUM_TOLERANCE) -> float:
    """alpha = E[beta] over the contexts (prefixes) met while decoding (section 3.2).

    ``p, q: [N, V]``, one row per context; ``weights: [N]`` their probabilities (uniform if omitted).
    """
    beta = acceptance_probability(p, q, lenience=lenience, atol=atol)  # [N]
    if weights is None:
        return float(np.mean(beta))
    weights = as_real("weights", weights, low=0.0)
    if weights.shape != beta.shape:
        raise ValueError(f"weights must have shape {beta.shape} (one per context), got {weights.shape}")
    if not weights.sum() > 0:
        raise ValueError(f"weights must have a positive sum, got {weights.sum()!r}")
    return float(np.sum(weights * beta) / weights.sum())


def rejection_sampling_acceptance(p, q, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """Acceptance of one round of rejection sampling, sum_x p(x) / M with M = max_x p(x)/q(x) (A.2).

    Always <= beta; 0 when p puts mass where q has none (M is infinite).
    """
    p, q = as_distribution_pair(p, q, atol=atol)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, p / q, 0.0)  # [..., V]; +inf where q(x) = 0 < p(x)
    bound = ratio.max(axis=-1)  # [...]; M >= 1 because p and q both sum to 1
    return p.sum(axis=-1) / bound


def excess(r, q) -> np.ndarray:
    """(r - q)+, unnormalised: the mass a rejection of a draw from q leaves of the law r (docs/theory.md §1); the
    numpy rule the theory and the simulators share (the decoders' is ``decoders.verification.excess``)."""
    return np.maximum(np.asarray(r, dtype=float) - q, 0.0)
