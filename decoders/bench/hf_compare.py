"""Our loops against Hugging Face ``generate`` on the same networks: the shipped TinyGPTs converted to GPT-2
(identical logits), or Hugging Face model directories through the adapter, timed interleaved like every
other benchmark (``plumbing.timing.time_interleaved``)."""

from __future__ import annotations

import copy
import statistics

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import BenchSettings
from decoders.bench.documents import HFComparison
from decoders.bench.rows import HFComparisonRow
from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2
from decoders.models.hf_generate import assisted_options, hf_generate
from decoders.models.protocol import synchronize
from decoders.models.tinygpt import TinyGPT
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.timing import time_interleaved

__all__ = ["hf_comparison", "check_comparable"]


def check_comparable(target, draft) -> None:
    """The comparison runs Hugging Face ``generate`` on the pair: both TinyGPTs (converted to GPT-2), or a
    Hugging Face target behind the adapter with any draft (``assisted_options`` says what assists it there)."""

    kinds = {type(model) for model in (target, draft)}
    if not (kinds <= {TinyGPT} or isinstance(target, HFCausalLM)):
        raise ValueError(
            f"--hf needs a transformer target: the shipped target with the transformer or distilled "
            f"draft, or a model directory, GGUF file or real model with any draft, got "
            f"{' and '.join(t.__name__ for t in kinds)}"
        )


def _hugging_face_pair(target, draft) -> tuple:
    """(Hugging Face target, our adapters over target and draft, our native models or None)."""

    check_comparable(target, draft)
    if isinstance(target, HFCausalLM):
        return target.model, target, draft, None
    hf_target, hf_draft = tinygpt_to_gpt2(target), tinygpt_to_gpt2(draft)
    return hf_target, HFCausalLM(hf_target), HFCausalLM(hf_draft), (target, draft)


@torch.no_grad()
def hf_comparison(
    target, draft, prompts: torch.Tensor, settings: BenchSettings, *, gamma: int, progress: bool | None = None
) -> HFComparison:
    """Our loops against Hugging Face ``generate`` on the same networks (TinyGPTs are converted to GPT-2 and run
    natively too; model directories run through the adapter only): autoregressive against ``generate``,
    speculative against assisted generation with ``gamma`` assistant tokens (constant schedule, confidence
    threshold off), batch 1; a target padded to cheaper call widths (``decoders.models.call_widths``) runs
    unpadded too. Every runner decodes every prompt in turn, timed interleaved (each repeat runs all
    of them before the next); seconds are medians over repeats of the sum over prompts, and each ratio's
    spread is over repeats. Greedy outputs must agree token for token."""
    s = settings
    prompts = prompts.to(target.device)
    hf_target, ours_target, ours_draft, native = _hugging_face_pair(target, draft)
    assisted = assisted_options(ours_draft, gamma)
    kinds = ("ar", "speculative") if assisted is not None else ("ar",)
    pairs = {"ours_adapter": (ours_target, ours_draft)}
    if native is not None:
        pairs["ours_native"] = native
    if ours_target.padded_widths:  # what padding the calls to cheaper widths buys, in the same run
        unpadded = copy.copy(ours_target)
        unpadded.padded_widths = {}
        pairs["ours_unpadded"] = (unpadded, ours_draft)
    rows = []
    runs = len(s.temperatures) * (s.warmup + s.repeats) * (len(kinds) + 2 * len(pairs)) * len(prompts)
    with progress_bar(progress, total=runs, desc="hf", unit="run") as bar:
        for temperature in s.temperatures:
            sampling = Sampling(temperature)
            config = SpeculativeConfig(gamma, sampling)
            runners = {"ar_hf_generate": lambda p, r: hf_generate(hf_target, p, s.max_new_tokens, sampling, r)}
            if assisted is not None:
                runners["speculative_hf_assisted"] = lambda p, r: hf_generate(
                    hf_target, p, s.max_new_tokens, sampling, r, **assisted
                )
            for name, (t, d) in pairs.items():
                runners["ar_" + name] = lambda p, r, t=t: generate_autoregressive(
                    t, p, max_new_tokens=s.max_new_tokens, sampling=sampling, randomness=r
                ).tokens[0]
                runners["speculative_" + name] = lambda p, r, t=t, d=d: generate_speculative(
                    t, d, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r
                ).tokens[0]
            outputs = {}
            jobs = {
                (name, i): lambda name=name, i=i: outputs.__setitem__(
                    (name, i), runners[name](prompts[i : i + 1], seeded(i, prompts.device))
                )
                for i in range(len(prompts))
                for name in runners
            }
            timings = time_interleaved(
                jobs,
                repeats=s.repeats,
                warmup=s.warmup,
                synchronize=lambda: synchronize(prompts.device),
                progress=lambda: bar.update(1),
            )
            per_repeat = {
                name: [sum(values) for values in zip(*(timings[(name, i)].seconds for i in range(len(prompts))))]
                for name in runners
            }
            over_hf = {}
            for kind, hf_name in (("ar", "ar_hf_generate"), ("speculative", "speculative_hf_assisted"))[: len(kinds)]:
                for name in pairs:
                    ours = f"{kind}_{name}"
                    ratios = sorted(h / o for h, o in zip(per_repeat[hf_name], per_repeat[ours]))
                    median = statistics.median(per_repeat[hf_name]) / statistics.median(per_repeat[ours])
                    over_hf[ours] = (median, [ratios[0], ratios[-1]])
            greedy = None
            if temperature == 0:
                greedy = all(
                    outputs[(name, i)] == outputs[("ar_hf_generate", i)]
                    for name in runners
                    for i in range(len(prompts))
                )
            row = HFComparisonRow(
                temperature=temperature,
                seconds={name: statistics.median(seconds) for name, seconds in per_repeat.items()},
                seconds_spread={name: [min(seconds), max(seconds)] for name, seconds in per_repeat.items()},
                over_hf={name: ratio for name, (ratio, _) in over_hf.items()},
                over_hf_spread={name: spread for name, (_, spread) in over_hf.items()},
                greedy_outputs_agree=greedy,
            )
            rows.append(row)
    return HFComparison(
        gamma=gamma,
        native=native is not None,
        assisted=sorted(assisted or {}),
        padded_widths=ours_target.padded_widths,
        rows=tuple(rows),
    )
