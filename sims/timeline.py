"""Event timelines of draft and target calls (Leviathan et al. Figure 5) and the walltime they add up to.

Time is measured in target calls: a target call (one position autoregressively, or gamma + 1 positions
in parallel) costs 1, a draft call costs c, and encoder-decoder models first run each model's encoder
once (``target_encoder``, ``draft_encoder``, in the same unit). Speculative decoding runs gamma draft
calls then one verifying target call per iteration; autoregressive decoding runs one target call per
token. The walltime improvement is the autoregressive time for the same tokens over the speculative time.

With a measured ``CostProfile`` (docs/theory.md §10) time is in seconds instead: a draft step costs
t_draft, a verify call t_verify(gamma + 1), each iteration's accept / correct / rollback t_iteration (an
"iterate" event), and an autoregressive token t_step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_cost, as_count, as_positive_int
from sims._stats import Estimate, ratio_estimate
from spectheory.costs import CostProfile

__all__ = [
    "Timeline",
    "speculative_timeline",
    "autoregressive_timeline",
    "walltime_speedup",
    "calibrated_walltime_speedup",
]


@dataclass(frozen=True)
class Timeline:
    """The calls of one decode in time order, ``[E]`` each; units of time are target calls.

    ``model``: "draft" or "target"; ``phase``: "encode", "draft", "verify" (a parallel target call)
    or "decode" (an autoregressive target call); ``iteration``: the iteration a call belongs to (-1 for
    encoders); ``accepted``: accepted draft tokens at a "verify" call, -1 elsewhere. ``tokens`` is the
    number of tokens the decode emitted.
    """

    model: np.ndarray
    phase: np.ndarray
    start: np.ndarray
    duration: np.ndarray
    iteration: np.ndarray
    accepted: np.ndarray
    tokens: int

    @property
    def total_time(self) -> float:
        """When the last call ends."""
        return float(self.start[-1] + self.duration[-1]) if len(self.start) else 0.0


def _encoders(target_encoder: float, draft_encoder: float) -> list[tuple[str, float]]:
    """The encoder calls that precede decoding, draft's first (Figure 5 draws both)."""
    costs = [
        ("draft", float(as_cost("draft_encoder", draft_encoder))),
        ("target", float(as_cost("target_encoder", target_encoder))),
    ]
    return [(model, cost) for model, cost in costs if cost > 0]


def _assemble(prefix: list[tuple[str, float]], model, phase, duration, iteration, accepted, tokens: int) -> Timeline:
    """Encoder calls followed by the decoding calls, laid end to end."""
    model = np.concatenate([[m for m, _ in prefix], model]).astype(str)
    phase = np.concatenate([["encode"] * len(prefix), phase]).astype(str)
    duration = np.concatenate([[cost for _, cost in prefix], duration]).astype(float)
    start = np.concatenate([[0.0], np.cumsum(duration)[:-1]])
    iteration = np.concatenate([np.full(len(prefix), -1), iteration]).astype(np.int64)
    accepted = np.concatenate([np.full(len(prefix), -1), accepted]).astype(np.int64)
    return Timeline(model, phase, start, duration, iteration, accepted, tokens)


