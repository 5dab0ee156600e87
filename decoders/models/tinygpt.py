"""TinyGPT: a decoder-only transformer with a per-row KV cache that can be cut back after a rejection.

Pre-LayerNorm blocks, learned positions, causal attention through ``scaled_dot_product_attention``.
Each row writes its new keys/values at its own positions, so rows of different lengths share a batch;
a query at absolute position t attends to the row's positions <= t.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from decoders.models.base import (
    PendingTree,
    check_shape,
    check_step,
    check_truncate,
    extend_tree,
    path_slots,
    tree_layout,
)
from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2
from plumbing.validation import as_positive_int, positive_int_fields

__all__ = ["TinyGPTConfig", "TinyGPT", "KVState"]


@dataclass(frozen=True)
class TinyGPTConfig:
    vocab_size: int
    d_model: int = 128
    n_layer: int = 2
    n_head: int = 4
    max_context: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        positive_int_fields(self, ("vocab_size", "d_model", "n_layer", "n_head", "max_context"))
        if self.d_model % self.n_head:
            raise ValueError(f"d_model must be divisible by n_head, got {self.d_model} and {self.n_head}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class KVState:
    """Keys and values ``[layers, B, H, capacity + 1, d_head]`` each (the last slot takes the writes of
    padding positions), and ``lengths: [B]`` tokens held."""

    keys: torch.Tensor
    values: torch.Tensor
    lengths: torch.Tensor
    bound: int = 0  # a host-side upper bound on lengths.max(), so that forward needs no synchronisation
    tree: PendingTree | None = None  # draft-tree nodes held beyond lengths (forward_tree), until commit_path

    @property
    def capacity(self) -> int:
        """Tokens a row can hold: the cache's slots but the spare last one."""
        return self.keys.shape[3] - 1

    def clone(self) -> "KVState":
        tree = None if self.tree is None else PendingTree(self.tree.ancestors.clone(), self.tree.depths.clone())
        return KVState(self.keys.clone(), self.values.clone(), self.lengths.clone(), self.bound, tree)

    def repeat(self, rows: int) -> "KVState":
        """A state of ``rows`` copies of this one-row state (a shared prompt, scored once)."""
        return KVState(
            self.keys.repeat(1, rows, 1, 1, 1),
            self.values.repeat(1, rows, 1, 1, 1),
            self.lengths.repeat(rows),
            self.bound,
        )


class _Block(nn.Module):
    def __init__(self, config: TinyGPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.project = nn.Linear(config.d_model, config.d_model)
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(), nn.Linear(4 * config.d_model, config.d_model)
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, layer_keys=None, layer_values=None, write_at=None, mask=None):
        """x: [B, S, D]; layer caches [B, H, L, Dh]; write_at: [B, S] positions; mask: [B, 1, S, K].
        Without caches, causal attention over x alone (training: no in-place writes under autograd); with
        caches but no mask (an empty cache), the new keys are written and attention is causal over x."""
        batch, new, width = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, new, self.n_head, -1).transpose(1, 2) for t in (q, k, v))  # [B, H, S, Dh]
        if layer_keys is not None:
            index = write_at[:, None, :, None].expand(-1, self.n_head, -1, k.shape[-1])
            layer_keys.scatter_(2, index, k)
            layer_values.scatter_(2, index, v)
        if mask is None:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, S, Dh]
        else:
            keys, values = layer_keys[:, :, : mask.shape[-1]], layer_values[:, :, : mask.shape[-1]]
            attended = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)  # [B, H, S, Dh]
        x = x + self.dropout(self.project(attended.transpose(1, 2).reshape(batch, new, width)))
        return x + self.dropout(self.mlp(self.norm_mlp(x)))


