"""The speed harness (docs/theory.md §9): cost ratio c, tokens per iteration and wall-clock speedup, held
against Theorem 3.8 (Leviathan et al.'s Table 4); ``hf_compare`` holds our decoders against Hugging Face.

Timing: every measured run is preceded by ``warmup`` unmeasured runs, bracketed by CUDA synchronisations,
repeated ``repeats`` times, and summarised by the median. Decoding is at batch 1, one prompt after the
other; T = 1 runs are seeded per prompt, so every repeat does the same work.

* c = (seconds of one draft call) / (seconds of one target call), each a one-token forward pass with the
  KV cache at batch 1 after a prompt (median over repeats).
* predicted speedup = Theorem 3.8, (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)), with alpha from the
  acceptance counts of all the timed runs at that temperature and the measured c; also the form that
  uses the measured tokens per iteration instead of alpha, tokens / (gamma c + 1), which isolates the
  timing model from the i.i.d. assumption.
* efficiency = seconds inside the models' calls / wall seconds, from the phase-timed runs (every row on
  CPU; null where runs were not phase-timed), and the autoregressive t_step over the one-token call.
* the batch sweep (``bench_batches``): the same protocol at b rows per call, with the cost profile
  measured at each batch size beside it.
"""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import asdict, dataclass, fields, replace

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import MAX_PROMPTS, accepted_and_verified, engine_metrics
from decoders.bench.documents import BatchSweep, BenchReport, BlockwiseDocument
from decoders.bench.inputs import Pair
from decoders.bench.profile import (
    ProfilePlan,
    call_job,
    call_seconds,
    efficiency,
    phases_per_iteration,
    profile_jobs,
    timed,
)
from decoders.bench.rows import BenchRow, BlockwiseRow
from decoders.blockwise import BlockwiseConfig, generate_blockwise
from decoders.models.protocol import synchronize
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.timing import cpu_name, speedup_interval, time_interleaved
from plumbing.validation import as_int, as_positive_int, positive_int_fields
from spectheory.speedup import walltime_improvement

__all__ = [
    "BenchSettings",
    "environment",
    "timed",
    "timed_decoding",
    "call_seconds",
    "bench_pair",
    "bench_batches",
    "Interleaved",
    "bench_row",
    "per_repeat",
    "per_prompt",
    "with_theorem",
    "BLOCKWISE_CONFIGS",
    "bench_blockwise",
    "model_dtype",
]

MAX_REPEATS = 100  # timed repeats (and warm-up runs) of every decoder: medians settle long before that

#: Stern et al. Fig. 4 analogue: block sizes k = 2..4 under the exact and two top-k criteria.
BLOCKWISE_CONFIGS = tuple(
    BlockwiseConfig(criterion, top_k=top_k, block_size=k)
    for k in (2, 3, 4)
    for criterion, top_k in (("exact", 1), ("top_k", 2), ("top_k", 3))
)


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
    batch_sizes: tuple = (1, 4, 16, 64)  # the batch sweep (bench_batches); () for none
    batch_gammas: tuple = (2, 4)
    sampling: Sampling = Sampling()  # every setting but the temperature (penalties, bias, filters, stops, grammar)

    def __post_init__(self) -> None:
        positive_int_fields(self, ("prompt_length", "max_new_tokens", "call_steps"))
        as_int("prompts", self.prompts, low=1, high=MAX_PROMPTS)
        as_int("repeats", self.repeats, low=1, high=MAX_REPEATS)
        as_int("warmup", self.warmup, low=0, high=MAX_REPEATS)
        if not self.gammas:
            raise ValueError("gammas must not be empty")
        for gamma in self.gammas:
            as_positive_int("gammas", gamma)
        if not self.temperatures or any(not t >= 0 for t in self.temperatures):
            raise ValueError(f"temperatures must be >= 0, got {self.temperatures!r}")
        for size in self.batch_sizes:
            as_int("batch_sizes", size, low=1, high=MAX_PROMPTS)
        if self.batch_sizes and not self.batch_gammas:
            raise ValueError("batch_gammas must not be empty when batch_sizes are given")
        for gamma in self.batch_gammas:
            as_positive_int("batch_gammas", gamma)

    def batch_prompts(self, batch_size: int) -> int:
        """Prompts decoded at ``batch_size``: whole batches, at least ``prompts`` of them."""
        return batch_size * -(-self.prompts // batch_size)

    def at(self, temperature: float) -> Sampling:
        """The sampling at one of ``temperatures``."""
        return replace(self.sampling, temperature=temperature)

    def as_dict(self) -> dict:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "sampling"},
            "sampling": self.sampling.as_dict(),
        }


