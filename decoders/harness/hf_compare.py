"""Our loops against Hugging Face ``generate`` on the same networks: the shipped TinyGPTs converted to GPT-2
(identical logits), timed like every other benchmark (``decoders.harness.bench.timed_decoding``)."""

from __future__ import annotations

import torch
from tqdm import tqdm

from decoders.autoregressive import generate_autoregressive
from decoders.harness.bench import BenchSettings, timed_decoding
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative

__all__ = ["hf_comparison", "hf_generate", "SCHEDULES"]

#: transformers' assistant-token schedules (``num_assistant_tokens_schedule``).
SCHEDULES = ("constant", "heuristic", "heuristic_transient")


@torch.no_grad()
def hf_comparison(target, draft, prompts: torch.Tensor, settings: BenchSettings, *, gamma: int,
                  progress: bool | None = None) -> dict:
    """Our loops against Hugging Face ``generate`` on the same networks (TinyGPTs converted to GPT-2):
    autoregressive against ``generate``, speculative against assisted generation with ``gamma`` assistant
    tokens (constant schedule, confidence threshold off). Greedy outputs must agree token for token."""
    from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2

    s, device = settings, target.device
    prompts = prompts.to(device)
    hf_target, hf_draft = tinygpt_to_gpt2(target), tinygpt_to_gpt2(draft)
    ours_target, ours_draft = HFCausalLM(hf_target), HFCausalLM(hf_draft)
    results = {"gamma": gamma, "rows": []}
    jobs = [(t, kind) for t in s.temperatures for kind in ("ours_native", "ours_adapter", "hf")]
    with tqdm(total=2 * len(jobs), desc="hf", unit="run", delay=1, leave=False,
              disable=None if progress is None else not progress) as bar:
        for temperature in s.temperatures:
            sampling = Sampling(temperature)
            config = SpeculativeConfig(gamma, sampling)
            row = {"temperature": temperature}
            runners = {
                "ar_ours_native": lambda p, r: generate_autoregressive(target, p, max_new_tokens=s.max_new_tokens,
                                                                       sampling=sampling, randomness=r).tokens[0],
                "ar_ours_adapter": lambda p, r: generate_autoregressive(ours_target, p, max_new_tokens=s.max_new_tokens,
                                                                        sampling=sampling, randomness=r).tokens[0],
                "ar_hf_generate": lambda p, r: hf_generate(hf_target, p, s.max_new_tokens, sampling, r),
                "speculative_ours_native": lambda p, r: generate_speculative(
                    target, draft, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r).tokens[0],
                "speculative_ours_adapter": lambda p, r: generate_speculative(
                    ours_target, ours_draft, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r).tokens[0],
                "speculative_hf_assisted": lambda p, r: hf_generate(hf_target, p, s.max_new_tokens, sampling, r,
                                                                    assistant=hf_draft, assistant_tokens=gamma),
            }
            outputs = {}
            for name, runner in runners.items():
                row[name + "_seconds"], outputs[name] = timed_decoding(prompts, runner, s)
                bar.update(1)
            if temperature == 0:
                row["greedy_outputs_agree"] = all(outputs[name] == outputs["ar_ours_native"] for name in outputs)
            row["ar_ours_adapter_over_hf"] = row["ar_hf_generate_seconds"] / row["ar_ours_adapter_seconds"]
            row["speculative_ours_adapter_over_hf"] = (row["speculative_hf_assisted_seconds"]
                                                       / row["speculative_ours_adapter_seconds"])
            results["rows"].append(row)
    return results


def hf_generate(model, prompt: torch.Tensor, max_new_tokens: int, sampling: Sampling, randomness, *,
                assistant=None, assistant_tokens: int = 5, schedule: str = "constant", threshold: float = 0.0) -> tuple:
    """Hugging Face ``generate`` on ``prompt`` ``[1, L]`` for exactly ``max_new_tokens`` tokens (no
    end-of-sequence) under ``sampling`` (temperature, top-k, top-p), plain or assisted by ``assistant`` with
    its assistant-token count, schedule and confidence threshold. HF samples from the global RNG and takes no
    generator: inside ``fork_rng`` (the caller's global state is restored afterwards) it is seeded from
    ``randomness``, so that runs repeat."""
    options = {"do_sample": not sampling.greedy, "max_new_tokens": max_new_tokens, "min_new_tokens": max_new_tokens,
               "attention_mask": torch.ones_like(prompt), "pad_token_id": 0}
    if not sampling.greedy:
        options.update(temperature=sampling.temperature, top_k=sampling.top_k or 0, top_p=sampling.top_p or 1.0)
    if assistant is not None:
        assistant.generation_config.num_assistant_tokens = assistant_tokens
        assistant.generation_config.num_assistant_tokens_schedule = schedule
        assistant.generation_config.assistant_confidence_threshold = threshold
        options["assistant_model"] = assistant
    seed = int(torch.randint(2 ** 31, (1,), generator=randomness.generator))
    with torch.random.fork_rng(devices=[prompt.device] if prompt.device.type == "cuda" else []):
        torch.random.manual_seed(seed)
        output = model.generate(prompt, **options)
    return tuple(output[0, prompt.shape[1]:].tolist())
