"""EAGLE-2's dynamic tree in closed form: tokens per call from the draft's confidence (docs/theory-trees.md §12).

A dynamic tree keeps, each iteration, the N - 1 drafted nodes whose cumulative draft log-probability (their
*confidence* s, the sum along the path) is largest. Verified by the target-only rule, a node is accepted with the
target's probability of its path, so E = 1 + sum over kept nodes v of P(v accepted) (``spectheory.trees``).
EAGLE-2's premise is that P(v accepted) is a function of s alone; its *calibration* c(s) is the mean acceptance of
the nodes whose confidence falls in s's bin, measured along held-out text. At a context j, the tree of N nodes
emits

    E_j(N) = 1 + sum over the N - 1 most confident nodes v of c(s_v)

tokens on average. Over the nodes it was fitted on, sum_v c(s_v) is sum_v P(v accepted) exactly (a bin's mean
times its count is its sum); elsewhere (contexts where only the draft ran, another budget) it is the premise's
forecast. Iterations do not start at every position: one that starts at j ends about E_j tokens later, so along a
text whose E_j changes slowly a position starts an iteration with probability about 1 / E_j, and the tokens per
call over contexts at evenly spaced positions are their harmonic mean, E(N) = 1 / mean_j (1 / E_j(N)) (the
arithmetic mean would overweight the easy stretches a decoder crosses in a few long iterations).
That is a forecast from the premise. At T = 0 the walk itself can be replayed: with the target's acceptance of every
node at every position of a text, an iteration starting at j accepts the kept nodes on the greedy path and the next
starts after them (``replayed_tokens``), which needs no premise and no renewal argument; where iterations start
(after a rejection) is where a text is hard for the draft, which neither mean sees.
The speedup: the autoregressive seconds of ``tokens`` new tokens over tokens / E iterations of the tree decoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_positive_int

__all__ = [
    "CONFIDENCE_EDGES",
    "PathCalibration",
    "calibrate_paths",
    "tokens_per_context",
    "expected_tokens_dynamic",
    "replayed_tokens",
]

#: Inner bin edges of the confidence s (natural log): half-nat bins from -8 to 0, everything below -8 in the first
#: (a path that unlikely is almost never accepted).
CONFIDENCE_EDGES = tuple(np.linspace(-8.0, 0.0, 17)[:-1].tolist())


@dataclass(frozen=True)
class PathCalibration:
    """c(s): per bin of the confidence (``edges``, inner edges), the mean acceptance of the calibration's nodes
    (``acceptance``) and how many there were (``nodes``); an empty bin borrows its nearest filled neighbour's."""

    edges: tuple
    acceptance: tuple
    nodes: tuple

    def predict(self, confidence) -> np.ndarray:
        """c(s) at each confidence of ``confidence`` (any shape; -inf: the first bin)."""
        index = np.searchsorted(np.asarray(self.edges), np.asarray(confidence, dtype=np.float64), side="right")
        return np.asarray(self.acceptance)[index]

    def as_dict(self) -> dict:
        return {"edges": list(self.edges), "acceptance": list(self.acceptance), "nodes": list(self.nodes)}


def _checked(confidence, acceptance=None) -> tuple:
    """``confidence`` (and ``acceptance``) as float arrays ``[contexts, nodes]`` of one shape."""
    confidence = np.asarray(confidence, dtype=np.float64)
    if confidence.ndim != 2 or confidence.shape[0] < 1:
        raise ValueError(f"confidence must be [contexts, nodes] with a context at least, got shape {confidence.shape}")
    if np.any(confidence > 1e-9) or np.any(np.isnan(confidence)):
        raise ValueError("confidence must hold log-probabilities (<= 0, no NaN)")
    if acceptance is None:
        return confidence, None
    acceptance = np.asarray(acceptance, dtype=np.float64)
    if acceptance.shape != confidence.shape:
        raise ValueError(f"acceptance must have confidence's shape {confidence.shape}, got {acceptance.shape}")
    if np.any(acceptance < 0) or np.any(acceptance > 1 + 1e-9) or np.any(np.isnan(acceptance)):
        raise ValueError("acceptance must hold probabilities in [0, 1]")
    return confidence, acceptance


def calibrate_paths(confidence, acceptance, edges=CONFIDENCE_EDGES) -> PathCalibration:
    """c(s) from nodes measured along held-out text: ``confidence`` ``[contexts, nodes]`` (log path probability under
    the draft) and ``acceptance`` of the same shape (the target's probability of each node's path, or 0/1 at T = 0)."""
    confidence, acceptance = _checked(confidence, acceptance)
    index = np.searchsorted(np.asarray(edges), confidence.ravel(), side="right")
    bins = len(edges) + 1
    counts = np.bincount(index, minlength=bins)
    sums = np.bincount(index, weights=acceptance.ravel(), minlength=bins)
    filled = np.flatnonzero(counts)
    if not len(filled):
        raise ValueError("the calibration needs at least one node")
    nearest = filled[np.abs(np.arange(bins)[:, None] - filled[None, :]).argmin(axis=1)]
    return PathCalibration(tuple(edges), tuple((sums[nearest] / counts[nearest]).tolist()), tuple(counts.tolist()))


def tokens_per_context(calibration: PathCalibration, confidence, budget: int) -> np.ndarray:
    """``[contexts]``: E_j(N) = 1 + the calibrated acceptance summed over each context's ``budget`` - 1 most confident
    nodes (``confidence`` ``[contexts, nodes]``: every node the draft drafted there, any order)."""
    confidence, _ = _checked(confidence)
    kept = min(as_positive_int("budget", budget) - 1, confidence.shape[1])
    top = -np.sort(-confidence, axis=1)[:, :kept]
    return 1.0 + calibration.predict(top).sum(axis=1)


def expected_tokens_dynamic(calibration: PathCalibration, confidence, budget: int) -> float:
    """E(N): the harmonic mean of ``tokens_per_context`` over contexts at evenly spaced positions of a text."""
    return float(1.0 / np.mean(1.0 / tokens_per_context(calibration, confidence, budget)))


def replayed_tokens(accepted) -> float:
    """Tokens per call of decoders walking texts at T = 0: ``accepted`` ``[texts, positions]`` holds the nodes a tree
    grown at each position accepts (its greedy path's kept nodes), so an iteration that starts at j emits
    accepted[j] + 1 tokens and the next starts there; the last iteration of a text counts the tokens left."""
    accepted = np.asarray(accepted)
    if accepted.ndim != 2 or accepted.size == 0 or np.any(accepted < 0) or np.any(accepted != np.round(accepted)):
        raise ValueError(f"accepted must be [texts, positions] non-negative whole counts, got shape {accepted.shape}")
    iterations = 0
    for row in accepted.astype(np.int64):
        position = 0
        while position < len(row):
            position += row[position] + 1
            iterations += 1
    return accepted.size / iterations
