"""The device check's compiled section (docs/gpu.md, "The compiled path"), all in one run: ms per new token of our
compiled path, our eager path and transformers' static-cache compiled ``generate`` (the anchor); the compiled path's
cost profiles; and the chain's measured speedup on a 7B-sized shape under timing-only acceptance beside the cost
model's prediction from the measured profile (``gamma --costs``: ``CostProfile.speedup``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.device_document import CompiledSection, PerTokenMs, TimingChainRow
from decoders.bench.inputs import Pair
from decoders.bench.profile import ProfilePlan, measure_profile
from decoders.models.hf import layer_skip
from decoders.models.protocol import synchronize
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.timing import TimingOnlyStep
from plumbing.timing import Timing, repeat_ratios, time_interleaved
from spectheory.costs import CostProfile

__all__ = ["CompiledSizes", "COMPILED_FULL", "COMPILED_DRY_RUN", "compiled_section"]


@dataclass(frozen=True)
class CompiledSizes:
    """What the section runs: ``token_shapes`` timed per token; ``profile_pairs`` (target, draft shape or
    ``layerskip:K``); the timing-only chain on ``chain_pair`` at ``alphas`` x ``gammas``."""

    token_shapes: tuple
    profile_pairs: tuple
    chain_pair: tuple
    alphas: tuple
    gammas: tuple
    prompt_length: int
    new_tokens: int
    repeats: int
    backend: str = "inductor"

    def as_dict(self) -> dict:
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}


COMPILED_FULL = CompiledSizes(
    ("smollm2-135m", "smollm2-1.7b"),
    (("smollm2-1.7b", "smollm2-135m"), ("llama-7b-shape", "layerskip:2")),
    ("llama-7b-shape", "layerskip:2"),
    (0.6, 0.8, 0.9),
    tuple(range(1, 9)),
    128,
    64,
    3,
)
COMPILED_DRY_RUN = CompiledSizes(
    ("tiny-llama",),
    (("tiny-llama", "layerskip:1"),),
    ("tiny-llama", "layerskip:1"),
    (0.8,),
    (1, 2),
    8,
    6,
    2,
    backend="none",
)


def _ms_per_token(timing, tokens: int) -> list:
    """[min, median, max] ms per new token of a ``Timing`` of runs that each make ``tokens`` tokens."""
    return [1000 * seconds / tokens for seconds in (min(timing.seconds), timing.median, max(timing.seconds))]


def _timed(runs: dict, sizes: CompiledSizes, device) -> dict[object, Timing]:
    """``time_interleaved`` of ``runs`` after one untimed run each (where they compile), synchronised."""
    return time_interleaved(runs, repeats=sizes.repeats, warmup=1, synchronize=lambda: synchronize(device))


def _draft(spec: str, target, shapes: dict, device, dtype):
    if spec.startswith("layerskip:"):
        return layer_skip(target, int(spec.partition(":")[2]))
    return shapes[spec].build(device, dtype, seed=1)


def per_token(shape, sizes: CompiledSizes, device, dtype) -> PerTokenMs:
    """ms per new token, greedy, batch 1: eager, compiled, and transformers' ``generate`` with a static cache."""
    eager = shape.build(device, dtype, seed=0)
    compiled = eager.compiled(backend=sizes.backend)
    prompt = torch.randint(shape.vocab_size, (1, sizes.prompt_length), generator=torch.Generator().manual_seed(0))
    prompt, n = prompt.to(device), sizes.new_tokens

    def ours(model):
        return lambda: generate_autoregressive(model, prompt, max_new_tokens=n, sampling=GREEDY, randomness=seeded(0))

    def anchor():
        eager.model.generate(
            prompt,
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            cache_implementation="static",
            attention_mask=torch.ones_like(prompt),
            pad_token_id=0,
        )

    timings = _timed(
        {"eager": ours(eager), "compiled": ours(compiled), "transformers_static_generate": anchor}, sizes, device
    )
    return PerTokenMs(
        **{name: _ms_per_token(timing, n) for name, timing in timings.items()},
        compiled_over_anchor=statistics.median(
            repeat_ratios(timings["compiled"], timings["transformers_static_generate"])
        ),
    )


