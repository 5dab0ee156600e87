"""Hypothesis strategies shared by the tests: seeds and sizes, never big tensors."""

import numpy as np
from hypothesis import strategies as st

seeds = st.integers(0, 2**32 - 1)


def random_pair(seed: int, vocabulary: int, *, batch: tuple = (), sparse: bool = True):
    """Dirichlet (p, q) of shape [*batch, V]; with ``sparse`` some entries are exactly 0 (degenerate cases)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(vocabulary, 0.5), size=batch)
    q = rng.dirichlet(np.full(vocabulary, 0.5), size=batch)
    if sparse and vocabulary > 2:
        p[..., rng.integers(vocabulary)] = 0.0
        q[..., rng.integers(vocabulary)] = 0.0
        p /= p.sum(axis=-1, keepdims=True)
        q /= q.sum(axis=-1, keepdims=True)
    return p, q
