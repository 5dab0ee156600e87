"""Acceptance beyond the i.i.d. assumption: position-dependent and Markov-correlated (docs/theory.md §4).

Eq. 1 assumes every draft position is accepted independently with the same probability alpha. Here
the acceptance probability depends on the position inside the iteration, or on a hidden "regime"
(easy span, hard span, ...) that follows a Markov chain along the token stream, so that acceptances
are correlated. The mean acceptance alpha is then the stationary mean over token positions, which is
what the paper estimates (E[beta] over the prefixes met while decoding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_count, as_distribution, as_probability
from spectheory.speedup import expected_tokens

__all__ = [
    "expected_tokens_positional",
    "expected_iterations_along",
    "accepted_count_distribution",
    "MarkovAcceptance",
    "markov_expected_tokens_from",
    "markov_iteration_start_distribution",
    "markov_expected_tokens",
    "markov_eq1_bias",
]


def expected_tokens_positional(acceptance) -> np.ndarray:
    """E[tokens per iteration] = 1 + sum_{i=1..gamma} prod_{j<=i} a_j (docs/theory.md §4).

    ``acceptance: [..., gamma]``, a_i = P(draft i accepted | drafts 1..i-1 accepted). Reduces to Eq. 1
    when every a_i = alpha.
    """
    acceptance = as_probability("acceptance", acceptance)
    if acceptance.ndim == 0:
        raise ValueError("acceptance must have a last axis of positions, got a scalar")
    return 1 + np.cumprod(acceptance, axis=-1).sum(axis=-1)


def accepted_count_distribution(acceptance) -> np.ndarray:
    """The law of the number n of accepted draft tokens, ``[..., gamma] -> [..., gamma + 1]``.

    P(n = k) = prod_{j<=k} a_j (1 - a_{k+1}) for k < gamma and prod_{j<=gamma} a_j for k = gamma; with
    every a_j = alpha this is the truncated geometric law behind Eq. 1 (tokens per iteration = n + 1).
    """
    acceptance = as_probability("acceptance", acceptance)
    if acceptance.ndim == 0:
        raise ValueError("acceptance must have a last axis of positions, got a scalar")
    reach = np.cumprod(acceptance, axis=-1)  # [..., gamma], P(n >= k) for k = 1..gamma
    edge = np.ones(reach.shape[:-1] + (1,))
    at_least = np.concatenate([edge, reach, 0 * edge], axis=-1)  # P(n >= k), k = 0..gamma + 1
    return at_least[..., :-1] - at_least[..., 1:]


def expected_iterations_along(acceptance, gamma: int) -> float:
    """E[iterations] to emit the ``N`` tokens of a text whose position t is accepted with probability
    ``acceptance[t]`` (``[N]``, independently given the text) when drafted from the right prefix, at ``gamma``
    (docs/theory.md §4). An iteration from position s accepts s, s+1, ... until a rejection or gamma
    acceptances, then emits one more token: f(s) = 1 + sum_k P(k accepted from s) f(s + k + 1), f(s >= N) = 0.
    Unlike the positional formula it keeps the order of easy and hard spans along the text. The result is
    multilinear in the acceptance values, so 0/1 outcomes observed in a run estimate it without bias."""
    values = as_probability("acceptance", acceptance)
    gamma = int(as_count("gamma", gamma))
    if values.ndim != 1 or gamma < 1:
        raise ValueError(
            f"acceptance must be one text's [N] values and gamma >= 1, got shape {values.shape}, gamma {gamma}"
        )
    length = len(values)
    padded = np.concatenate([values, np.zeros(gamma + 1)])
    f = np.zeros(length + gamma + 2)  # f[s] = 0 for s >= N
    for s in range(length - 1, -1, -1):
        window = padded[s : s + gamma]  # [gamma]
        reach = np.concatenate([[1.0], np.cumprod(window)])  # P(at least k accepted), k = 0..gamma
        law = reach - np.concatenate([reach[1:], [0.0]])  # P(exactly k accepted), k = 0..gamma
        f[s] = 1 + law @ f[s + 1 : s + gamma + 2]
    return float(f[0])


@dataclass(frozen=True)
class MarkovAcceptance:
    """Regimes following a Markov chain along the token stream, each with its acceptance probability.

    ``transition: [K, K]`` row-stochastic and irreducible, transition[r, s] = P(regime s at the next
    position | regime r); ``acceptance: [K]``, the probability that a draft token is accepted at a
    position in regime r. Validated once, here; the functions below take an instance.
    """

    transition: np.ndarray
    acceptance: np.ndarray

    def __post_init__(self) -> None:
        transition = as_distribution("transition", self.transition)  # [K, K]
        acceptance = as_probability("acceptance", self.acceptance)  # [K]
        if acceptance.ndim != 1 or transition.shape != acceptance.shape * 2:
            raise ValueError(
                f"transition must have shape (K, K) and acceptance shape (K,), got "
                f"{transition.shape} and {acceptance.shape}"
            )
        object.__setattr__(self, "transition", transition)
        object.__setattr__(self, "acceptance", acceptance)

    @property
    def stationary(self) -> np.ndarray:
        """The stationary regime distribution pi over token positions, pi P = pi.  # [K]"""
        return _stationary(self.transition)

    @property
    def mean_acceptance(self) -> float:
        """alpha = pi . acceptance: E[beta] over the positions of the token stream."""
        return float(self.stationary @ self.acceptance)


