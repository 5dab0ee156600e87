"""The model protocol every decoder uses, and the per-row state it keeps (docs/theory.md §7).

``forward(tokens [B, S], state, counts [B])`` runs the model on the first ``counts[b]`` tokens of each
row (the rest of the row is padding), appends them to the row's state and returns logits ``[B, S, V]``
for every new position (garbage at padding). ``truncate(state, lengths [B])`` cuts each row back to its
first ``lengths[b]`` tokens, after a rejection. Rows may hold different numbers of tokens. Both give
``state.lengths`` a new tensor and never change the old one in place: decoders keep it to roll back to.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["LanguageModel", "ModelState", "check_shape", "check_step", "check_truncate", "append_history"]


class ModelState(Protocol):
    lengths: torch.Tensor  # [B] int64, tokens held per row

    def clone(self) -> "ModelState":
        """An independent copy (the exact audit forks states along its branches)."""

    def repeat(self, rows: int) -> "ModelState":
        """``rows`` copies of a one-row state (the statistical audit scores a shared prompt once)."""


class LanguageModel(Protocol):
    vocab_size: int
    max_context: int | None  # None: unbounded
    device: torch.device

    def new_state(self, batch_size: int, capacity: int | None = None) -> ModelState:
        """An empty state for ``batch_size`` rows of at most ``capacity`` tokens (None: the model's context)."""

    def forward(self, tokens: torch.Tensor, state: ModelState, counts: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, S, V]`` for the new tokens ``[B, S]``; appends ``counts`` (default: all S) per row."""

    def truncate(self, state: ModelState, lengths: torch.Tensor) -> None:
        """Cut each row back to ``lengths[b]`` tokens (never longer than it holds)."""


def check_shape(tokens: torch.Tensor, state: ModelState) -> None:
    """New tokens must be ``[B, S]`` with the state's batch B (host-side: no synchronisation)."""
    if tokens.dim() != 2 or tokens.shape[0] != state.lengths.shape[0]:
        raise ValueError(f"tokens must have shape (batch, new) with batch = {state.lengths.shape[0]}, "
                         f"got {tuple(tokens.shape)}")


def check_step(model: LanguageModel, tokens: torch.Tensor, state: ModelState,
               counts: torch.Tensor | None, capacity: int | None = None) -> torch.Tensor:
    """Validates a forward call against the model's context, or the state's ``capacity`` when it has one;
    returns ``counts`` as an int64 tensor on the model's device."""
    check_shape(tokens, state)
    if counts is None:
        counts = torch.full_like(state.lengths, tokens.shape[1])
    limit, what = model.max_context, "the model's context"
    if capacity is not None and (limit is None or capacity < limit):
        limit, what = capacity, "the state's capacity"
    if limit is not None and bool((state.lengths + counts > limit).any()):
        raise ValueError(f"sequence length {int((state.lengths + counts).max())} exceeds {what} of {limit} tokens")
    return counts


def check_truncate(state: ModelState, lengths: torch.Tensor) -> torch.Tensor:
    lengths = torch.as_tensor(lengths, dtype=torch.int64, device=state.lengths.device)
    if lengths.shape != state.lengths.shape or bool(((lengths < 0) | (lengths > state.lengths)).any()):
        raise ValueError(f"lengths must be in [0, held] per row, held {state.lengths.tolist()}, got {lengths.tolist()}")
    return lengths


def append_history(history: torch.Tensor, lengths: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Write ``tokens: [B, S]`` into ``history: [B, C]`` at each row's ``lengths[b]`` onwards, growing the
    buffer (doubling) when it is too short. Padding lands past a row's end, where it is never read.
    Returns the (possibly new) history and the positions written, ``[B, S]``."""
    batch, new = tokens.shape
    needed = int((lengths + new).max())
    if needed > history.shape[1]:
        grown = torch.zeros(batch, max(needed, 2 * history.shape[1]), dtype=history.dtype, device=history.device)
        grown[:, :history.shape[1]] = history
        history = grown
    positions = lengths[:, None] + torch.arange(new, device=history.device)
    history.scatter_(1, positions, tokens)
    return history, positions