def speculative_timeline(
    accepted,
    gamma: int,
    c: float = 0.0,
    *,
    target_encoder: float = 0.0,
    draft_encoder: float = 0.0,
    costs: CostProfile | None = None,
) -> Timeline:
    """The timeline of iterations that accepted ``accepted: [I]`` draft tokens each, with ``gamma`` drafts.

    Each iteration: gamma draft calls of duration c, then one verify call of duration 1 that emits
    accepted + 1 tokens. With ``costs``: draft steps of t_draft, a verify call of t_verify(gamma + 1), then an
    "iterate" event of t_iteration, in seconds.
    """
    gamma = int(as_count("gamma", gamma))
    c = float(as_cost("c", c))
    accepted = np.asarray(as_count("accepted", accepted), dtype=np.int64)
    if accepted.ndim != 1 or np.any(accepted > gamma):
        raise ValueError(f"accepted must be a 1-D array of counts in [0, gamma = {gamma}], got {accepted!r}")
    iterations = len(accepted)
    draft, verify, extra = (
        (c, 1.0, [])
        if costs is None
        else (costs.t_draft, costs.verify_seconds(gamma), [("target", "iterate", costs.t_iteration)])
    )
    events = [("draft", "draft", draft)] * gamma + [("target", "verify", verify)] + extra
    per_iteration = len(events)
    model = np.tile([m for m, _, _ in events], iterations)
    phase = np.tile([p for _, p, _ in events], iterations)
    duration = np.tile([d for _, _, d in events], iterations)
    iteration = np.repeat(np.arange(iterations), per_iteration)
    marks = np.full((iterations, per_iteration), -1, dtype=np.int64)
    marks[:, gamma] = accepted
    return _assemble(
        _encoders(target_encoder, draft_encoder),
        model,
        phase,
        duration,
        iteration,
        marks.ravel(),
        int((accepted + 1).sum()),
    )


def autoregressive_timeline(tokens: int, *, target_encoder: float = 0.0, costs: CostProfile | None = None) -> Timeline:
    """One target call per token (t_step seconds each with ``costs``), after the target's encoder."""
    tokens = int(as_count("tokens", tokens))
    step = 1.0 if costs is None else costs.t_step
    return _assemble(
        _encoders(target_encoder, 0.0),
        np.full(tokens, "target"),
        np.full(tokens, "decode"),
        np.full(tokens, step),
        np.arange(tokens),
        np.full(tokens, -1),
        tokens,
    )


def walltime_speedup(
    accepted, gamma: int, c: float, *, target_encoder: float = 0.0, draft_encoder: float = 0.0
) -> Estimate:
    """Autoregressive over speculative time for the same tokens, over sequences ``accepted: [S, I]``.

    Each row is one decode of I iterations; its speculative time is the total of its timeline, its
    autoregressive time that of decoding the same number of tokens one by one. The estimate is the
    ratio of summed times over sequences, with the delta-method standard error; without encoders it
    tends to Theorem 3.8's (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).
    """
    accepted = np.asarray(as_count("accepted", accepted), dtype=np.int64)
    if accepted.ndim != 2:
        raise ValueError(f"accepted must have shape (sequences, iterations), got {accepted.shape}")
    as_positive_int("iterations per sequence", accepted.shape[1])
    c = float(as_cost("c", c))
    gamma = int(as_count("gamma", gamma))
    encoders = sum(cost for _, cost in _encoders(target_encoder, draft_encoder))
    tokens = (accepted + 1).sum(axis=1)  # [S]
    speculative = encoders + accepted.shape[1] * (gamma * c + 1)  # the total of speculative_timeline
    autoregressive = float(as_cost("target_encoder", target_encoder)) + tokens
    return ratio_estimate(autoregressive, np.full(len(tokens), speculative))


def calibrated_walltime_speedup(accepted, gamma: int, costs: CostProfile) -> Estimate:
    """``walltime_speedup`` under measured costs: over sequences ``accepted: [S, I]``, the autoregressive
    time of each sequence's tokens (``autoregressive_timeline``) over its speculative timeline's; it tends to
    ``costs.speedup(gamma)`` under the acceptance that produced ``accepted``."""
    accepted = np.asarray(as_count("accepted", accepted), dtype=np.int64)
    if accepted.ndim != 2:
        raise ValueError(f"accepted must have shape (sequences, iterations), got {accepted.shape}")
    speculative = [speculative_timeline(row, gamma, costs=costs).total_time for row in accepted]
    autoregressive = [autoregressive_timeline(int((row + 1).sum()), costs=costs).total_time for row in accepted]
    return ratio_estimate(autoregressive, speculative)
