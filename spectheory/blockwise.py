"""Blockwise parallel decoding (Stern, Shazeer, Uszkoreit 2018; docs/theory.md §6).

k heads predict positions j+1..j+k; head 1 is the base model, whose greedy token is always accepted,
so an iteration accepts k_hat in [1, k] tokens. Heads 2..k are described by conditional accuracies:
a_i = P(head i's token equals the base model's greedy token | heads 2..i-1 were right).
"""

from __future__ import annotations

import numpy as np

from plumbing.validation import as_count, as_probability, as_real
from spectheory.positional import expected_tokens_positional

__all__ = ["expected_block_size", "model_calls"]


def expected_block_size(head_accuracies, min_block_size: int = 1) -> np.ndarray:
    """Mean accepted block size E[k_hat] = l + sum_{i>l} prod_{l<j<=i} a_j.

    ``head_accuracies: [..., k - 1]``, the conditional accuracies of heads 2..k. With minimum block
    size l (Stern et al. section 5, approximate acceptance) the first l tokens are always accepted and
    a_j is conditional on the tokens before j having been accepted. l = 1 is exact greedy
    verification; the formula is then the position-dependent expectation of docs/theory.md §4.
    """
    accuracies = as_probability("head_accuracies", head_accuracies)
    if accuracies.ndim == 0:
        raise ValueError("head_accuracies must have a last axis (one entry per head 2..k), got a scalar")
    heads = accuracies.shape[-1] + 1
    min_block_size = int(as_real("min_block_size", min_block_size, low=1, high=heads, integer=True))
    # The first min_block_size - 1 extra heads are accepted unconditionally.
    return (min_block_size - 1) + expected_tokens_positional(accuracies[..., min_block_size - 1 :])


def model_calls(tokens, mean_block_size, *, combined: bool) -> np.ndarray:
    """Model calls to decode m tokens when each iteration accepts ``mean_block_size`` tokens on average.

    Separate proposal and scoring models: 2 m / k_hat calls (one proposal call, one verification call
    per block). A combined scoring-and-proposal model verifies block n and proposes block n + 1 in one
    call: m / k_hat + 1 calls (Stern et al. section 4). Greedy decoding takes m calls. These are the
    paper's counts, which treat the number of blocks as m / E[k_hat].
    """
    tokens = as_count("tokens", tokens, integer=False)
    blocks = tokens / as_real("mean_block_size", mean_block_size, low=1)
    return blocks + 1 if combined else 2 * blocks