def compiled_profile(target_shape, draft_spec: str, shapes: dict, sizes: CompiledSizes, device, dtype) -> CostProfile:
    """The compiled pair's cost profile at gamma max(gammas), T = 0 (``decoders.bench.profile``), in seconds."""
    target = target_shape.build(device, dtype, seed=0)
    draft = _draft(draft_spec, target, shapes, device, dtype).compiled(backend=sizes.backend)
    gamma = max(sizes.gammas)
    prompts = torch.randint(target.vocab_size, (2, sizes.prompt_length), generator=torch.Generator().manual_seed(1))
    plan = ProfilePlan(gamma, sizes.new_tokens, warmup=1, repeats=sizes.repeats)
    return measure_profile(Pair(target.compiled(backend=sizes.backend), draft), prompts.to(device), GREEDY, plan)[0]


def timing_chain(shapes: dict, sizes: CompiledSizes, costs: CostProfile, device, dtype) -> list[TimingChainRow]:
    """The chain under timing-only acceptance on ``chain_pair``: measured speedup over our compiled autoregressive
    decoder at each alpha and gamma (the median of per-repeat ratios, all timed interleaved), beside
    ``CostProfile.speedup`` from the measured profile ``costs``."""
    target = shapes[sizes.chain_pair[0]].build(device, dtype, seed=0)
    draft = _draft(sizes.chain_pair[1], target, shapes, device, dtype).compiled(backend=sizes.backend)
    target = target.compiled(backend=sizes.backend)
    prompt = torch.randint(target.vocab_size, (1, sizes.prompt_length), generator=torch.Generator().manual_seed(2))
    prompt, n = prompt.to(device), sizes.new_tokens
    runs = {
        "autoregressive": lambda: generate_autoregressive(
            target, prompt, max_new_tokens=n, sampling=GREEDY, randomness=seeded(0)
        )
    }
    for alpha in sizes.alphas:
        for gamma in sizes.gammas:
            runs[alpha, gamma] = lambda alpha=alpha, gamma=gamma: generate_speculative(
                target,
                draft,
                prompt,
                max_new_tokens=n,
                config=SpeculativeConfig(gamma, GREEDY),
                randomness=seeded(0),
                step=TimingOnlyStep(alpha),
            )
    timings = _timed(runs, sizes, device)  # every setting interleaved with the autoregressive decoder
    base = timings.pop("autoregressive")
    return [
        TimingChainRow(
            alpha=alpha,
            gamma=gamma,
            ms_per_token=_ms_per_token(timing, n),
            autoregressive_ms_per_token=_ms_per_token(base, n),
            measured_speedup=statistics.median(repeat_ratios(base, timing)),
            predicted_speedup=float(costs.speedup(gamma, alpha)) if gamma <= costs.gamma_max else None,
        )
        for (alpha, gamma), timing in timings.items()
    ]


def compiled_section(shapes: dict, sizes: CompiledSizes, device, dtype_name: str) -> CompiledSection:
    """Every part of the section (module docstring), in one document."""
    dtype = getattr(torch, dtype_name)
    per_token_ms = {name: per_token(shapes[name], sizes, device, dtype) for name in sizes.token_shapes}
    profiles = {
        pair: compiled_profile(shapes[pair[0]], pair[1], shapes, sizes, device, dtype) for pair in sizes.profile_pairs
    }
    return CompiledSection(
        sizes=sizes.as_dict(),
        dtype=dtype_name,
        per_token_ms=per_token_ms,
        profiles={"+".join(pair): profile for pair, profile in profiles.items()},
        timing_chain=tuple(timing_chain(shapes, sizes, profiles[sizes.chain_pair], device, dtype)),
    )
