"""The compiled, static-cache decode path for Hugging Face causal LMs (docs/gpu.md, "The compiled path"): its
settings and helpers; the model is ``decoders.models.hf.StaticHF`` (``HFCausalLM.compiled()``).

``StaticHF`` is the adapter of ``decoders.models.hf`` with two changes that make every call a fixed-shape
function of fixed buffers, so that ``torch.compile`` traces it (the first shape it sees, then once more with
symbolic sizes when a size changes) and, on CUDA, replays it as a CUDA graph (mode ``reduce-overhead``):

- its key/value buffers ``[B, H, capacity + 1, Dh]`` per layer are allocated once, when a state is made, for the
  room the decoder asks (rows x capacity), and never grow or move: a rollback (``truncate``) changes the rows'
  lengths only, and a call's mask spans every slot (``[B, 1, S, capacity + 1]``), the rows' own positions deciding
  what a query sees;
- a call of at most ``max_width`` tokens that carries no prompt (the autoregressive step, a chain's verify of
  width 1..gamma + 1, a tree's verify with its mask, the draft's step) runs one compiled function, made on its first
  call and kept (``StaticHF._call``): ``(tokens, cache, write_at, mask, position ids) -> logits``, with no host
  synchronisation inside (``fullgraph``: a graph break is an error). Calls that carry a prompt (prefills, the first
  verify) have a new width for every prompt length and run the same function eagerly, on the same buffers.

The laws are the eager adapter's: the same modules, weights and masks; only the number of masked key slots
differs, which moves logits by rounding (greedy tokens are identical in the tests, float64).
"""

from __future__ import annotations

import torch

from decoders.models.hf_cache import RowCache

__all__ = ["BACKENDS", "MAX_COMPILED_WIDTH", "MAX_SHAPES", "compile_mode", "allocate", "raise_shape_limits"]

#: torch.compile backends: inductor generates kernels (slow to compile, fast to run); eager and aot_eager trace
#: only (seconds), which the tests use to find graph breaks; "none" runs the same static-cache calls uncompiled
#: (no dynamo: the device check's dry run, whose parts' graphs tests/decoders/models/test_compiled.py traces).
BACKENDS = ("inductor", "aot_eager", "eager", "none")
#: Calls of at most this many tokens (and no prompt) run compiled: chain verifies and trees of up to 64 nodes.
MAX_COMPILED_WIDTH = 64
#: Distinct call shapes one model may compile (dynamo's per-function limit, beyond which it would run eagerly).
MAX_SHAPES = 256


def compile_mode(device: torch.device) -> str | None:
    """inductor's mode: CUDA graphs on CUDA (``reduce-overhead``), the default elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else None


def allocate(cache: RowCache, config, batch: int, dtype: torch.dtype, device: torch.device) -> None:
    """Every layer's key and value buffers ``[B, H_kv, capacity + 1, Dh]``, zeroed, allocated here once."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    width = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    shape = (batch, heads, cache.capacity + 1, width)
    cache.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
    cache.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
    if device.type == "cuda":  # CUDA graphs replay on these addresses, written in place (transformers' StaticCache)
        for buffer in cache.keys + cache.values:
            torch._dynamo.mark_static_address(buffer)


def raise_shape_limits() -> None:
    """Let dynamo keep ``MAX_SHAPES`` compiled entries of one function (one per call shape) before it would fall
    back to eager."""
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), MAX_SHAPES))
