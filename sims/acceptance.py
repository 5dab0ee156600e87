"""Acceptance processes: how many draft tokens an iteration accepts, without simulating tokens.

i.i.d. Bernoulli(alpha) acceptance gives Eq. 1 and the truncated geometric law of the accepted count;
position-dependent rates a_1..a_gamma give docs/theory.md §4's product formula; Markov-modulated regimes
(easy and hard spans along the token stream) make acceptances correlated, so that iterations are no
longer independent of each other and Eq. 1 at the same mean alpha is biased.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_count, as_positive_int, as_probability
from sims._draws import RowSampler, leading_true_count
from sims._stats import Estimate, as_generator, mean_estimate
from spectheory.positional import MarkovAcceptance

__all__ = ["AcceptanceRun", "MarkovRun", "simulate_iid", "simulate_positional", "simulate_markov"]


@dataclass(frozen=True)
class AcceptanceRun:
    """Accepted draft tokens ``accepted: [N]`` of N independent iterations with ``gamma`` draft tokens."""

    gamma: int
    accepted: np.ndarray

    def tokens_per_iteration(self) -> Estimate:
        """Mean tokens per iteration, with the correction/bonus token (Eq. 1)."""
        return mean_estimate(self.accepted + 1)

    def accepted_distribution(self) -> np.ndarray:
        """Observed frequencies of n = 0..gamma accepted draft tokens.  # [gamma + 1]"""
        return np.bincount(self.accepted, minlength=self.gamma + 1) / len(self.accepted)


@dataclass(frozen=True)
class MarkovRun:
    """Markov-modulated acceptance along ``streams`` independent token streams.

    ``tokens_per_stream: [R]`` the tokens of the counted iterations of each stream (each stream counts
    the same number of iterations, after a burn-in); ``accepted_counts: [gamma + 1]`` how many counted
    iterations accepted n = 0..gamma draft tokens. Iterations inside a stream are correlated, so the
    standard error is taken over streams.
    """

    gamma: int
    iterations_per_stream: int
    tokens_per_stream: np.ndarray
    accepted_counts: np.ndarray

    def tokens_per_iteration(self) -> Estimate:
        """Long-run tokens / iterations, with its standard error over independent streams."""
        return mean_estimate(self.tokens_per_stream / self.iterations_per_stream)

    def accepted_distribution(self) -> np.ndarray:
        """Observed frequencies of n = 0..gamma accepted draft tokens.  # [gamma + 1]"""
        return self.accepted_counts / self.accepted_counts.sum()


def simulate_iid(rng: np.random.Generator, alpha: float, gamma: int, iterations: int) -> AcceptanceRun:
    """Each draft token accepted independently with probability ``alpha`` (the assumption of Eq. 1).

    The run of successes before the first failure of independent Bernoulli(alpha) trials has
    P(run >= k) = alpha^k, so it is drawn by inversion from one uniform per iteration,
    run = floor(log U / log alpha) with U in (0, 1], and cut at gamma (``simulate_positional`` draws
    every trial instead, at gamma times the cost).
    """
    rng = as_generator(rng)
    alpha = float(as_probability("alpha", alpha))
    gamma = int(as_count("gamma", gamma))
    iterations = as_positive_int("iterations", iterations)
    if alpha in (0.0, 1.0):
        return AcceptanceRun(gamma, np.full(iterations, gamma if alpha == 1 else 0, dtype=np.int64))
    run = np.floor(np.log1p(-rng.random(iterations)) / np.log(alpha))  # [N], log U with U = 1 - random in (0, 1]
    return AcceptanceRun(gamma, np.minimum(run, gamma).astype(np.int64))


def simulate_positional(rng: np.random.Generator, acceptance, iterations: int) -> AcceptanceRun:
    """Draft position i accepted with probability ``acceptance[i]`` given positions before it were.

    ``acceptance: [gamma]``; an empty array is autoregressive decoding (one token per iteration).
    """
    rng = as_generator(rng)
    acceptance = as_probability("acceptance", acceptance)
    if acceptance.ndim != 1:
        raise ValueError(f"acceptance must have shape (gamma,), got {acceptance.shape}")
    iterations = as_positive_int("iterations", iterations)
    draws = rng.random((iterations, len(acceptance))) < acceptance  # [N, gamma]
    return AcceptanceRun(len(acceptance), leading_true_count(draws))


def simulate_markov(
    rng: np.random.Generator,
    chain: MarkovAcceptance,
    gamma: int,
    *,
    streams: int = 2000,
    iterations_per_stream: int = 200,
    burn_in_iterations: int = 20,
) -> MarkovRun:
    """Speculative iterations along token streams whose regime follows ``chain`` (docs/theory.md §4).

    Every emitted token occupies one position of the stream, and the regime moves one step of the chain
    per position whatever is accepted. A draft position in regime r is accepted with probability
    ``chain.acceptance[r]``; an iteration ends at its first rejected position (the correction token
    takes that position) or at its bonus position. Streams start in the token-level stationary law;
    the first ``burn_in_iterations`` of each stream are not counted, the next ``iterations_per_stream``
    are. The loop runs over positions, each step vectorised over all streams.
    """
    rng = as_generator(rng)
    if not isinstance(chain, MarkovAcceptance):
        raise ValueError(f"chain must be a spectheory.positional.MarkovAcceptance, got {type(chain).__name__}")
    gamma = int(as_count("gamma", gamma))
    streams = as_positive_int("streams", streams)
    counted = as_positive_int("iterations_per_stream", iterations_per_stream)
    burn_in = int(as_count("burn_in_iterations", burn_in_iterations))
    moves = RowSampler(chain.transition)
    regime = rng.choice(len(chain.acceptance), size=streams, p=chain.stationary)  # [R]
    index = np.zeros(streams, dtype=np.int64)  # [R], accepted drafts so far in the current iteration
    finished = np.zeros(streams, dtype=np.int64)  # [R], completed iterations
    tokens = np.zeros(streams, dtype=np.int64)  # [R], tokens of counted iterations
    histogram = np.zeros(gamma + 1, dtype=np.int64)
    while finished.min() < burn_in + counted:
        accepted = (index < gamma) & (rng.random(streams) < chain.acceptance[regime])
        ends = ~accepted  # a rejection (correction token here) or the bonus position
        counts = ends & (finished >= burn_in) & (finished < burn_in + counted)
        tokens += np.where(counts, index + 1, 0)
        histogram += np.bincount(index[counts], minlength=gamma + 1)
        finished += ends
        index = np.where(ends, 0, index + 1)
        regime = moves.draw(rng, regime)
    return MarkovRun(gamma, counted, tokens, histogram)
