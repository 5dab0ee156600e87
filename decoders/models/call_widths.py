"""Padded call widths (docs/theory.md §11): a model call on a few new tokens is not always cheaper than one on a
few more: a CPU's matrix library may multiply a few rows as matrix-vector products, each row a pass over the
weights, and more rows as one matrix product (SmolLM2's measured times: docs/theory.md §10). The Hugging Face
adapter pads a call to the cheapest width measured at or above it (the padding writes nothing a row keeps:
``HFCausalLM.forward``); the cost profile then times what the decoders pay."""

from __future__ import annotations

import torch

from decoders.models.protocol import synchronize
from plumbing.timing import time_interleaved

__all__ = ["cheapest_widths", "measure_call_seconds", "pad_cheapest_widths"]

#: A wider call replaces a narrower one only when it is at least this much cheaper (timing noise is +-5%).
MARGIN = 0.9
#: Token counts per call measured: verify calls of gamma up to 7 at batch 1.
MAX_TOKENS = 8
#: Below this many seconds a one-token call is all overhead, and no width pays for padding (tiny models).
MIN_CALL_SECONDS = 0.005


def cheapest_widths(seconds: dict, margin: float = MARGIN) -> dict:
    """``{m: m'}``: for each measured token count m, the smallest larger measured count m' whose call costs at
    most ``margin`` times m's own; counts with none are left out. ``seconds``: ``{token count: seconds of one
    call}``."""
    plan = {}
    for count, own in seconds.items():
        wider = [c for c in sorted(seconds) if c > count and seconds[c] <= margin * own]
        if wider:
            plan[int(count)] = int(wider[0])
    return plan


@torch.no_grad()
def measure_call_seconds(
    adapter, *, max_tokens: int = MAX_TOKENS, context: int = 128, repeats: int = 5, seed: int = 0
) -> dict:
    """``{m: seconds}``: the median time of one adapter call on m new tokens after ``context`` random tokens,
    batch 1, m = 1..``max_tokens``, timed interleaved (each call undone by a truncation), unpadded; fewer context
    tokens where the model's context is shorter, none measured where it has no room."""
    context = min(context, (adapter.max_context or context + max_tokens) - max_tokens)
    if context < 1:
        return {}
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(adapter.vocab_size, (1, context + max_tokens), generator=generator).to(adapter.device)
    state = adapter.new_state(1, context + max_tokens)
    adapter.append(tokens[:, :context], state)
    lengths = state.lengths.clone()

    def call(count: int) -> None:
        adapter.forward(tokens[:, context : context + count], state)
        adapter.truncate(state, lengths, bound=context)

    runs = {count: lambda count=count: call(count) for count in range(1, max_tokens + 1)}
    plan, adapter.padded_widths = adapter.padded_widths, {}
    try:
        timings = time_interleaved(runs, repeats=repeats, warmup=1, synchronize=lambda: synchronize(adapter.device))
    finally:
        adapter.padded_widths = plan
    return {count: timing.median for count, timing in timings.items()}


#: Plans measured in this process, by (model source, device, dtype, torch threads): a model loaded again pads as
#: it did, unmeasured (a SmolLM2 measurement is 48 calls, about 10 s on 2 cores).
_MEASURED: dict = {}


def pad_cheapest_widths(adapter, source: str | None = None, **measure) -> dict:
    """Measures the adapter's calls and sets ``adapter.padded_widths`` to ``cheapest_widths`` of them (nothing
    for a model whose one-token call is under ``MIN_CALL_SECONDS``); returns the plan. With ``source`` (the file
    or directory the model came from), a plan this process measured for the same source, device, dtype and
    thread count is reused."""
    key = (source, str(adapter.device), str(adapter.dtype), torch.get_num_threads(), tuple(sorted(measure.items())))
    plan = _MEASURED.get(key) if source is not None else None
    if plan is None:
        seconds = measure_call_seconds(adapter, **measure)
        plan = cheapest_widths(seconds) if seconds.get(1, 0.0) >= MIN_CALL_SECONDS else {}
        if source is not None:
            _MEASURED[key] = plan
    adapter.padded_widths = dict(plan)
    return adapter.padded_widths
