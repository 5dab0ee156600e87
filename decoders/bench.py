"""The speed harness: cost ratio c, tokens per iteration and wall-clock speedup, held against Theorem 3.8
(Leviathan et al.'s Table 4), and our decoders against Hugging Face ``generate`` on the same models.

Timing: every measured run is preceded by ``warmup`` unmeasured runs, bracketed by CUDA synchronisations,
repeated ``repeats`` times, and summarised by the median. Decoding is at batch 1, one prompt after the
other; T = 1 runs are seeded per prompt, so every repeat does the same work.

* c = (seconds of one draft call) / (seconds of one target call), each a one-token forward pass with the
  KV cache at batch 1 after a prompt (median over repeats).
* predicted speedup = Theorem 3.8, (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)), with alpha from the
  acceptance counts of all the timed runs at that temperature and the measured c; also the form that
  uses the measured tokens per iteration instead of alpha, tokens / (gamma c + 1), which isolates the
  timing model from the i.i.d. assumption.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch
from tqdm import tqdm

from decoders.autoregressive import generate_autoregressive
from decoders.blockwise import BlockwiseConfig, generate_blockwise
from decoders.measure import accepted_and_verified
from decoders.models.base import check_positive_integers
from decoders.random import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from spectheory.speedup import walltime_improvement

__all__ = ["BenchSettings", "BenchReport", "environment", "median_seconds", "call_seconds", "bench_pair",
           "hf_comparison", "BLOCKWISE_CONFIGS", "bench_blockwise"]

#: Stern et al. Fig. 4 analogue: block sizes k = 2..4 under the exact and two top-k criteria.
BLOCKWISE_CONFIGS = tuple(BlockwiseConfig(criterion, top_k=top_k, block_size=k) for k in (2, 3, 4)
                          for criterion, top_k in (("exact", 1), ("top_k", 2), ("top_k", 3)))


@dataclass(frozen=True)
class BenchSettings:
    gammas: tuple = (1, 2, 3, 4, 5, 6, 7, 8)
    temperatures: tuple = (0.0, 1.0)
    prompts: int = 8
    prompt_length: int = 64
    max_new_tokens: int = 128
    repeats: int = 3
    warmup: int = 1
    call_steps: int = 64  # one-token calls timed per repeat for c
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive_integers(self, ("prompts", "prompt_length", "max_new_tokens", "repeats", "call_steps"))
        if not self.gammas or any(isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in self.gammas):
            raise ValueError(f"gammas must be positive integers, got {self.gammas!r}")
        if not self.temperatures or any(not t >= 0 for t in self.temperatures):
            raise ValueError(f"temperatures must be >= 0, got {self.temperatures!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a non-negative integer, got {self.warmup!r}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BenchReport:
    """What ``bench_pair`` measured; ``rows`` hold one dict per (temperature, gamma)."""

    environment: dict
    settings: dict
    target: str
    draft: str
    c: float
    target_call_seconds: float
    draft_call_seconds: float
    autoregressive_seconds: dict  # temperature -> median seconds for the whole prompt set
    alpha: dict  # temperature -> pooled alpha from acceptance counts
    rows: tuple = field(default=())

    def best(self, temperature: float) -> dict:
        """The row with the largest measured speedup at ``temperature``."""
        return max((row for row in self.rows if row["temperature"] == temperature), key=lambda row: row["speedup"])

    def as_dict(self) -> dict:
        return dict(asdict(self), rows=list(self.rows),
                    best={str(t): self.best(t) for t in self.autoregressive_seconds})


def environment(device: torch.device | str, dtype: torch.dtype) -> dict:
    """Where the numbers come from: device, its name, dtype, torch version, threads, host."""
    device = torch.device(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    return {"device": str(device), "device_name": name, "dtype": str(dtype).replace("torch.", ""),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(run, *, repeats: int, warmup: int, device: torch.device | str) -> tuple[float, list]:
    """(median, all) wall-clock seconds of ``run()`` over ``repeats`` timed calls after ``warmup`` untimed ones."""
    device = torch.device(device)
    for _ in range(warmup):
        run()
    seconds = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        run()
        _synchronize(device)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), seconds


@torch.no_grad()
def call_seconds(model, prompt: torch.Tensor, *, steps: int, repeats: int, warmup: int) -> float:
    """Median seconds of one one-token forward pass with the cache, at batch 1, after ``prompt`` ``[L]``."""
    state = model.new_state(1)
    model.forward(prompt[None, :-1].to(model.device), state)
    held = state.lengths.clone()
    token = prompt[None, -1:].to(model.device)

    def run():
        for _ in range(steps):
            model.forward(token, state)
        model.truncate(state, held)

    return median_seconds(run, repeats=repeats, warmup=warmup, device=model.device)[0] / steps


def _decode_all(prompts: torch.Tensor, decode) -> list:
    """``decode(prompt [1, L], randomness)`` for each prompt at batch 1, seeded per prompt."""
    return [decode(prompts[i:i + 1], seeded(i, prompts.device)) for i in range(len(prompts))]


def _timed_decoding(prompts: torch.Tensor, decode, settings: BenchSettings) -> tuple[float, list]:
    """(median seconds, generations of the last repeat) of ``_decode_all(prompts, decode)`` under ``settings``."""
    runs = []

    def run():
        runs[:] = _decode_all(prompts, decode)

    return median_seconds(run, repeats=settings.repeats, warmup=settings.warmup, device=prompts.device)[0], runs


@torch.no_grad()
def bench_pair(target, draft, prompts: torch.Tensor, settings: BenchSettings, *, target_name: str = "target",
               draft_name: str = "draft", progress: bool | None = None) -> BenchReport:
    """Measure c, then for each temperature the autoregressive baseline and speculative decoding at each gamma."""
    device, s = target.device, settings
    prompts = prompts.to(device)
    c_target = call_seconds(target, prompts[0], steps=s.call_steps, repeats=s.repeats, warmup=s.warmup)
    c_draft = call_seconds(draft, prompts[0], steps=s.call_steps, repeats=s.repeats, warmup=s.warmup)
    c = c_draft / c_target
    rows, autoregressive, alphas = [], {}, {}
    units = len(s.temperatures) * (1 + len(s.gammas))
    with tqdm(total=units, desc="bench", unit="run", delay=1, leave=False,
              disable=None if progress is None else not progress) as bar:
        for temperature in s.temperatures:
            sampling = Sampling(temperature)

            autoregressive[temperature] = _timed_decoding(prompts, lambda p, r: generate_autoregressive(
                target, p, max_new_tokens=s.max_new_tokens, sampling=sampling, randomness=r), s)[0]
            bar.update(1)
            measured, accepted_all, verified_all = [], 0, 0
            for gamma in s.gammas:
                config = SpeculativeConfig(gamma, sampling)
                seconds, runs = _timed_decoding(prompts, lambda p, r: generate_speculative(
                    target, draft, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r), s)
                accepted, verified = map(sum, zip(*(accepted_and_verified(run.stats, gamma) for run in runs)))
                iterations = sum(len(run.stats.accepted_per_iteration) for run in runs)  # batch 1: one row each
                accepted_all, verified_all = accepted_all + accepted, verified_all + verified
                measured.append({"temperature": temperature, "gamma": gamma, "seconds": seconds,
                                 "iterations": iterations, "tokens_per_iteration": 1 + accepted / iterations,
                                 "alpha_counts": accepted / verified if verified else float("nan"),
                                 "speedup": autoregressive[temperature] / seconds})
                bar.update(1)
            alphas[temperature] = accepted_all / verified_all if verified_all else float("nan")
            for row in measured:
                predicted = float(walltime_improvement(min(alphas[temperature], 1.0), row["gamma"], c))
                predicted_from_tokens = row["tokens_per_iteration"] / (row["gamma"] * c + 1)
                rows.append(dict(row, predicted_speedup=predicted, measured_over_predicted=row["speedup"] / predicted,
                                 predicted_from_tokens=predicted_from_tokens,
                                 measured_over_predicted_from_tokens=row["speedup"] / predicted_from_tokens))
    return BenchReport(environment(device, _dtype(target)), s.as_dict(), target_name, draft_name, c, c_target,
                       c_draft, autoregressive, alphas, tuple(rows))


@torch.no_grad()
def bench_blockwise(model, prompts: torch.Tensor, settings: BenchSettings, configs=BLOCKWISE_CONFIGS, *,
                    progress: bool | None = None) -> dict:
    """Blockwise parallel decoding (Stern et al. Fig. 4 analogue): for each ``BlockwiseConfig``, the mean
    accepted block size (tokens per model call in the loop) and the wall-clock speedup over greedy
    autoregressive decoding with the base model, at batch 1 on ``prompts`` ``[N, L]``."""
    device, s = model.device, settings
    prompts = prompts.to(device)
    with tqdm(total=1 + len(configs), desc="blockwise", unit="run", delay=1, leave=False,
              disable=None if progress is None else not progress) as bar:
        baseline = _timed_decoding(prompts, lambda p, r: generate_autoregressive(
            model.base, p, max_new_tokens=s.max_new_tokens, sampling=Sampling(0.0), randomness=r), s)[0]
        bar.update(1)
        rows = []
        for config in configs:
            seconds, runs = _timed_decoding(prompts, lambda p, r: generate_blockwise(
                model, p, max_new_tokens=s.max_new_tokens, config=config), s)
            iterations = sum(run.stats.iterations for run in runs)
            tokens = sum(len(row) for run in runs for row in run.tokens)
            rows.append(dict(asdict(config), block_size=config.block_size or model.heads, seconds=seconds,
                             iterations=iterations, mean_block_size=tokens / iterations,
                             speedup=baseline / seconds))
            bar.update(1)
    return {"environment": environment(device, _dtype(model)), "settings": s.as_dict(), "heads": model.heads,
            "autoregressive_seconds": baseline, "rows": rows}


def _dtype(model) -> torch.dtype:
    parameters = getattr(model, "parameters", None)
    return next(parameters()).dtype if parameters else getattr(model, "dtype", torch.float32)


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
                "ar_hf_generate": lambda p, r: _hf_generate(hf_target, p, s.max_new_tokens, temperature, r),
                "speculative_ours_native": lambda p, r: generate_speculative(
                    target, draft, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r).tokens[0],
                "speculative_ours_adapter": lambda p, r: generate_speculative(
                    ours_target, ours_draft, p, max_new_tokens=s.max_new_tokens, config=config, randomness=r).tokens[0],
                "speculative_hf_assisted": lambda p, r: _hf_generate(hf_target, p, s.max_new_tokens, temperature, r,
                                                                     assistant=hf_draft, gamma=gamma),
            }
            outputs = {}
            for name, runner in runners.items():
                row[name + "_seconds"], outputs[name] = _timed_decoding(prompts, runner, s)
                bar.update(1)
            if temperature == 0:
                row["greedy_outputs_agree"] = all(outputs[name] == outputs["ar_ours_native"] for name in outputs)
            row["ar_ours_adapter_over_hf"] = row["ar_hf_generate_seconds"] / row["ar_ours_adapter_seconds"]
            row["speculative_ours_adapter_over_hf"] = (row["speculative_hf_assisted_seconds"]
                                                       / row["speculative_ours_adapter_seconds"])
            results["rows"].append(row)
    return results


def _hf_generate(model, prompt: torch.Tensor, max_new_tokens: int, temperature: float, randomness,
                 assistant=None, gamma: int | None = None) -> tuple:
    """Hugging Face ``generate`` for exactly ``max_new_tokens`` tokens (no end-of-sequence), plain or assisted.
    HF samples from the global RNG and takes no generator: inside ``fork_rng`` (the caller's global state is
    restored afterwards) it is seeded from ``randomness``, so that runs repeat."""
    options = {"do_sample": temperature > 0, "max_new_tokens": max_new_tokens, "min_new_tokens": max_new_tokens,
               "attention_mask": torch.ones_like(prompt), "pad_token_id": 0}
    if temperature > 0:
        options.update(temperature=temperature, top_k=0, top_p=1.0)
    if assistant is not None:
        assistant.generation_config.num_assistant_tokens = gamma
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0
        options["assistant_model"] = assistant
    seed = int(torch.randint(2 ** 31, (1,), generator=randomness.generator))
    with torch.random.fork_rng(devices=[prompt.device] if prompt.device.type == "cuda" else []):
        torch.random.manual_seed(seed)
        output = model.generate(prompt, **options)
    return tuple(output[0, prompt.shape[1]:].tolist())
