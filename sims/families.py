"""Synthetic target/draft pairs (p, q) over a vocabulary of size V, and "contexts" of many pairs.

A pair stands for the target's and the draft's next-token distributions at one prefix. ``Contexts``
holds many such prefixes with their probabilities, so that beta = sum min(p, q) varies from position to
position and alpha = E[beta] (Leviathan et al. section 3.2). Every family is a pure function of its
arguments and an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_distribution, as_distribution_pair, as_positive_int, as_probability, as_real
from sims._stats import as_generator
from spectheory.acceptance import acceptance_probability, expected_acceptance, total_variation

__all__ = [
    "FAMILIES",
    "Contexts",
    "dirichlet_pairs",
    "zipf_pairs",
    "mix_to_acceptance",
    "contexts_with_alpha",
    "family_contexts",
]

#: The families ``family_contexts`` (and ``spectheory simulate --family``) can build.
FAMILIES = ("dirichlet", "zipf", "mixture")

#: Smallest Dirichlet parameter passed to numpy (it rejects 0, which a draft parameter a p(x) can hit).
_MIN_CONCENTRATION = 1e-12

#: Bisection steps in ``_tuned_to``: the bracket [0, 1] shrinks to 2^-60, below float64 resolution.
_BISECTION_STEPS = 60


@dataclass(frozen=True)
class Contexts:
    """K prefixes with target rows ``p: [K, V]``, draft rows ``q: [K, V]`` and probabilities ``weights: [K]``."""

    p: np.ndarray
    q: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        p, q = as_distribution_pair(self.p, self.q)
        weights = as_distribution("weights", self.weights)
        if p.ndim != 2 or weights.shape != p.shape[:1]:
            raise ValueError(
                f"p and q must have shape (K, V) and weights shape (K,), got {p.shape} and {weights.shape}"
            )
        for name, value in (("p", p), ("q", q), ("weights", weights)):
            object.__setattr__(self, name, value)

    @classmethod
    def single(cls, p, q) -> "Contexts":
        """One prefix: every position sees the same pair ``p, q: [V]``."""
        return cls(np.atleast_2d(p), np.atleast_2d(q), np.ones(1))

    @property
    def vocabulary(self) -> int:
        return self.p.shape[1]

    def beta(self, lenience: float = 1.0) -> np.ndarray:
        """beta_k = sum_x min(p_k(x) / l, q_k(x)) for each context (Theorem 3.5).  # [K]"""
        return acceptance_probability(self.p, self.q, lenience=lenience)

    def alpha(self, lenience: float = 1.0) -> float:
        """alpha = sum_k weights_k beta_k: the mean acceptance over positions."""
        return expected_acceptance(self.p, self.q, weights=self.weights, lenience=lenience)


