"""The Hugging Face adapter's key/value cache and state (``decoders.models.hf``; docs/theory.md §7): buffers
``[B, H, capacity + 1, Dh]`` per layer in which each row writes its new tokens at its own slots (padding into the
spare last slot); transformers' attention layers call ``update``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.models.base import PendingTree

__all__ = ["RowCache", "HFState"]


class RowCache:
    """The key/value cache transformers' attention layers write into (``update(keys, values, layer)``):
    ``keys``/``values`` hold one ``[B, H, capacity + 1, Dh]`` buffer per layer, allocated at the first
    call. Before each call the adapter sets ``write_at: [B, S]`` (the slot of every new token) and
    ``visible`` (slots the call's mask spans; None: all of them); ``update`` writes there and returns the visible
    slots."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.write_at: torch.Tensor | None = None
        self.visible = 0
        self._index: torch.Tensor | None = None  # write_at expanded to [B, H, S, Dh], built once per call

    def prepare(self, write_at: torch.Tensor, visible: int | None) -> None:
        self.write_at, self.visible, self._index = write_at, visible, None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Writes ``[B, H, S, Dh]`` keys and values at ``write_at``; returns the first ``visible`` slots."""
        if layer_idx == len(self.keys):  # first call: this layer's buffers
            shape = key_states.shape[:2] + (self.capacity + 1, key_states.shape[-1])
            self.keys.append(key_states.new_zeros(shape))
            self.values.append(value_states.new_zeros(shape[:3] + value_states.shape[-1:]))
        if self._index is None:
            self._index = self.write_at[:, None, :, None].expand(-1, key_states.shape[1], -1, key_states.shape[-1])
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys.scatter_(2, self._index, key_states)
        values.scatter_(2, self._index.expand(-1, -1, -1, value_states.shape[-1]), value_states)
        if self.visible is None:  # every slot (the static cache: a fixed shape)
            return keys, values
        return keys[:, :, : self.visible], values[:, :, : self.visible]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.capacity + 1 if self.visible is None else self.visible

    def grow(self, capacity: int) -> None:
        """Larger buffers holding the same slots (the spare last slot is scratch and not kept)."""
        for buffers in (self.keys, self.values):
            for i, old in enumerate(buffers):
                grown = old.new_zeros(old.shape[:2] + (capacity + 1,) + old.shape[3:])
                grown[:, :, : self.capacity] = old[:, :, : self.capacity]
                buffers[i] = grown
        self.capacity = capacity

    def clone(self) -> "RowCache":
        copy = RowCache(self.capacity)
        copy.keys, copy.values = [k.clone() for k in self.keys], [v.clone() for v in self.values]
        return copy


@dataclass
class HFState:
    """The adapter's cache and ``lengths: [B]``; ``bound`` is a host-side upper bound on ``lengths.max()``."""

    cache: RowCache
    lengths: torch.Tensor
    bound: int = 0
    tree: PendingTree | None = None  # draft-tree nodes held beyond lengths (forward_tree), until commit_path

    @property
    def capacity(self) -> int:
        return self.cache.capacity

    def clone(self) -> "HFState":
        tree = None if self.tree is None else PendingTree(self.tree.ancestors.clone(), self.tree.depths.clone())
        return HFState(self.cache.clone(), self.lengths.clone(), self.bound, tree)

    def repeat(self, rows: int) -> "HFState":
        """A state of ``rows`` copies of this one-row state (a shared prompt, scored once)."""
        cache = RowCache(self.cache.capacity)
        cache.keys = [k.repeat(rows, 1, 1, 1) for k in self.cache.keys]
        cache.values = [v.repeat(rows, 1, 1, 1) for v in self.cache.values]
        return HFState(cache, self.lengths.repeat(rows), self.bound)
