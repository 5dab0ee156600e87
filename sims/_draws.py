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
    mask = np.asarray(mask, dtype=bool)
    if mask.shape[-1] == 0:
        return np.zeros(mask.shape[:-1], dtype=np.int64)
    first_false = np.argmin(mask, axis=-1)  # 0 when the row is all True, fixed below
    return np.where(mask.all(axis=-1), mask.shape[-1], first_false).astype(np.int64)


class RowSampler:
    """Draws from the rows of a fixed table ``[K, V]`` in O(1) expected time per draw (guide tables).

    Each row's CDF is cut into V equal-probability buckets and ``guide[k, b]`` remembers the first token
    whose CDF exceeds b / V; a draw u jumps there and steps forward while the CDF is <= u, about one step
    on average, without building a ``[draws, V]`` array (Chen and Asau's guide-table method, Devroye
    1986, section III.2.4). Rows need not be normalised; drawing from an all-zero row raises. A token of
    zero probability is never returned.
    """

    def __init__(self, table: np.ndarray) -> None:
        table = np.asarray(table, dtype=np.float64)  # [K, V]
        rows, vocabulary = table.shape
        self._empty = table.sum(axis=1) <= 0  # [K]
        safe = np.where(self._empty[:, None], 1.0, table)  # rows that must never be drawn from
        cdf = np.cumsum(safe, axis=1) / safe.sum(axis=1, keepdims=True)  # [K, V]
        last_positive = vocabulary - 1 - np.argmax(safe[:, ::-1] > 0, axis=1)  # [K]
        cdf[np.arange(vocabulary) >= last_positive[:, None]] = 1.0  # the scan always stops by here
        offsets = np.arange(rows)[:, None]
        bucket_starts = (np.arange(vocabulary) / vocabulary)[None, :] + offsets  # [K, V]
        flat = (cdf + offsets).ravel()  # [K V], increasing across rows
        guide = np.searchsorted(flat, bucket_starts.ravel(), side="right").reshape(rows, vocabulary)
        self._cdf = cdf.ravel()  # [K V]
        self._guide = guide.ravel()  # [K V], flat index of the first token with CDF > b / V
        self._vocabulary = vocabulary

    def draw(self, rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
        """One token per entry of ``rows: [...]`` (row indices into the table) -> ``[...]`` int64."""
        rows = np.asarray(rows, dtype=np.int64)
        if np.any(self._empty[rows]):
            raise ValueError("cannot draw from an all-zero row of the table")
        u = rng.random(rows.shape).ravel()
        base = rows.ravel() * self._vocabulary
        flat = self._guide[base + (u * self._vocabulary).astype(np.int64)]  # [n], flat token index
        active = np.flatnonzero(self._cdf[flat] <= u)
        while active.size:
            flat[active] += 1
            active = active[self._cdf[flat[active]] <= u[active]]
        return (flat - base).reshape(rows.shape)