def dirichlet_pairs(
    rng: np.random.Generator, vocabulary: int, count: int, *, concentration: float = 1.0, agreement: float = 10.0
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` pairs ``p, q: [count, V]``: p ~ Dirichlet(concentration), q ~ Dirichlet(agreement V p).

    ``agreement`` is the draft's concentration around the target: large values give q close to p (alpha
    near 1), small values a draft that knows little about p.
    """
    rng = as_generator(rng)
    vocabulary, count = as_positive_int("vocabulary", vocabulary), as_positive_int("count", count)
    concentration = float(as_real("concentration", concentration, low=0.0, low_open=True))
    agreement = float(as_real("agreement", agreement, low=0.0, low_open=True))
    p = rng.dirichlet(np.full(vocabulary, concentration), size=count)  # [count, V]
    q = np.stack([rng.dirichlet(np.maximum(agreement * vocabulary * row, _MIN_CONCENTRATION)) for row in p])
    return _renormalised(p), _renormalised(q)


def zipf_pairs(
    rng: np.random.Generator,
    vocabulary: int,
    count: int,
    *,
    exponent: float = 1.1,
    draft_temperature: float = 1.0,
    perturbation: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Zipf-shaped pairs ``[count, V]``: p(x) proportional to rank(x)^-exponent under a random ranking.

    The draft is p at ``draft_temperature`` with Gaussian noise of standard deviation ``perturbation``
    added to its log-probabilities: temperature 1 and no noise give q = p (alpha = 1).
    """
    rng = as_generator(rng)
    vocabulary, count = as_positive_int("vocabulary", vocabulary), as_positive_int("count", count)
    exponent = float(as_real("exponent", exponent, low=0.0))
    temperature = float(as_real("draft_temperature", draft_temperature, low=0.0, low_open=True))
    perturbation = float(as_real("perturbation", perturbation, low=0.0))
    ranks = np.argsort(rng.random((count, vocabulary)), axis=1) + 1  # [count, V], a random permutation of 1..V
    log_p = -exponent * np.log(ranks)
    log_q = log_p / temperature + perturbation * rng.standard_normal((count, vocabulary))
    return _softmax(log_p), _softmax(log_q)


def mix_to_acceptance(p, r, beta) -> np.ndarray:
    """The draft q = (1 - lam) p + lam r whose acceptance sum min(p, q) is exactly ``beta``.

    sum_x min(p, (1 - lam) p + lam r) = 1 - lam TV(p, r), so lam = (1 - beta) / TV(p, r); this needs
    beta >= 1 - TV(p, r). ``p, r: [..., V]``, ``beta: [...]``.
    """
    p, r = as_distribution_pair(p, r)
    beta = as_probability("beta", beta)
    distance = total_variation(p, r)  # [...]
    floor, beta = np.broadcast_arrays(1 - distance, beta)
    unreachable = beta < floor - 1e-12
    if np.any(unreachable):
        index = tuple(int(i) for i in np.argwhere(unreachable)[0])
        raise ValueError(
            f"beta must be at least 1 - TV(p, r) = {floor[index]:.6g} for this pair, got "
            f"{beta[index]:.6g}" + (f" at index {index}" if index else "")
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(distance > 0, (1 - beta) / distance, 0.0)[..., None]  # [..., 1]
    return _renormalised((1 - lam) * p + lam * r)


def contexts_with_alpha(
    rng: np.random.Generator,
    vocabulary: int,
    count: int,
    alpha: float,
    *,
    spread: float = 0.5,
    concentration: float = 1.0,
) -> Contexts:
    """``count`` equally likely contexts whose betas vary around mean ``alpha`` exactly.

    Targets p ~ Dirichlet(concentration); per-context betas b_k drawn from a Beta law with mean alpha
    whose standard deviation is ``spread`` times the largest possible one (0: every beta equals alpha),
    kept inside [max(1/V, min p), 1] and shifted until their mean is exactly alpha; each draft mixes p
    with a point mass on p's least likely token (``mix_to_acceptance``), a confident draft that is
    sometimes badly wrong.
    """
    rng = as_generator(rng)
    vocabulary, count = as_positive_int("vocabulary", vocabulary), as_positive_int("count", count)
    alpha = float(as_real("alpha", alpha, low=1.0 / vocabulary, high=1.0))
    spread = float(as_real("spread", spread, low=0.0, high=1.0))
    p = _renormalised(rng.dirichlet(np.full(vocabulary, concentration), size=count))  # [count, V]
    r = _least_likely_point_mass(p)  # [count, V]
    betas = _betas_with_mean(rng, alpha, spread, np.maximum(1.0 / vocabulary, p.min(axis=1) + 1e-12))
    return Contexts(p, mix_to_acceptance(p, r, betas), np.full(count, 1.0 / count))


def family_contexts(rng: np.random.Generator, family: str, vocabulary: int, count: int, alpha: float) -> Contexts:
    """Contexts of a named family tuned to mean acceptance ``alpha`` (the CLI's ``--family``).

    dirichlet and zipf: the draft is the family's pair, then mixed towards p or away from it until
    each context's beta equals ``alpha`` (every context then has the same beta); mixture: the
    varying-beta contexts of ``contexts_with_alpha``.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if family == "mixture":
        return contexts_with_alpha(rng, vocabulary, count, alpha)
    pairs = dirichlet_pairs if family == "dirichlet" else zipf_pairs
    p, q = pairs(rng, vocabulary, count)
    return Contexts(p, _tuned_to(p, q, alpha), np.full(count, 1.0 / count))


def _tuned_to(p: np.ndarray, q: np.ndarray, alpha: float) -> np.ndarray:
    """Each draft row moved until its beta equals ``alpha``, keeping as much of its shape as possible.

    Rows with beta < alpha shrink towards p: q' = p + s (q - p) has beta = 1 - s (1 - beta), so
    s = (1 - alpha) / (1 - beta). Rows with beta > alpha mix with a point mass e_m on p's least likely
    token, q' = (1 - t) q + t e_m, whose beta falls monotonically from beta to p(m) <= 1/V as t goes
    from 0 to 1; t is found by bisection.
    """
    alpha = float(as_probability("alpha", alpha))
    beta = 1 - total_variation(p, q)  # [K]
    point = _least_likely_point_mass(p)  # [K, V]
    if np.any(alpha < p.min(axis=1)):
        raise ValueError(f"alpha must be at least 1/V for this family, got {alpha!r}")
    low, high = np.zeros(len(p)), np.ones(len(p))  # [K], bracket of t
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        too_high = np.minimum(p, (1 - middle[:, None]) * q + middle[:, None] * point).sum(axis=1) > alpha
        low, high = np.where(too_high, middle, low), np.where(too_high, high, middle)
    mixed = (1 - high[:, None]) * q + high[:, None] * point
    scale = (1 - alpha) / np.maximum(1 - beta, np.finfo(float).tiny)  # [K], s < 1 where beta < alpha
    shrunk = p + np.minimum(scale, 1.0)[:, None] * (q - p)
    return _renormalised(np.where((beta < alpha)[:, None], shrunk, mixed))


def _betas_with_mean(rng: np.random.Generator, alpha: float, spread: float, floors: np.ndarray) -> np.ndarray:
    """Draws from a Beta law with mean alpha and sd = spread sqrt(alpha (1 - alpha)), one per entry of
    ``floors``, then shifted and clipped to [floors, 1] so that their mean is alpha (to 1e-15 when feasible)."""
    count = len(floors)
    if spread == 0 or alpha in (0.0, 1.0):
        betas = np.full(count, alpha)
    else:
        total = 1 / spread**2 - 1  # a + b: var = alpha (1 - alpha) / (a + b + 1)
        betas = rng.beta(max(alpha * total, 1e-3), max((1 - alpha) * total, 1e-3), size=count)
    low, high = -1.0, 1.0  # the shift s with mean(clip(betas + s, floors, 1)) = alpha, by bisection
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if np.clip(betas + middle, floors, 1.0).mean() < alpha else (low, middle)
    return np.clip(betas + high, floors, 1.0)


def _least_likely_point_mass(p: np.ndarray) -> np.ndarray:
    """One-hot rows on each row's least likely token: the confidently wrong draft.  # [K, V]"""
    return np.eye(p.shape[1])[np.argmin(p, axis=1)]


def _renormalised(values: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (removes the rounding that Dirichlet draws and mixes leave)."""
    return values / values.sum(axis=-1, keepdims=True)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return _renormalised(shifted)