def _stationary(transition: np.ndarray) -> np.ndarray:
    """The stationary distribution of an irreducible chain: solve pi (P - I) = 0 with sum(pi) = 1."""
    size = transition.shape[0]
    system = np.vstack([transition.T - np.eye(size), np.ones(size)])  # [K + 1, K]
    target = np.zeros(size + 1)
    target[-1] = 1.0
    solution, *_ = np.linalg.lstsq(system, target, rcond=None)
    return solution


def _accepted_paths(chain: MarkovAcceptance, gamma: int) -> list[np.ndarray]:
    """U_0..U_gamma with U_i[r, s] = P(drafts 1..i accepted, regime s at position i | regime r at 0).

    U_0 = I and U_{i+1} = U_i diag(acceptance) P: accepted at the current position, then move on.
    """
    step = chain.acceptance[:, None] * chain.transition  # [K, K] = diag(a) P
    paths = [np.eye(len(chain.acceptance))]
    for _ in range(gamma):
        paths.append(paths[-1] @ step)
    return paths


def markov_expected_tokens_from(chain: MarkovAcceptance, gamma: int) -> np.ndarray:
    """E[tokens in one iteration | regime r at its first position], for each r: 1 + sum_i U_i 1.  # [K]"""
    gamma = int(as_count("gamma", gamma))
    return 1 + sum(path.sum(axis=1) for path in _accepted_paths(chain, gamma)[1:])


def markov_iteration_start_distribution(chain: MarkovAcceptance, gamma: int) -> np.ndarray:
    """The long-run regime distribution at the first position of an iteration.  # [K]

    Iterations start right after a rejected position (its correction token) or after the bonus token,
    so this is not the token-level stationary distribution: the chain of start regimes has kernel
    sum_{i<gamma} U_i diag(1 - a) P + U_gamma P.
    """
    gamma = int(as_count("gamma", gamma))
    paths = _accepted_paths(chain, gamma)
    rejected = (1 - chain.acceptance)[:, None] * chain.transition  # [K, K] = diag(1 - a) P
    kernel = sum(path @ rejected for path in paths[:-1]) + paths[-1] @ chain.transition
    return _stationary(kernel)


def markov_expected_tokens(chain: MarkovAcceptance, gamma: int) -> float:
    """Long-run mean tokens per iteration (tokens / iterations) under Markov-modulated acceptance."""
    start = markov_iteration_start_distribution(chain, gamma)
    return float(start @ markov_expected_tokens_from(chain, gamma))


def markov_eq1_bias(chain: MarkovAcceptance, gamma: int) -> float:
    """Exact long-run tokens per iteration minus Eq. 1 at the same mean alpha (pi . acceptance)."""
    return markov_expected_tokens(chain, gamma) - float(expected_tokens(chain.mean_acceptance, gamma))
