"""Hugging Face ``generate`` driven like our decoders: plain or assisted (an assistant model, prompt lookup,
early exit) for an exact number of tokens under our ``Sampling``, seeded from our randomness. The audit
samples transformers through it and the bench times it (``decoders.bench.hf_compare``)."""

from __future__ import annotations

import torch

from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2
from decoders.models.history import CopyDraft
from decoders.models.tinygpt import TinyGPT
from decoders.sampling import Sampling

__all__ = ["SCHEDULES", "assisted_options", "hf_generate", "check_hf_sampling"]

#: transformers' assistant-token schedules (``num_assistant_tokens_schedule``).
SCHEDULES = ("constant", "heuristic", "heuristic_transient")


def assisted_options(draft, gamma: int) -> dict | None:
    """transformers' counterpart of our ``draft`` in ``generate`` with ``gamma`` tokens a step: an assistant model
    (a TinyGPT draft, such as the distilled ``smollm2-draft``, converted to GPT-2: the same network), prompt lookup
    (``copy``: matches of up to ``CopyDraft.max_match`` tokens) or early exit (``layerskip:K``); None where it has
    none (n-gram, random)."""

    if isinstance(draft, TinyGPT):
        return {"assistant": tinygpt_to_gpt2(draft), "assistant_tokens": gamma}
    if isinstance(draft, CopyDraft):
        return {"prompt_lookup_num_tokens": gamma, "max_matching_ngram_size": draft.max_match}
    if isinstance(draft, HFCausalLM) and draft.early_exit is not None:
        return {"assistant_early_exit": draft.early_exit}
    if isinstance(draft, HFCausalLM):
        return {"assistant": draft.model, "assistant_tokens": gamma}
    return None


def check_hf_sampling(sampling: Sampling) -> None:
    """transformers' ``generate`` has no frequency or presence penalty, no grammar and no Mirostat: refuse them rather
    than drop them."""
    if sampling.frequency_penalty or sampling.presence_penalty:
        raise ValueError(
            "transformers' generate has no frequency or presence penalty; drop --frequency-penalty and "
            "--presence-penalty"
        )
    if sampling.grammar is not None:
        raise ValueError(f"transformers' generate has no grammar; drop {sampling.grammar.flag}")
    if sampling.mirostat:
        raise ValueError("transformers' generate has no Mirostat; drop --mirostat")


def hf_generate(
    model,
    prompt: torch.Tensor,
    max_new_tokens: int,
    sampling: Sampling,
    randomness,
    *,
    assistant=None,
    assistant_tokens: int = 5,
    schedule: str = "constant",
    threshold: float = 0.0,
    **assisted,
) -> tuple:
    """Hugging Face ``generate`` on ``prompt`` ``[1, L]`` for ``max_new_tokens`` tokens under ``sampling``, ending early
    only at the sampling's stop tokens (``eos_token_id``; not at the model's own EOS token, which it does not ban
    either, as our decoders run to the length asked; ``min_new_tokens`` would ban it, and change the law) (temperature,
    top-k, top-p, min-p, repetition penalty and logit bias as ``sequence_bias``; transformers has no frequency or
    presence penalty), plain or assisted by ``assistant`` with its assistant-token count, schedule and confidence
    threshold, or by what ``assisted`` names (prompt lookup, early exit: ``generate``'s own keywords). HF samples from
    the global RNG and takes no generator: inside ``fork_rng`` (the caller's global state is restored afterwards) it is
    seeded from ``randomness``, so that runs repeat."""
    options = {
        "do_sample": not sampling.greedy,
        "max_new_tokens": max_new_tokens,
        "eos_token_id": list(sampling.stop) or None,
        "attention_mask": torch.ones_like(prompt),
        "pad_token_id": 0,
        **assisted,
    }
    if not sampling.greedy:
        options.update(
            temperature=sampling.temperature,
            top_k=sampling.top_k or 0,
            top_p=sampling.top_p or 1.0,
            min_p=sampling.min_p,
        )
    # processors: at temperature 0 too (docs/theory-sampling.md §14, the same rule)
    if sampling.repetition_penalty != 1:
        options["repetition_penalty"] = sampling.repetition_penalty
    if sampling.logit_bias:
        options["sequence_bias"] = {(token,): bias for token, bias in sampling.logit_bias}
    if assistant is not None:
        assistant.generation_config.num_assistant_tokens = assistant_tokens
        assistant.generation_config.num_assistant_tokens_schedule = schedule
        assistant.generation_config.assistant_confidence_threshold = threshold
        options["assistant_model"] = assistant
    seed = int(torch.randint(2**31, (1,), generator=randomness.generator))
    with torch.random.fork_rng(devices=[prompt.device] if prompt.device.type == "cuda" else []):
        torch.random.manual_seed(seed)
        output = model.generate(prompt, **options)
    return tuple(output[0, prompt.shape[1] :].tolist())
