"""Blockwise parallel decoding (Stern et al. 2018) with k heads of given, optionally correlated, accuracy.

Head 1 is the base model and is always right; head i = 2..k is right (its token equals the base
model's greedy token) with marginal probability ``accuracies[i - 2]``. Heads can be correlated through
a Gaussian copula with equal correlation rho >= 0 between every pair (a shared "this span is easy"
factor): head i is right when sqrt(rho) W + sqrt(1 - rho) E_i < Phi^-1(accuracy_i). An iteration accepts
the base token, the first l - 1 proposals unconditionally (minimum block size l), then proposals while
they are right.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from plumbing.validation import as_positive_int, as_probability, as_real
from sims._draws import leading_true_count
from sims._stats import Estimate, as_generator, mean_estimate, ratio_estimate

__all__ = ["BlockwiseRun", "simulate_blockwise", "conditional_accuracies"]


@dataclass(frozen=True)
class BlockwiseRun:
    """Accepted block sizes ``block_sizes: [S, B]`` of S decodes of B blocks each."""

    heads: int
    block_sizes: np.ndarray

    def mean_block_size(self) -> Estimate:
        """Mean accepted block size E[k_hat], the figure of merit of Stern et al."""
        return mean_estimate(self.block_sizes.ravel())

    def model_calls_per_token(self, *, combined: bool) -> Estimate:
        """Model calls per decoded token: 2 B (proposal + scoring call per block) or B + 1 (combined
        scoring-and-proposal model, section 4), over the tokens of each decode."""
        blocks = self.block_sizes.shape[1]
        calls = blocks + 1 if combined else 2 * blocks
        tokens = self.block_sizes.sum(axis=1)  # [S]
        return ratio_estimate(np.full(len(tokens), calls), tokens)


def _validated(accuracies, correlation: float) -> tuple[np.ndarray, float]:
    accuracies = as_probability("accuracies", accuracies)
    if accuracies.ndim != 1:
        raise ValueError(f"accuracies must have shape (k - 1,), one per head 2..k, got {accuracies.shape}")
    return accuracies, float(as_real("correlation", correlation, low=0.0, high=1.0))


def simulate_blockwise(
    rng: np.random.Generator,
    accuracies,
    *,
    correlation: float = 0.0,
    min_block_size: int = 1,
    decodes: int = 1000,
    blocks: int = 100,
) -> BlockwiseRun:
    """``decodes`` decodes of ``blocks`` blocks with heads of marginal ``accuracies: [k - 1]`` (heads 2..k)."""
    rng = as_generator(rng)
    accuracies, correlation = _validated(accuracies, correlation)
    heads = len(accuracies) + 1
    min_block_size = int(as_real("min_block_size", min_block_size, low=1, high=heads, integer=True))
    shape = (as_positive_int("decodes", decodes), as_positive_int("blocks", blocks))
    shared = rng.standard_normal(shape + (1,))  # [S, B, 1], W
    own = rng.standard_normal(shape + (len(accuracies),))  # [S, B, k - 1], E_i
    latent = np.sqrt(correlation) * shared + np.sqrt(1 - correlation) * own
    right = latent < stats.norm.ppf(accuracies)  # [S, B, k - 1]
    return BlockwiseRun(heads, min_block_size + leading_true_count(right[..., min_block_size - 1 :]))


def conditional_accuracies(accuracies, correlation: float) -> np.ndarray:
    """a_i = P(head i right | heads 2..i-1 right) under the copula, for ``spectheory.blockwise``.  # [k - 1]

    P(heads 2..i all right) is a multivariate normal CDF (scipy's, accurate to about 1e-6); with
    correlation 0 the conditional accuracies are the marginal ones.
    """
    accuracies, correlation = _validated(accuracies, correlation)
    thresholds = stats.norm.ppf(accuracies)
    all_right = [1.0]
    for i in range(1, len(accuracies) + 1):
        covariance = np.full((i, i), correlation) + (1 - correlation) * np.eye(i)
        all_right.append(
            float(stats.multivariate_normal(np.zeros(i), covariance).cdf(thresholds[:i]))
            if i > 1
            else float(accuracies[0])
        )
    all_right = np.array(all_right)
    ratio = np.divide(all_right[1:], all_right[:-1], out=np.zeros(len(accuracies)), where=all_right[:-1] > 0)
    return np.clip(ratio, 0.0, 1.0)  # the CDF's integration error can push a ratio just past 1