class TinyGPT(nn.Module):
    """The model protocol of ``decoders.models.base`` over a small GPT (``hidden`` exposes the last layer)."""

    def __init__(self, config: TinyGPTConfig) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.max_context = config.max_context
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.max_context, config.d_model)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layer))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied input and output embeddings

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @torch.no_grad()
    def initialize(self, generator: torch.Generator, *, std: float = 0.02) -> "TinyGPT":
        """Seeded initialisation from an explicit CPU ``generator`` (GPT-2 style): matrices N(0, std^2),
        biases 0, layer norms the identity. Returns the model."""
        for name, parameter in self.named_parameters():
            if name.endswith("bias"):
                parameter.zero_()
            elif "norm" in name:
                parameter.fill_(1.0)
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
        return self

    def new_state(self, batch_size: int, capacity: int | None = None) -> KVState:
        """An empty cache for rows of at most ``capacity`` tokens (default and at most the context): short
        sequences allocate what they need, not the full context per row."""
        c = self.config
        slots = c.max_context if capacity is None else min(as_positive_int("capacity", capacity), c.max_context)
        shape = (c.n_layer, batch_size, c.n_head, slots + 1, c.d_model // c.n_head)
        dtype = self.embed.weight.dtype
        return KVState(
            torch.zeros(shape, device=self.device, dtype=dtype),
            torch.zeros(shape, device=self.device, dtype=dtype),
            torch.zeros(batch_size, dtype=torch.int64, device=self.device),
        )

    def hidden(self, tokens: torch.Tensor, state: KVState, counts: torch.Tensor | None = None) -> torch.Tensor:
        """Final-layer states ``[B, S, D]`` of the new tokens; appends ``counts`` tokens per row to ``state``."""
        check_shape(tokens, state)
        batch, new = tokens.shape
        capacity = state.capacity
        if state.bound + new > capacity:  # the exact check costs a synchronisation: only where the bound may fail
            counts = check_step(self, tokens, state, counts, capacity)
        elif counts is None:
            counts = torch.full_like(state.lengths, new)
        offsets = torch.arange(new, device=self.device)
        positions = state.lengths[:, None] + offsets  # [B, S], absolute positions
        # Padding positions (s >= counts[b]) write into the spare last slot, never into the row.
        write_at = torch.where(offsets < counts[:, None], positions, capacity)
        visible = min(state.bound + new, capacity)  # keys past a row's end are masked anyway
        mask = None  # an empty cache: causal attention over the new tokens (padding comes last, after them)
        if state.bound > 0:
            key_positions = torch.arange(visible, device=self.device)
            mask = (key_positions[None, None, :] <= positions[:, :, None])[:, None]  # [B, 1, S, K]
        try:  # out-of-range ids fail the lookup itself on CPU: no check on the hot path
            x = self.embed(tokens)
        except IndexError:
            raise ValueError(
                f"tokens must be in [0, {self.vocab_size}), got {tokens.min().item()}..{tokens.max().item()}"
            ) from None
        x = x + self.position(positions.clamp(max=self.max_context - 1))
        for layer, block in enumerate(self.blocks):
            x = block(x, state.keys[layer], state.values[layer], write_at, mask)
        state.lengths = state.lengths + counts
        state.bound = visible
        state.tree = None  # a pending tree's slots may have been overwritten
        return self.norm(x)

    def compiled(self, backend: str = "inductor", mode: str | None = None):
        """The same network as a GPT-2 (``decoders.models.hf.tinygpt_to_gpt2``) on the compiled, static-cache path
        (docs/gpu.md): its logits are TinyGPT's up to rounding."""

        return HFCausalLM(tinygpt_to_gpt2(self)).compiled(backend=backend, mode=mode)

    def forward(
        self, tokens: torch.Tensor, state: KVState, counts: torch.Tensor | None = None, keep: int = 0
    ) -> torch.Tensor:
        """Logits ``[B, S, V]`` of the new tokens (``keep`` > 0: of the last ``keep`` positions only)."""
        hidden = self.hidden(tokens, state, counts)
        return self.head(hidden[:, -keep:] if keep else hidden)

    def append(self, tokens: torch.Tensor, state: KVState, counts: torch.Tensor | None = None) -> None:
        """``forward`` without the logits (a prefill)."""
        self.hidden(tokens, state, counts)

    def forward_tree(
        self,
        tokens: torch.Tensor,
        state: KVState,
        parents: torch.Tensor,
        positions: torch.Tensor | None = None,
        keep: int = 0,
    ) -> torch.Tensor:
        """Logits ``[B, n, V]`` of n new draft-tree nodes ``[B, n]`` whose ``parents: [B, n]`` index the pending
        nodes (-1: a root after the prefix); each sees the prefix and its ancestors (``decoders.models.base``);
        ``keep`` > 0: of the last ``keep`` nodes only. ``positions`` replaces prefix + depth (only the audits'
        planted flat-position bug passes it)."""
        check_shape(tokens, state)
        parents = torch.as_tensor(parents, dtype=torch.int64, device=self.device).expand(tokens.shape)
        tree = extend_tree(state.tree, parents)
        new = tokens.shape[1]
        if state.bound + tree.size > state.capacity:
            raise ValueError(
                f"a tree of {tree.size} nodes after {state.bound} tokens exceeds the state's capacity "
                f"of {state.capacity} tokens"
            )
        depth_positions, slots, mask = tree_layout(tree, state.lengths, new, state.bound + tree.size)
        positions = depth_positions if positions is None else positions
        x = self.embed(tokens) + self.position(positions.clamp(max=self.max_context - 1))
        for layer, block in enumerate(self.blocks):
            x = block(x, state.keys[layer], state.values[layer], slots, mask)
        state.tree = tree
        x = self.norm(x)
        return self.head(x[:, -keep:] if keep else x)

    def commit_path(self, state: KVState, path: torch.Tensor, counts: torch.Tensor) -> None:
        """Keep each row's first ``counts[b]`` nodes of ``path: [B, M]`` after its prefix; drop the pending tree."""
        source, destination = path_slots(state.lengths, torch.as_tensor(path, device=self.device), counts)
        layers, batch, heads, _, width = state.keys.shape
        index = source[None, :, None, :, None].expand(layers, batch, heads, -1, width)
        target = destination[None, :, None, :, None].expand(layers, batch, heads, -1, width)
        for cache in (state.keys, state.values):
            cache.scatter_(3, target, cache.gather(3, index))
        state.lengths = state.lengths + counts
        state.bound = int(state.lengths.max())  # one read per commit: later calls then need none
        state.tree = None

    def truncate(self, state: KVState, lengths: torch.Tensor, *, bound: int | None = None) -> None:
        """Cut rows back; ``bound``, a known upper bound on the new lengths, spares a synchronisation."""
        state.lengths = (
            check_truncate(state, lengths)
            if self.device.type == "cpu" or bound is None
            else torch.as_tensor(lengths, dtype=torch.int64, device=self.device)
        )
        state.bound = int(state.lengths.max()) if bound is None else min(bound, state.bound)
        state.tree = None

    def training_hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """Final-layer states ``[B, S, D]`` of whole sequences ``[B, S]`` without a cache, differentiable."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def training_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, S, V]`` of whole sequences ``[B, S]`` without a cache, differentiable (training)."""
        return self.head(self.training_hidden(tokens))

    def logits_of_sequences(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, S, V]`` of whole sequences from an empty cache (training and tests)."""
        return self(tokens, self.new_state(tokens.shape[0], tokens.shape[1]))
