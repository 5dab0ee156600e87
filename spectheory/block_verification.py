"""Token verification vs block verification (Sun et al. 2024, arXiv 2403.10444; docs/theory.md §5).

Exact expectations for small vocabularies by enumerating every draft block x_1..x_gamma. The target
and draft distributions are given per position and do not depend on the drafted prefix:
``target, draft: [gamma, V]``, row i holding the distributions P_{i+1}, Q_{i+1} at draft position i + 1.
"""

from __future__ import annotations

import numpy as np

from plumbing.validation import as_distribution_pair
from spectheory.acceptance import excess
from spectheory.positional import accepted_count_distribution

__all__ = [
    "MAX_BLOCKS",
    "CHAIN_VERIFIERS",
    "draft_blocks",
    "accepted_length_given_block",
    "accepted_length_distribution",
    "expected_accepted_tokens",
]

#: Largest number of draft blocks V^gamma that the enumeration accepts.
MAX_BLOCKS = 1 << 20

CHAIN_VERIFIERS = ("token", "block")


def _validated(target, draft) -> tuple[np.ndarray, np.ndarray]:
    target, draft = as_distribution_pair(target, draft)
    if target.ndim != 2:
        raise ValueError(f"target and draft must have shape (gamma, V), got {target.shape}")
    gamma, vocabulary = target.shape
    if vocabulary**gamma > MAX_BLOCKS:
        raise ValueError(f"V^gamma = {vocabulary}^{gamma} draft blocks exceed MAX_BLOCKS = {MAX_BLOCKS}")
    return target, draft


def draft_blocks(target, draft) -> tuple[np.ndarray, np.ndarray]:
    """Every draft block with positive draft probability: ``[N, gamma]`` token ids and ``[N]`` probabilities."""
    _, draft = _validated(target, draft)
    gamma, vocabulary = draft.shape
    blocks = np.indices((vocabulary,) * gamma).reshape(gamma, -1).T  # [V^gamma, gamma]
    probability = np.prod(draft[np.arange(gamma), blocks], axis=1)  # [V^gamma]
    keep = probability > 0
    return blocks[keep], probability[keep]


def accepted_length_given_block(target, draft, blocks, *, verifier: str) -> np.ndarray:
    """P(tau = i | block) for i = 0..gamma, ``[N, gamma + 1]``; ``blocks`` from ``draft_blocks``.

    token: tau is the first rejection; P(tau >= i | x) = prod_{j<=i} min(1, P_j(x_j) / Q_j(x_j)).
    block: with p_0 = 1 and p_i = min(1, p_{i-1} P_i(x_i) / Q_i(x_i)),
    h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i) where Z_{i+1} = sum_y max(0, p_i P_{i+1}(y) - Q_{i+1}(y)),
    h_gamma = p_gamma, and tau is the largest i with eta_i <= h_i: P(tau = i | x) = h_i prod_{j>i}(1 - h_j).
    """
    target, draft = _validated(target, draft)
    if verifier not in CHAIN_VERIFIERS:
        raise ValueError(f"verifier must be one of {CHAIN_VERIFIERS}, got {verifier!r}")
    positions = np.arange(draft.shape[0])
    ratio = target[positions, blocks] / draft[positions, blocks]  # [N, gamma], P_i(x_i) / Q_i(x_i)
    if verifier == "token":
        return accepted_count_distribution(np.minimum(1.0, ratio))
    return _block_tau_law(target, draft, ratio)


def _block_tau_law(target: np.ndarray, draft: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The block verifier's law of tau given each block; see ``accepted_length_given_block``."""
    count, gamma = ratio.shape
    path = np.ones((count, gamma + 1))  # [N, gamma + 1], p_0..p_gamma
    for i in range(gamma):
        path[:, i + 1] = np.minimum(1.0, path[:, i] * ratio[:, i])
    stop = np.empty((count, gamma + 1))  # [N, gamma + 1], h_0..h_gamma (h_0 = 1: tau >= 0 always)
    stop[:, 0], stop[:, gamma] = 1.0, path[:, gamma]
    for i in range(1, gamma):
        mass = excess(path[:, i, None] * target[i], draft[i]).sum(axis=1)  # [N], Z_{i+1}
        denominator = mass + 1 - path[:, i]
        # p_i = 1 and Z_{i+1} = 0 only when everything so far was accepted with certainty: keep it.
        stop[:, i] = np.divide(mass, denominator, out=np.ones(count), where=denominator > 0)
    # P(tau = i) = h_i prod_{j>i} (1 - h_j): the product of misses above i, by reversed cumprod.
    misses_above = np.cumprod((1 - stop)[:, :0:-1], axis=1)[:, ::-1]  # [N, gamma], prod_{j>i} for i < gamma
    misses_above = np.concatenate([misses_above, np.ones((count, 1))], axis=1)  # [N, gamma + 1]
    return stop * misses_above


def accepted_length_distribution(target, draft, *, verifier: str) -> np.ndarray:
    """The law of the number of accepted draft tokens tau, ``[gamma + 1]``, under the given verifier."""
    blocks, probability = draft_blocks(target, draft)
    return probability @ accepted_length_given_block(target, draft, blocks, verifier=verifier)


def expected_accepted_tokens(target, draft, *, verifier: str) -> float:
    """E[tau], the expected number of accepted draft tokens (add 1 for the correction/bonus token)."""
    law = accepted_length_distribution(target, draft, verifier=verifier)
    return float(law @ np.arange(len(law)))
