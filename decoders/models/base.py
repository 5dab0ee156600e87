"""The model protocol every decoder uses, and the per-row state it keeps (docs/theory.md §7).

``forward(tokens [B, S], state, counts [B], keep)`` runs the model on the first ``counts[b]`` tokens of
each row (the rest of the row is padding), appends them to the row's state and returns logits ``[B, S, V]``
for every new position (garbage at padding), or for the last ``keep`` positions only when ``keep`` > 0 (a
call that carries a prompt before its new positions: ``decoders._loop.forward_after``); a model may add
``append(tokens, state, counts)``, the same call without the logits (what a prefill needs: the LM head is
skipped). ``truncate(state, lengths [B])`` cuts each row back to its
first ``lengths[b]`` tokens, after a rejection. Rows may hold different numbers of tokens. Both give
``state.lengths`` a new tensor and never change the old one in place: decoders keep it to roll back to.

Tree attention (docs/theory-trees.md §12), for the models that have it: ``forward_tree(tokens [B, n], state,
parents [B, n], keep)`` scores n new nodes of a draft tree held beyond the committed prefix (each at position
prefix length + depth, attending to the prefix and its own ancestors; logits of the last ``keep`` only when
``keep`` > 0); ``commit_path(state, path [B, M],
counts [B])`` keeps each row's first ``counts[b]`` nodes of a root-to-node path as the prefix's continuation
and drops every other pending node, without recomputing anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.models.protocol import CausalModel, ModelState

__all__ = [
    "LanguageModel",
    "ModelState",
    "check_shape",
    "check_step",
    "check_truncate",
    "append_history",
    "PendingTree",
    "extend_tree",
    "tree_layout",
    "path_slots",
]


LanguageModel = CausalModel  # the causal protocol's earlier name


def check_shape(tokens: torch.Tensor, state: ModelState) -> None:
    """New tokens must be ``[B, S]`` with the state's batch B (host-side: no synchronisation)."""
    if tokens.dim() != 2 or tokens.shape[0] != state.lengths.shape[0]:
        raise ValueError(
            f"tokens must have shape (batch, new) with batch = {state.lengths.shape[0]}, got {tuple(tokens.shape)}"
        )


def check_step(
    model: LanguageModel,
    tokens: torch.Tensor,
    state: ModelState,
    counts: torch.Tensor | None,
    capacity: int | None = None,
) -> torch.Tensor:
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


def append_history(
    history: torch.Tensor, lengths: torch.Tensor, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Write ``tokens: [B, S]`` into ``history: [B, C]`` at each row's ``lengths[b]`` onwards, growing the
    buffer (doubling) when it is too short. Padding lands past a row's end, where it is never read.
    Returns the (possibly new) history and the positions written, ``[B, S]``."""
    batch, new = tokens.shape
    needed = int((lengths + new).max())
    if needed > history.shape[1]:
        grown = torch.zeros(batch, max(needed, 2 * history.shape[1]), dtype=history.dtype, device=history.device)
        grown[:, : history.shape[1]] = history
        history = grown
    positions = lengths[:, None] + torch.arange(new, device=history.device)
    history.scatter_(1, positions, tokens)
    return history, positions


@dataclass
class PendingTree:
    """The draft-tree nodes a state holds beyond ``lengths`` (docs/theory-trees.md §12): node i of a row in slot
    lengths + i, at position lengths + depth; ``ancestors: [B, T, T]`` (a node is its own ancestor) and
    ``depths: [B, T]``."""

    ancestors: torch.Tensor
    depths: torch.Tensor

    @property
    def size(self) -> int:
        return self.ancestors.shape[1]


def extend_tree(tree: PendingTree | None, parents: torch.Tensor) -> PendingTree:
    """``tree`` with n new nodes whose ``parents: [B, n]`` index the nodes held so far and the new ones before
    them (-1: a root, attached to the committed prefix)."""
    batch, new = parents.shape
    held = 0 if tree is None else tree.size
    total = held + new
    ancestors = torch.zeros(batch, total, total, dtype=torch.bool, device=parents.device)
    depths = torch.zeros(batch, total, dtype=torch.int64, device=parents.device)
    if tree is not None:
        ancestors[:, :held, :held], depths[:, :held] = tree.ancestors, tree.depths
    rows = torch.arange(batch, device=parents.device)
    nodes = held + torch.arange(new, device=parents.device)
    bad = (parents < -1) | (parents >= nodes)  # [B, n]
    if bool(bad.any()):  # one host read for every node
        node = held + int(bad.any(dim=0).to(torch.int64).argmax())
        raise ValueError(f"parents of new node {node} must be in [-1, {node}), got {parents[:, node - held].tolist()}")
    for i in range(new):
        node, parent = held + i, parents[:, i]
        rooted = parent >= 0
        safe = parent.clamp(min=0)
        ancestors[:, node] = ancestors[rows, safe] & rooted[:, None]
        ancestors[:, node, node] = True
        depths[:, node] = torch.where(rooted, depths[rows, safe] + 1, 0)
    return PendingTree(ancestors, depths)


def tree_layout(tree: PendingTree, lengths: torch.Tensor, new: int, visible: int) -> tuple:
    """For the last ``new`` nodes of ``tree``: (positions ``[B, n]`` = lengths + depth, slots ``[B, n]`` =
    lengths + node index, mask ``[B, 1, n, K]`` over ``visible`` key slots: the row's committed prefix, and the
    node's ancestors among the pending nodes)."""
    held = tree.size - new
    nodes = torch.arange(held, tree.size, device=lengths.device)
    positions = lengths[:, None] + tree.depths[:, held:]
    slots = lengths[:, None] + nodes
    keys = torch.arange(visible, device=lengths.device)
    relative = keys[None, :] - lengths[:, None]  # [B, K], the key's node index where it is a pending node
    pending = (relative >= 0) & (relative < tree.size)
    ancestor = torch.gather(
        tree.ancestors[:, held:], 2, relative.clamp(0, tree.size - 1)[:, None, :].expand(-1, new, -1)
    )  # [B, n, K]
    mask = (relative < 0)[:, None, :] | (pending[:, None, :] & ancestor)
    return positions, slots, mask[:, None]


def path_slots(lengths: torch.Tensor, path: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(source, destination) slots ``[B, M]`` that move the first ``counts[b]`` nodes of ``path: [B, M]`` (node
    indices, a root-to-node path) right after the prefix; later entries move a slot onto itself."""
    order = torch.arange(path.shape[1], device=path.device)
    destination = lengths[:, None] + order
    source = torch.where(order < counts[:, None], lengths[:, None] + path, destination)
    return source, destination
