"""Vectorised draws shared by the simulators: categorical rows, and the run of successes before a failure."""

from __future__ import annotations

import numpy as np

__all__ = ["categorical", "leading_true_count"]


def categorical(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One index per row of ``probs: [..., V]`` by inverting the row's CDF: ``-> [...]`` int64.

    Rows need not be normalised (the uniform is scaled by the row total), which lets callers pass a
    residual max(0, p - q) as it is. A zero-probability index is never returned.
    """
    cdf = np.cumsum(probs, axis=-1)  # [..., V]
    u = rng.random(cdf.shape[:-1]) * cdf[..., -1]  # [...], uniform on [0, row total)
    index = (cdf <= u[..., None]).sum(axis=-1)  # [...], the first index whose CDF exceeds u
    return np.minimum(index, probs.shape[-1] - 1)


def leading_true_count(mask: np.ndarray) -> np.ndarray:
    """The number of leading ``True`` entries along the last axis: ``[..., G] -> [...]`` int64."""
    return np.cumprod(mask, axis=-1, dtype=np.int8).sum(axis=-1, dtype=np.int64)


class RowSampler:
    """Draws from the rows of a fixed table ``[K, V]`` by one binary search per draw, O(log(K V)).

    The row CDFs are laid end to end as k + CDF_k, so that ``np.searchsorted`` finds the token of many
    draws from many different rows in one call, without building a ``[draws, V]`` array. Rows need not
    be normalised; an all-zero row is never drawn from (asking for it raises). Offsetting by k costs
    log2(K) bits of the uniform's 53, a resolution of about K 2^-53 per draw.
    """

    def __init__(self, table: np.ndarray) -> None:
        table = np.asarray(table, dtype=np.float64)  # [K, V]
        totals = table.sum(axis=1)  # [K]
        self._empty = totals <= 0
        safe = np.where(self._empty[:, None], 1.0, table)  # rows that must never be drawn from
        cdf = np.cumsum(safe, axis=1) / safe.sum(axis=1, keepdims=True)  # [K, V]
        self._flat = (cdf + np.arange(len(table))[:, None]).ravel()  # [K V], increasing
        self._vocabulary = table.shape[1]
        positive = safe > 0
        self._last_positive = table.shape[1] - 1 - np.argmax(positive[:, ::-1], axis=1)  # [K]

    def draw(self, rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
        """One token per entry of ``rows: [...]`` (row indices into the table) -> ``[...]`` int64."""
        rows = np.asarray(rows, dtype=np.int64)
        if np.any(self._empty[rows]):
            raise ValueError("cannot draw from an all-zero row of the table")
        position = np.searchsorted(self._flat, rows + rng.random(rows.shape), side="right")
        return np.minimum(position - rows * self._vocabulary, self._last_positive[rows])