def environment(device: torch.device | str, dtype: torch.dtype) -> dict[str, str | int]:
    """Where the numbers come from: device, its name, dtype, torch threads, and the host's description (a mapping of
    facts every document keeps as they were, whose keys grew over vintages)."""
    device = torch.device(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {
        "device": str(device),
        "device_name": name,
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _decode_all(prompts: torch.Tensor, decode) -> list:
    """``decode(prompt [1, L], randomness)`` for each prompt at batch 1, seeded per prompt."""
    return [decode(prompts[i : i + 1], seeded(i, prompts.device)) for i in range(len(prompts))]


def timed_decoding(prompts: torch.Tensor, decode, settings: BenchSettings) -> tuple[float, list]:
    """(median seconds, generations of the last repeat) of ``_decode_all(prompts, decode)`` under ``settings``."""
    runs = []

    def run():
        runs[:] = _decode_all(prompts, decode)

    return timed(run, repeats=settings.repeats, warmup=settings.warmup, device=prompts.device).median, runs


def _temperature_jobs(
    pair: Pair,
    prompts: torch.Tensor,
    s: BenchSettings,
    sampling: Sampling,
    gammas: tuple,
    batch_size: int = 1,
) -> tuple[dict, object, dict]:
    """The jobs of one temperature, one batch of ``batch_size`` prompts each, in prompt order: the profile's (its
    autoregressive runs are the benchmark's baseline) and speculative decoding at each gamma (phase-timed on
    CPU, where that costs nothing); (jobs, recorder, outputs), where ``outputs[(gamma, batch)]`` keeps each speculative
    job's last generation."""
    outputs = {}
    target, draft = pair.target, pair.draft
    plan = ProfilePlan(max(gammas), s.max_new_tokens, s.warmup, batch_size=batch_size)
    profiling, recorder = profile_jobs(pair, prompts, sampling, plan)
    phases = target.device.type == "cpu"
    jobs = {}
    for batch in range(len(prompts) // batch_size):
        jobs.update({key: run for key, run in profiling.items() if key[1] == batch})  # (name, batch, sample)
        for gamma in gammas:

            def run(batch=batch, config=SpeculativeConfig(gamma, sampling)):
                outputs[(config.gamma, batch)] = generate_speculative(
                    target,
                    draft,
                    prompts[batch * batch_size : (batch + 1) * batch_size],
                    max_new_tokens=s.max_new_tokens,
                    config=config,
                    randomness=seeded(batch, target.device),
                    profile=phases,
                )

            jobs[(gamma, batch)] = run
    return jobs, recorder, outputs


def _measure_batches(
    pair: Pair, prompts: torch.Tensor, s: BenchSettings, temperature: float, batch_size: int, bar
) -> tuple[dict, object, dict]:
    """``_temperature_jobs`` at ``s.batch_gammas``, ``batch_size`` prompts per call, timed interleaved: (timings,
    recorder, outputs)."""
    target = pair.target
    jobs, recorder, outputs = _temperature_jobs(pair, prompts, s, s.at(temperature), s.batch_gammas, batch_size)
    timings = time_interleaved(
        jobs,
        repeats=s.repeats,
        warmup=s.warmup,
        synchronize=lambda: synchronize(target.device),
        progress=lambda: bar.update(1),
    )
    return timings, recorder, outputs


def _job_keys(timings: dict, name, rows: int) -> list:
    """The keys of job ``name``'s runs, one per prompt (a profile's jobs carry a sample index too)."""
    return [(name, row, 0) if (name, row, 0) in timings else (name, row) for row in range(rows)]


def seconds_grid(timings: dict, name, rows: int) -> list:
    """Seconds of job ``name`` [repeats][prompts]."""
    return [list(values) for values in zip(*(timings[key].seconds for key in _job_keys(timings, name, rows)))]


def per_repeat(timings: dict, name, rows: int) -> list:
    """Seconds of job ``name`` per repeat, summed over the prompts."""
    return [sum(values) for values in seconds_grid(timings, name, rows)]


def per_prompt(timings: dict, name, rows: int) -> list:
    """Median seconds of job ``name`` for each prompt (row) over the repeats."""
    return [statistics.median(timings[key].seconds) for key in _job_keys(timings, name, rows)]


def ratio_standard_error(numerators: list, denominators: list) -> float | None:
    """Standard error of sum(a) / sum(b) over n >= 2 sampling units (prompts), by the ratio estimator's
    linearisation: sqrt(sum (a_i - R b_i)^2 / (n (n - 1))) / mean(b) (docs/theory.md §9). None for one unit."""
    n = len(numerators)
    if n < 2:
        return None
    ratio = sum(numerators) / sum(denominators)
    residuals = sum((a - ratio * b) ** 2 for a, b in zip(numerators, denominators))
    return (residuals / (n * (n - 1))) ** 0.5 / (sum(denominators) / n)


#: the cost model's check: within this fraction of the measured speedup, or within two standard errors
CALIBRATED_TOLERANCE = 0.10


def _phases_per_iteration(runs: list, target_prefill: float) -> dict[str, float] | None:
    """Measured seconds per iteration of draft, verify and the rest (accept, correct, rollback, loop)
    (``decoders.bench.profile.phases_per_iteration``)."""
    if "draft" not in runs[0].stats.seconds:
        return None
    iterations = sum(run.stats.iterations for run in runs)
    seconds = {key: sum(run.stats.seconds[key] for run in runs) for key in ("prefill", "draft", "verify", "total")}
    phases = phases_per_iteration(seconds, iterations, len(runs), target_prefill)
    return {"draft": phases.draft, "verify": phases.verify, "other": phases.other}


@dataclass(frozen=True)
class Interleaved:
    """Two decoders timed interleaved (``plumbing.timing.time_interleaved``): the ``timings`` of every job and the
    names of the two compared, the autoregressive ``baseline``'s and the ``speculative`` decoder's; ``per_prompt``:
    whether each of their runs decodes one prompt (then a row has a standard error over the prompts), not a batch."""

    timings: dict
    baseline: object
    speculative: object
    per_prompt: bool = True

    @property
    def names(self) -> tuple:
        return (self.baseline, self.speculative)


def bench_row(temperature: float, gamma: int, compared: Interleaved, runs: list, profile, tokens: int) -> BenchRow:
    """One (temperature, gamma) row from the interleaved timings ``compared`` over the prompts (or batches) of the
    speculative ``runs`` of ``tokens`` new tokens each: the measured speedup (medians) with its spread over repeats
    (each repeat's ratio of interleaved runs), its 95% bootstrap interval over repeats and prompts
    (``plumbing.timing.speedup_interval``) and, where each run is one prompt, its standard error over the prompts (at
    T > 0 each prompt's sampled text is one draw); and the calibrated prediction from the profile, with whether it is
    within max(10%, 2 SE) of the measurement."""
    rows, timings, names = len(runs), compared.timings, compared.names
    grids = [seconds_grid(timings, name, rows) for name in names]  # [repeats][rows] each
    autoregressive, speculative = ([sum(repeat) for repeat in grid] for grid in grids)  # per repeat
    accepted, verified = map(sum, zip(*(accepted_and_verified(run.stats, gamma) for run in runs)))
    iterations = sum(len(step) for run in runs for step in run.stats.accepted_per_iteration)  # row iterations
    ratios = sorted(a / b for a, b in zip(autoregressive, speculative))
    speedup = statistics.median(autoregressive) / statistics.median(speculative)
    calibrated = profile.speedup(gamma, tokens=tokens)
    error = ratio_standard_error(*(per_prompt(timings, name, rows) for name in names)) if compared.per_prompt else None
    allowed = max(CALIBRATED_TOLERANCE * speedup, 2 * (error or 0.0))
    return BenchRow(
        temperature=temperature,
        gamma=gamma,
        seconds=statistics.median(speculative),
        seconds_spread=[min(speculative), statistics.median(speculative), max(speculative)],
        iterations=iterations,
        tokens_per_iteration=1 + accepted / iterations,
        accepted_tokens=accepted,
        verified_tokens=verified,
        alpha_counts=accepted / verified if verified else None,
        speedup=speedup,
        speedup_spread=[ratios[0], statistics.median(ratios), ratios[-1]],
        speedup_standard_error=error,
        speedup_interval=speedup_interval(*grids, [1] * rows, [1] * rows),
        calibrated_speedup=calibrated,
        calibrated_over_measured=calibrated / speedup,
        calibrated_within=abs(calibrated - speedup) <= allowed,
        calibrated_tokens_per_iteration=profile.tokens_per_iteration(gamma),
        positional_tokens_per_iteration=profile.tokens_per_iteration(gamma, along_text=False),
        **asdict(engine_metrics(runs, gamma)),
        efficiency=efficiency([run.stats for run in runs]),
        measured_seconds_per_iteration=_phases_per_iteration(runs, profile.target_prefill),
        calibrated_seconds_per_iteration={
            "draft": gamma * profile.t_draft,
            "verify": profile.verify_seconds(gamma),
            "other": profile.overhead_seconds(gamma) - gamma * profile.t_draft,
        },
    )


def with_theorem(measured: list, c: float) -> tuple[float | None, list]:
    """(alpha pooled from the ``BenchRow``s' acceptance counts, the rows with Theorem 3.8's speedup at that alpha and
    ``c`` beside the measured one, and the tokens-per-iteration form of it)."""
    accepted, verified = sum(r.accepted_tokens for r in measured), sum(r.verified_tokens for r in measured)
    alpha = accepted / verified if verified else None
    rows = []
    for row in measured:
        predicted = float(walltime_improvement(min(alpha or 0.0, 1.0), row.gamma, c))
        predicted_from_tokens = row.tokens_per_iteration / (row.gamma * c + 1)
        rows.append(
            replace(
                row,
                predicted_speedup=predicted,
                measured_over_predicted=row.speedup / predicted,
                predicted_from_tokens=predicted_from_tokens,
                measured_over_predicted_from_tokens=row.speedup / predicted_from_tokens,
            )
        )
    return alpha, rows


@torch.no_grad()
def bench_pair(
    pair: Pair,
    prompts: torch.Tensor,
    settings: BenchSettings,
    *,
    progress: bool | None = None,
    greedy: list | None = None,
) -> BenchReport:
    """c, and for each temperature the autoregressive baseline, speculative decoding at each gamma and the cost
    profile (``decoders.bench.profile``), all timed interleaved prompt by prompt and repeat by repeat, every
    temperature in the same repeats (drift of the machine hits every row alike, docs/theory.md §9). ``greedy``:
    each prompt's greedy autoregressive tokens, which every T = 0 row compares with its own, prompt by prompt."""
    target, draft, target_name, draft_name = pair.target, pair.draft, pair.target_name, pair.draft_name
    device, s = target.device, settings
    prompts = prompts.to(device)
    rows, autoregressive, alphas, profiles, costs, measures = [], {}, {}, {}, {}, {}
    # One interleaved timing of everything: c's one-token calls of both models, and for every temperature its
    # decoders, its profile and the one-token target calls at the positions the autoregressive decoder decodes.
    jobs = {
        "c target": call_job(target, prompts[0], s.call_steps),
        "c draft": call_job(draft, prompts[0], s.call_steps),
    }
    for temperature in s.temperatures:
        temperature_jobs, recorder, outputs = _temperature_jobs(pair, prompts, s, s.at(temperature), s.gammas)
        temperature_jobs["target call"] = call_job(target, prompts[0], s.max_new_tokens)
        jobs.update({(temperature, key): job for key, job in temperature_jobs.items()})
        measures[temperature] = recorder, outputs
    with progress_bar(progress, total=len(jobs) * (s.warmup + s.repeats), desc="bench", unit="run") as bar:
        timed_jobs = time_interleaved(
            jobs,
            repeats=s.repeats,
            warmup=s.warmup,
            synchronize=lambda: synchronize(device),
            progress=lambda: bar.update(1),
        )
    c_target, c_draft = (timed_jobs[name].median / s.call_steps for name in ("c target", "c draft"))
    c = c_draft / c_target
    for temperature in s.temperatures:
        recorder, outputs = measures[temperature]
        timings = {
            key[1]: timing for key, timing in timed_jobs.items() if isinstance(key, tuple) and key[0] == temperature
        }
        profile = recorder.profile(c)
        profiles[temperature] = dict(profile.as_dict(), spread=recorder.spread())
        autoregressive[temperature] = statistics.median(per_repeat(timings, "autoregressive", len(prompts)))
        call = [seconds / s.max_new_tokens for seconds in timings["target call"].seconds]  # per repeat
        ratios = sorted(step / one for step, one in zip(recorder.components()["t_step"], call))
        costs[temperature] = {
            "seconds_per_token": profile.t_step,
            "target_call_seconds": statistics.median(call),
            "over_target_call": statistics.median(ratios),  # each repeat's, then the median
            "over_target_call_spread": [ratios[0], ratios[-1]],
            "efficiency": recorder.efficiency("autoregressive"),
        }
        measured = [
            bench_row(
                temperature,
                gamma,
                Interleaved(timings, "autoregressive", gamma),
                [outputs[(gamma, row)] for row in range(len(prompts))],
                profile,
                s.max_new_tokens,
            )
            for gamma in s.gammas
        ]
        if greedy is not None and temperature == 0:
            measured = [
                replace(
                    row,
                    greedy_equal=[outputs[(row.gamma, i)].tokens[0] == tuple(greedy[i]) for i in range(len(prompts))],
                )
                for row in measured
            ]
        alphas[temperature], theorem_rows = with_theorem(measured, c)
        rows += theorem_rows
    return BenchReport(
        environment=environment(device, model_dtype(target)),
        settings=s.as_dict(),
        target=target_name,
        draft=draft_name,
        c=c,
        target_call_seconds=c_target,
        draft_call_seconds=c_draft,
        autoregressive_seconds=autoregressive,
        alpha=alphas,
        rows=tuple(rows),
        profiles=profiles,
        autoregressive=costs,
    )


@torch.no_grad()
def bench_batches(
    pair: Pair, prompts: torch.Tensor, settings: BenchSettings, *, progress: bool | None = None
) -> BatchSweep:
    """The batch sweep: at each of ``settings.batch_sizes``, the autoregressive and speculative decoders (at
    each of ``batch_gammas``) on ``settings.batch_prompts(b)`` of ``prompts`` ``[N, L]``, b rows per call, with
    the cost model measured at that batch size beside them (docs/theory.md §10): tokens per second, the
    measured speedup and the prediction, and each decoder's efficiency."""
    s, target = settings, pair.target
    prompts = prompts.to(target.device)
    needed = max(s.batch_prompts(b) for b in s.batch_sizes)
    if len(prompts) < needed:
        raise ValueError(f"the batch sweep needs {needed} prompts, got {len(prompts)}")
    calls = sum(
        len(s.temperatures) * ((len(s.batch_gammas) + 3) * (s.batch_prompts(b) // b) + 1) * (s.warmup + s.repeats)
        for b in s.batch_sizes
    )
    rows, profiles = [], {}
    with progress_bar(progress, total=calls, desc="batch sweep", unit="run") as bar:
        for batch_size in s.batch_sizes:
            count = s.batch_prompts(batch_size)
            for temperature in s.temperatures:
                timings, recorder, outputs = _measure_batches(pair, prompts[:count], s, temperature, batch_size, bar)
                profile = recorder.profile()
                profiles[f"{batch_size},{temperature:g}"] = dict(profile.as_dict(), spread=recorder.spread())
                batches = count // batch_size
                baseline = per_repeat(timings, "autoregressive", batches)
                tokens = count * s.max_new_tokens
                for gamma in s.batch_gammas:
                    row = bench_row(
                        temperature,
                        gamma,
                        Interleaved(timings, "autoregressive", gamma, per_prompt=False),
                        [outputs[(gamma, batch)] for batch in range(batches)],
                        profile,
                        s.max_new_tokens,
                    )
                    rows.append(
                        replace(
                            row,
                            batch_size=batch_size,
                            prompts=count,
                            autoregressive_tokens_per_second=tokens / statistics.median(baseline),
                            tokens_per_second=tokens / row.seconds,
                            autoregressive_efficiency=recorder.efficiency("autoregressive"),
                        )
                    )
    return BatchSweep(batch_sizes=list(s.batch_sizes), gammas=list(s.batch_gammas), rows=tuple(rows), profiles=profiles)


@torch.no_grad()
def bench_blockwise(
    model, prompts: torch.Tensor, settings: BenchSettings, configs=BLOCKWISE_CONFIGS, *, progress: bool | None = None
) -> BlockwiseDocument:
    """Blockwise parallel decoding (Stern et al. Fig. 4 analogue): for each ``BlockwiseConfig``, the mean
    accepted block size (tokens per model call in the loop) and the wall-clock speedup over greedy
    autoregressive decoding with the base model, at batch 1 on ``prompts`` ``[N, L]``."""
    device, s = model.device, settings
    prompts = prompts.to(device)
    with progress_bar(progress, total=1 + len(configs), desc="blockwise", unit="run") as bar:
        baseline = timed_decoding(
            prompts,
            lambda p, r: generate_autoregressive(
                model.base, p, max_new_tokens=s.max_new_tokens, sampling=Sampling(0.0), randomness=r
            ),
            s,
        )[0]
        bar.update(1)
        rows = []
        for config in configs:
            seconds, runs = timed_decoding(
                prompts, lambda p, r: generate_blockwise(model, p, max_new_tokens=s.max_new_tokens, config=config), s
            )
            iterations = sum(run.stats.iterations for run in runs)
            tokens = sum(len(row) for run in runs for row in run.tokens)
            rows.append(
                BlockwiseRow(
                    criterion=config.criterion,
                    top_k=config.top_k,
                    epsilon=config.epsilon,
                    min_block_size=config.min_block_size,
                    block_size=config.block_size or model.heads,
                    seconds=seconds,
                    iterations=iterations,
                    mean_block_size=tokens / iterations,
                    speedup=baseline / seconds,
                )
            )
            bar.update(1)
    return BlockwiseDocument(
        environment=environment(device, model_dtype(model)),
        settings=s.as_dict(),
        heads=model.heads,
        autoregressive_seconds=baseline,
        rows=tuple(rows),
    )


def model_dtype(model) -> torch.dtype:
    """The dtype of a model's parameters (or its ``dtype`` attribute, for the history models)."""
    parameters = getattr(model, "parameters", None)
    return next(parameters()).dtype if parameters else getattr(model, "dtype", torch.float32)
