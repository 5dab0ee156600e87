"""The baseline: one target call and one sampled token per step, with the KV cache; the first call carries the
prompt (a prefill and the first step in one call, as transformers' ``generate`` does)."""

from __future__ import annotations

import torch

from decoders._loop import (
    Unfed,
    begin,
    decode,
    forward_after,
    host_read,
    new_state,
    unfed,
)
from decoders.randomness import Randomness
from decoders.results import DecodeStats, Generation
from decoders.sampling import History, Sampling, adjusted_probs, draw

__all__ = ["autoregressive_step", "generate_autoregressive"]


def autoregressive_step(
    model,
    state,
    last: torch.Tensor,
    sampling: Sampling,
    randomness: Randomness,
    pending: Unfed | None = None,
    history: History | None = None,
) -> tuple:
    """Feed each row's last token ``[B]`` (after its ``pending`` prompt tokens) and sample the next one ``[B]``
    from the adjusted distribution ``[B, V]`` (penalised by ``history``'s counts where a penalty is set): (the
    tokens, that distribution, unchecked: ``decoders._loop.host_read`` checks it with the iteration's one read)."""
    logits = forward_after(model, last[:, None], state, pending)[:, 0]  # [B, V]
    probs = adjusted_probs(logits, sampling, validate=False, history=history)
    return draw(probs, sampling, randomness), probs


@torch.inference_mode()
def generate_autoregressive(
    model,
    prompts,
    *,
    max_new_tokens: int,
    sampling: Sampling,
    randomness: Randomness,
    eos: int | None = None,
    profile: bool = False,
) -> Generation:
    """Sample up to ``max_new_tokens`` per row (rows stop at ``eos``); prompts may differ in length."""
    run = begin(
        (model,),
        prompts,
        max_new_tokens=max_new_tokens,
        room=max_new_tokens,
        needed="max_new_tokens",
        sampling=sampling,
        eos=eos,
        profile=profile,
    )
    (model,), prompts, timer, history = run.models, run.prompts, run.timer, run.history
    state, pending = new_state(model, prompts, max_new_tokens), unfed(prompts, model.device)
    last = torch.tensor([prompt[-1] for prompt in prompts], device=model.device)
    steps = 0

    def iterate(active: list) -> list:
        nonlocal last, pending, history, steps
        with timer.phase("decode" if steps else "prefill"):  # "prefill": the prompt and the first new token
            last, probs = autoregressive_step(model, state, last, sampling, randomness, pending, history)
        steps, pending = steps + 1, None
        if history is not None:
            history = history.plus(last[:, None], laws=probs[:, None])
        return host_read([last[:, None]], (probs,))[0]

    decode(run.output, iterate)
    stats = DecodeStats(
        iterations=steps, target_calls=steps, draft_calls=0, accepted_per_iteration=(), betas=(), seconds=timer.finish()
    )
    return run.generation(stats)
