"""The compiled, static-cache decode path for Hugging Face causal LMs (docs/gpu.md, "The compiled path").

``StaticHF`` is the adapter of ``decoders.models.hf`` with two changes that make every call a fixed-shape
function of fixed buffers, so that ``torch.compile`` traces it once per call shape and, on CUDA, replays it as a
CUDA graph (mode ``reduce-overhead``):

- its key/value buffers ``[B, H, capacity + 1, Dh]`` per layer are allocated once, when a state is made, for the
  room the decoder asks (rows x capacity), and never grow or move: a rollback (``truncate``) changes the rows'
  lengths only, and a call's mask spans every slot (``[B, 1, S, capacity + 1]``), the rows' own positions deciding
  what a query sees;
- a call of at most ``max_width`` tokens that carries no prompt (the autoregressive step, a chain's verify of
  width 1..gamma + 1, a tree's verify with its mask, the draft's step) runs one compiled function, made on its
  first call and kept: ``(tokens, cache, write_at, mask, position ids) -> logits``, with no host synchronisation
  inside (``fullgraph``: a graph break is an error). Calls that carry a prompt (prefills, the first verify) have a
  new width for every prompt length and run the same function eagerly, on the same buffers.

The laws are the eager adapter's: the same modules, weights and masks; only the number of masked key slots
differs, which moves logits by rounding (greedy tokens are identical in the tests, float64).
"""

from __future__ import annotations

import torch

from decoders.models.base import check_step
from decoders.models.hf import HFCausalLM, HFState, RowCache, float_logits

__all__ = ["StaticHF", "BACKENDS", "MAX_COMPILED_WIDTH", "compile_mode"]

#: torch.compile backends: inductor generates kernels (slow to compile, fast to run); eager and aot_eager trace
#: only (seconds), which the tests use to find graph breaks.
BACKENDS = ("inductor", "aot_eager", "eager")
#: Calls of at most this many tokens (and no prompt) run compiled: chain verifies and trees of up to 64 nodes.
MAX_COMPILED_WIDTH = 64
#: Distinct call shapes one model may compile (dynamo's per-function limit, beyond which it would run eagerly).
MAX_SHAPES = 256


def compile_mode(device: torch.device) -> str | None:
    """inductor's mode: CUDA graphs on CUDA (``reduce-overhead``), the default elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else None


def _allocate(cache: RowCache, config, batch: int, dtype: torch.dtype, device: torch.device) -> None:
    """Every layer's key and value buffers ``[B, H_kv, capacity + 1, Dh]``, zeroed, allocated here once."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    width = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    shape = (batch, heads, cache.capacity + 1, width)
    cache.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
    cache.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
    if device.type == "cuda":  # CUDA graphs replay on these addresses, written in place (transformers' StaticCache)
        for buffer in cache.keys + cache.values:
            torch._dynamo.mark_static_address(buffer)


class StaticHF(HFCausalLM):
    """``HFCausalLM`` over a static cache, its short calls compiled (module docstring). ``backend`` is one of
    ``BACKENDS``; ``mode`` is inductor's (None: ``compile_mode`` of the model's device). ``compiled_shapes`` holds
    the call shapes (rows, width, logits kept) compiled so far."""

    def __init__(self, model, *, backend: str = "inductor", mode: str | None = None,
                 max_width: int = MAX_COMPILED_WIDTH) -> None:
        super().__init__(model)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend, self.max_width = backend, max_width
        self.mode = compile_mode(self.device) if mode is None and backend == "inductor" else mode
        self.compiled_shapes: set = set()
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, name):  # one entry per call shape, all of one function
                setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), MAX_SHAPES))
        self._compiled = torch.compile(self._call, fullgraph=True, dynamic=None, backend=backend, mode=self.mode)

    def __repr__(self) -> str:
        return f"StaticHF({type(self.model).__name__}, backend={self.backend!r}, mode={self.mode!r})"

    def new_state(self, batch_size: int, capacity: int | None = None) -> HFState:
        """A state whose buffers hold ``capacity`` tokens a row (None: the model's context), allocated now."""
        slots = capacity or self.max_context
        if slots is None:
            raise ValueError("a static cache needs a capacity: the model states no context length")
        slots = min(slots, self.max_context or slots)
        state = HFState(RowCache(slots), torch.zeros(batch_size, dtype=torch.int64, device=self.device))
        _allocate(state.cache, self.model.config, batch_size, self.mask_dtype, self.device)
        return state

    def _make_room(self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None) -> torch.Tensor:
        """Checked ``counts``: a static cache never grows, so a row that would outgrow it is an error."""
        return check_step(self, tokens, state, counts, state.capacity)

    def _grow_for_tree(self, state: HFState, nodes: int, needed: int) -> None:
        raise ValueError(f"a tree of {nodes} nodes after {state.bound} tokens exceeds the static cache's capacity of "
                         f"{state.capacity} tokens")

    def _visible(self, state: HFState, bound: int) -> int:
        """Every slot, the spare last one included: one key width for every call."""
        return state.capacity + 1

    def _call(self, tokens, cache: RowCache, write_at, mask, position_ids, keep: int) -> torch.Tensor:
        """One call of the wrapped model over the whole static cache: the function that is compiled."""
        if not self.boolean_mask:
            mask = torch.zeros(mask.shape, dtype=self.mask_dtype, device=mask.device).masked_fill_(
                ~mask, torch.finfo(self.mask_dtype).min)
        cache.prepare(write_at, None)  # every slot: no Python integer for the graph to specialise on
        return float_logits(self.model(input_ids=tokens, cache=cache, attention_mask=mask, position_ids=position_ids,
                                       use_cache=True, logits_to_keep=keep).logits)

    def _run(self, tokens, state: HFState, write_at, visible: int, mask, position_ids, keep: int = 0) -> torch.Tensor:
        """The compiled call where the shape is a step's (no prompt, at most ``max_width`` tokens), else eager."""
        batch, width = tokens.shape
        if keep not in (0, width) or width > self.max_width:
            return self._call(tokens, state.cache, write_at, mask, position_ids, keep)
        self.compiled_shapes.add((batch, width, state.capacity))
        if position_ids is write_at:  # one tensor as two inputs would be a graph of its own (dynamo's aliasing guard)
            position_ids = position_ids.clone()
        return self._compiled(tokens, state.cache, write_at, mask, position_ids, 0)
