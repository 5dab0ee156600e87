"""The cost profile of a pair (docs/theory.md §10), measured by the decoders themselves.

Jobs of one prompt each, run once per repeat and interleaved prompt by prompt with whatever else is timed
(the benchmark's runs), so that the machine's drift hits the profile and the runs it predicts alike:

* ``autoregressive``: our autoregressive decoder with phase timing. Its first step carries the prompt (the
  "prefill" phase: one call, as transformers' first call); t_step = the other steps' wall time over their
  number (a target call, sampling, the loop's bookkeeping), and ``target_prefill`` = the first step's excess
  over t_step (``autoregressive_costs``). The benchmark times its baseline with these same runs.
* ``speculative`` at gamma_max and at 1, with phase timing. Its first verify call carries the prompt as well,
  so ``target_prefill`` comes off the verify phase, and its prefill phase is the draft's (``phases_per_iteration``).
  The draft phase and the rest (accept, correct, rollback, the loop) per iteration are affine in gamma through
  the two runs: draft = d0 + d1 gamma, rest = o0 + o1 gamma, so t_draft = d1 + o1 and t_iteration = d0 + o0
  (Theorem 3.8's terms).
* ``speculative`` also at up to two gammas in between (``overhead_gammas``): on a CPU the draft-and-rest seconds
  per iteration are not affine in gamma (docs/theory.md §10 gives the shipped pair's distance from the line), so
  ``t_overhead`` holds them measured at every profiled gamma and interpolated between.
* ``verify widths``: the target call with sampling on k positions after the first batch's prompt, for every
  k = 1..gamma_max + 1 (``verify_widths_job``). A call's cost is not affine in k on a CPU (the matrix kernels
  favour some shapes: docs/theory.md §10), so it is measured at every width and shifted by the mean difference
  between the decoding runs' verify phases and these calls at the widths those runs verified:
  t_verify(k) = call(k) + offset.
* the widths verified: a draft that proposes fewer than gamma tokens (copy) is verified on its proposals
  alone, so the runs at gamma_max record the fraction of iterations whose longest proposal was m
  (``CostProfile.proposal_fractions``); an iteration at gamma then verifies min(m, gamma) + 1 positions.
* acceptance, from the runs at gamma_max: a_i = #(accepted >= i) / #(accepted >= i - 1), and the outcome at
  every text position (1 accepted, 0 rejected, alpha where a bonus token left it untested), which
  ``spectheory.positional.expected_iterations_along`` replays at any gamma. When sampling, each prompt is
  decoded ``SAMPLES`` times at gamma_max to double the text the acceptance is measured on.

The speculative runs draw from seeds of their own (``SEED_OFFSET``), so that at T > 0 the profile never sees
the texts of the benchmark's timed runs: a prediction, not a replay of the runs it predicts.

Every component is the median over repeats, with its spread (min, median, max).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np
import torch

from decoders import _loop
from decoders._loop import check_room
from decoders.autoregressive import generate_autoregressive
from decoders.bench.inputs import Pair
from decoders.models.protocol import synchronize
from decoders.randomness import seeded
from decoders.sampling import Sampling, adjusted_probs, history_of
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.timing import Timing, time_interleaved, time_repeats
from plumbing.validation import as_int
from spectheory.cost_checks import CostChecks, check_costs
from spectheory.costs import CostProfile

SEED_OFFSET = 1_000_003  # the profile's speculative runs: seeds apart from the benchmark's (prompt index)
SAMPLES = 2  # decodes per prompt at gamma_max when sampling (greedy decoding repeats itself)

__all__ = [
    "ProfilePlan",
    "SEED_OFFSET",
    "SAMPLES",
    "AutoregressiveCosts",
    "autoregressive_costs",
    "Phases",
    "phases_per_iteration",
    "ProfileRecorder",
    "overhead_gammas",
    "check_batch_size",
    "profile_jobs",
    "acceptance_by_position",
    "efficiency",
    "counts_by_row",
    "outcomes_along_text",
    "acceptance_fields",
    "timed",
    "call_job",
    "verify_widths_job",
    "call_seconds",
    "profile_checks",
    "measure_profile",
]


def acceptance_by_position(counts, gamma: int) -> tuple:
    """a_i = #(iterations accepting >= i) / #(iterations accepting >= i - 1), i = 1..gamma (0 where none
    reached position i), from the accepted counts of iterations at ``gamma``."""
    reached = [sum(1 for n in counts if n >= i) for i in range(gamma + 1)]
    return tuple(reached[i] / reached[i - 1] if reached[i - 1] else 0.0 for i in range(1, gamma + 1))


@dataclass(frozen=True)
class AutoregressiveCosts:
    """t_step and the target's prefill (its excess over t_step) of autoregressive runs (``autoregressive_costs``)."""

    t_step: float
    target_prefill: float


def autoregressive_costs(seconds: dict, calls: int, tokens: int) -> AutoregressiveCosts:
    """t_step and target_prefill from ``calls`` autoregressive runs of ``tokens`` >= 2 new tokens (``seconds``: their
    summed phases), whose first step carries the prompt (the "prefill" phase): t_step = the other steps' seconds
    over their number, target_prefill = the first step's excess over t_step."""
    t_step = (seconds["total"] - seconds["prefill"]) / (calls * (tokens - 1))
    return AutoregressiveCosts(t_step, max(seconds["prefill"] / calls - t_step, 0.0))


@dataclass(frozen=True)
class Phases:
    """Seconds per iteration of the draft, the verify call and the rest (accept, correct, rollback, the loop), and
    the draft's prefill per run (``phases_per_iteration``)."""

    draft: float
    verify: float
    other: float
    prefill: float


def phases_per_iteration(seconds: dict, iterations: int, calls: int, target_prefill: float) -> Phases:
    """Seconds per iteration of the draft, the verify call and the rest (accept, correct, rollback, the loop) of
    ``calls`` speculative runs of ``iterations`` in all (``seconds``: their summed phases), and the draft's prefill
    per run. Each run's first verify call carries the prompt: ``target_prefill`` (the autoregressive runs', whose
    first step carries it likewise) comes off the verify phase."""
    return Phases(
        draft=seconds["draft"] / iterations,
        verify=(seconds["verify"] - calls * target_prefill) / iterations,
        other=(seconds["total"] - seconds["prefill"] - seconds["draft"] - seconds["verify"]) / iterations,
        prefill=seconds["prefill"] / calls,
    )


def efficiency(stats) -> float | None:
    """Seconds inside the models' calls over wall seconds, summed over runs (``DecodeStats``, profiled); None
    unless every run was profiled."""
    if not stats or not all("model" in one.seconds for one in stats):
        return None
    return sum(one.seconds["model"] for one in stats) / sum(one.seconds["total"] for one in stats)


def counts_by_row(accepted_per_iteration, rows: int, tokens: int) -> list[list[int]]:
    """Each row's accepted counts per iteration, from a run's ``accepted_per_iteration`` (per iteration, the
    rows still generating, in order) when every row stops at ``tokens`` new tokens (no end-of-sequence)."""
    counts, emitted, active = [[] for _ in range(rows)], [0] * rows, list(range(rows))
    for step in accepted_per_iteration:
        for row, n in zip(active, step):
            counts[row].append(n)
            emitted[row] += n + 1
        active = [row for row in active if emitted[row] < tokens]
    return counts


def outcomes_along_text(counts, gamma: int, tokens: int, untested: float) -> tuple:
    """The acceptance outcome at each of the first ``tokens`` text positions of one row, from its accepted
    counts per iteration at ``gamma``: 1 for an accepted draft token, 0 for a rejected one, ``untested`` for
    a bonus token's position."""
    outcomes = []
    for n in counts:
        outcomes += [1.0] * n + ([0.0] if n < gamma else [untested])
    return tuple(outcomes[:tokens])


def acceptance_fields(counts: list, widths: list, texts: list, gamma_max: int, tokens: int) -> dict[str, object]:
    """A profile's acceptance (``CostProfile``'s fields) from runs at ``gamma_max``: ``counts``, the accepted count
    of every iteration; ``widths``, the positions each iteration verified; ``texts``, per decoded row its counts in
    order (the text's outcomes, ``outcomes_along_text``)."""
    verified = sum(counts) + sum(1 for n in counts if n < gamma_max)
    alpha = sum(counts) / verified if verified else None
    fractions = tuple(widths.count(m + 1) / len(widths) for m in range(gamma_max + 1))
    return {
        "acceptance": acceptance_by_position(counts, gamma_max),
        "alpha": alpha,
        "acceptance_along_text": tuple(outcomes_along_text(row, gamma_max, tokens, alpha or 0.0) for row in texts),
        "proposal_fractions": () if fractions[-1] == 1 else fractions,
    }


@dataclass
class ProfileRecorder:
    """Phase seconds of every profiled run, per job name and repeat (summed over prompts)."""

    gamma_max: int
    tokens: int
    calls: dict  # name -> calls per repeat (prompts or batches, times samples)
    warmup: int
    records: dict  # name -> [per call: stats]
    batch_size: int = 1
    widths: list = field(default_factory=list)  # per call of the verify widths job: {k: seconds}

    def add(self, name, stats) -> None:
        self.records.setdefault(name, []).append(stats)

    def add_widths(self, seconds: dict) -> None:
        self.widths.append(seconds)

    def _repeats(self, name) -> list[dict]:
        """Per repeat, the phase seconds summed over the prompts, with iterations and accepted counts."""
        size = self.calls[name]
        calls = self.records[name][self.warmup * size :]
        repeats = [calls[r : r + size] for r in range(0, len(calls), size)]
        return [
            {
                "seconds": {
                    key: sum(stats.seconds.get(key, 0.0) for stats in group)
                    for key in ("prefill", "draft", "verify", "total")
                },
                "iterations": sum(stats.iterations for stats in group),
                "widths": [max(rows) + 1 for stats in group for rows in stats.proposed_per_iteration],
                "counts": [
                    row
                    for stats in group  # per row of every call, call by call
                    for row in counts_by_row(stats.accepted_per_iteration, self.batch_size, self.tokens)
                ],
            }
            for group in repeats
        ]

    def efficiency(self, name) -> float | None:
        """``efficiency`` over the timed runs of job ``name``."""
        return efficiency(self.records[name][self.warmup * self.calls[name] :])

    @property
    def gammas(self) -> list[int]:
        """The gammas of the speculative runs."""
        return sorted(name[1] for name in self.calls if isinstance(name, tuple) and name[0] == "speculative")

    def _autoregressive(self) -> list[AutoregressiveCosts]:
        """Per repeat: t_step and target_prefill (``autoregressive_costs``)."""
        return [
            autoregressive_costs(r["seconds"], self.calls["autoregressive"], self.tokens)
            for r in self._repeats("autoregressive")
        ]

    def _phases(self, gamma: int) -> list[Phases]:
        """Per repeat: draft, verify and other seconds per iteration, the draft's prefill per call."""
        name = ("speculative", gamma)
        return [
            phases_per_iteration(r["seconds"], r["iterations"], self.calls[name], a.target_prefill)
            for r, a in zip(self._repeats(name), self._autoregressive())
        ]

    def _verify_calls(self) -> list[dict]:
        """Per repeat: the verify call's seconds at every width, shifted to the decoding runs' verify phases."""
        calls, out = self.widths[self.warmup :], []
        for r, seconds in enumerate(calls):
            shifts = []
            for gamma in sorted({self.gammas[0], self.gamma_max}):
                widths = self._repeats(("speculative", gamma))[r]["widths"]
                bare = sum(seconds[k] for k in widths) / len(widths)
                shifts.append(self._phases(gamma)[r].verify - bare)
            offset = sum(shifts) / len(shifts)
            out.append({k: max(t + offset, 1e-9) for k, t in seconds.items()} | {"offset": offset})
        return out

    def components(self) -> dict[str, list[float]]:
        """Per repeat values of every component: {name: [value per repeat]}."""
        autoregressive = self._autoregressive()
        smallest = self.gammas[0]  # 1 in the profile's own runs; the sweep's smallest where it lends its runs
        high, low = self._phases(self.gamma_max), self._phases(smallest)
        span = max(self.gamma_max - smallest, 1)
        values = {
            "t_step": [a.t_step for a in autoregressive],
            "target_prefill": [a.target_prefill for a in autoregressive],
        }
        for name in ("draft", "other"):
            values[f"{name}_slope"] = [
                (getattr(h, name) - getattr(l, name)) / span if self.gamma_max > 1 else 0.0 for h, l in zip(high, low)
            ]
            values[f"{name}_intercept"] = [
                getattr(l, name) - smallest * slope for l, slope in zip(low, values[f"{name}_slope"])
            ]
        if self.gamma_max == smallest:  # one run: all of the draft phase is per draft token
            values["draft_slope"], values["draft_intercept"] = [h.draft / smallest for h in high], [0.0] * len(high)
        for gamma in self.gammas:
            values[f"overhead_{gamma}"] = [r.draft + r.other for r in self._phases(gamma)]
        values["draft_prefill"] = [h.prefill for h in high]
        verify = self._verify_calls()
        values["verify_offset"] = [v["offset"] for v in verify]
        for k in sorted(key for key in verify[0] if key != "offset"):
            values[f"t_verify_{k}"] = [v[k] for v in verify]
        return values

    def spread(self) -> dict[str, list[float]]:
        """(min, median, max) over repeats of every component."""
        return {key: [min(v), statistics.median(v), max(v)] for key, v in self.components().items()}

    def profile(self, c: float | None = None) -> CostProfile:
        """The medians as a ``CostProfile`` (with Theorem 3.8's ``c`` when given)."""
        m = {key: statistics.median(v) for key, v in self.components().items()}
        runs = self._repeats(("speculative", self.gamma_max))
        counts = [n for r in runs for row in r["counts"] for n in row]
        widths = [k for r in runs for k in r["widths"]]
        return CostProfile(
            t_step=m["t_step"],
            t_draft=max(m["draft_slope"] + m["other_slope"], 0.0),
            t_verify=tuple(m[f"t_verify_{k}"] for k in range(1, len(self.widths[-1]) + 1)),
            t_iteration=max(m["draft_intercept"] + m["other_intercept"], 0.0),
            target_prefill=m["target_prefill"],
            draft_prefill=m["draft_prefill"],
            c=c,
            batch_size=self.batch_size,
            **acceptance_fields(counts, widths, runs[-1]["counts"], self.gamma_max, self.tokens),
            t_overhead=tuple(
                float(x)
                for x in np.interp(
                    range(1, self.gamma_max + 1), self.gammas, [max(m[f"overhead_{g}"], 0.0) for g in self.gammas]
                )
            ),
        )


def timed(run, *, repeats: int, warmup: int, device: torch.device | str) -> Timing:
    """``plumbing.timing.time_repeats`` with the device synchronised around each timed call (CUDA)."""
    return time_repeats(run, repeats=repeats, warmup=warmup, synchronize=lambda: synchronize(device))


def call_job(model, prompt: torch.Tensor, steps: int):
    """A job of ``steps`` one-token forward passes with the cache, at batch 1, after ``prompt`` ``[L]``: bare
    model calls (no sampling), to time alone or interleaved with decoding."""
    state = model.new_state(1)
    with torch.no_grad():
        model.forward(prompt[None, :-1].to(model.device), state)
    held = state.lengths.clone()
    token = prompt[None, -1:].to(model.device)

    @torch.no_grad()
    def run():
        for _ in range(steps):
            model.forward(token, state)
        model.truncate(state, held)

    return run


def verify_widths_job(model, prompts: torch.Tensor, sampling: Sampling, widths: range, record, *, steps: int = 4):
    """A job timing the verify call on k positions, for every k in ``widths``, after ``prompts`` ``[B, L]``: ``steps``
    rounds of one call at each width in turn (round-robin, never a width's calls in a block of their own), with the
    sampling's adjusted probabilities (penalties and grammar along the path fed, as in verification) and a truncation
    back each; ``record({k: median seconds per call})``. Times are read from ``decoders._loop.clock``, the decoders'
    phase clock."""
    history = history_of(sampling, prompts.tolist(), model)
    state = model.new_state(len(prompts), prompts.shape[1] + max(widths))
    with torch.no_grad():
        model.forward(prompts[:, :-1].to(model.device), state)
    held = state.lengths.clone()
    feeds = {k: prompts[:, -1:].to(model.device).expand(-1, k) for k in widths}  # [B, k]

    @torch.no_grad()
    def run():
        seconds = {k: [] for k in widths}
        for _ in range(steps):  # round-robin over the widths: a change of load hits them alike
            for k in widths:
                synchronize(model.device)
                start = _loop.clock()
                adjusted_probs(
                    model.forward(feeds[k], state),
                    sampling,
                    validate=False,
                    history=None if history is None else history.along(feeds[k][:, 1:]),
                )
                model.truncate(state, held)
                synchronize(model.device)
                seconds[k].append(_loop.clock() - start)
        record({k: statistics.median(times) for k, times in seconds.items()})

    return run


def call_seconds(model, prompt: torch.Tensor, *, steps: int, repeats: int, warmup: int) -> float:
    """Median seconds of one one-token forward pass (``call_job``), timed on its own (Theorem 3.8's c is the
    draft's over the target's)."""
    return timed(call_job(model, prompt, steps), repeats=repeats, warmup=warmup, device=model.device).median / steps


def overhead_gammas(gamma_max: int) -> list[int]:
    """The gammas the speculative runs profile: 1, gamma_max and two between, a third of the way apart."""
    return sorted({1, gamma_max} | {round(1 + (gamma_max - 1) * i / 3) for i in (1, 2)})


def check_batch_size(batch_size: int, prompts: int) -> int:
    """Rows per call: at most the prompts, and dividing them (a smaller last batch would mix two batch sizes)."""
    as_int("batch_size", batch_size, low=1, high=prompts)
    if prompts % batch_size:
        raise ValueError(f"batch_size must divide the {prompts} prompts, got {batch_size}")
    return batch_size


@dataclass(frozen=True)
class ProfilePlan:
    """What a cost profile decodes and times (docs/theory.md §10): gammas to ``gamma_max`` over ``max_new_tokens``
    per prompt at ``batch_size`` rows per call (1: each prompt on its own, as the benchmark does), the verify call at
    widths 1..``verify_widths`` (None: gamma_max + 1; more for trees, docs/theory-trees.md §12), ``warmup`` untimed
    runs and ``repeats`` timed ones, c from ``call_steps`` one-token calls of each model (0: without c)."""

    gamma_max: int
    max_new_tokens: int
    warmup: int
    repeats: int = 1
    batch_size: int = 1
    call_steps: int = 64
    verify_widths: int | None = None


def profile_jobs(
    pair: Pair, prompts: torch.Tensor, sampling: Sampling, plan: ProfilePlan
) -> tuple[dict, ProfileRecorder]:
    """The jobs ({(name, row, sample): callable}) that decode ``prompts`` as ``plan`` says and the recorder they
    fill (``plan.repeats`` and ``plan.call_steps`` are their timer's)."""
    target, draft = pair.target, pair.draft
    gamma_max, max_new_tokens, warmup, batch_size = plan.gamma_max, plan.max_new_tokens, plan.warmup, plan.batch_size
    verify_widths = plan.verify_widths
    check_batch_size(batch_size, len(prompts))
    as_int("max_new_tokens", max_new_tokens, low=2)  # t_step comes from the steps after the first
    widths = gamma_max + 1 if verify_widths is None else as_int("verify_widths", verify_widths, low=gamma_max + 1)
    check_room(target, prompts.tolist(), widths, "verify_widths")
    prompts = prompts.to(target.device)
    batches = [prompts[i : i + batch_size] for i in range(0, len(prompts), batch_size)]
    samples = 1 if sampling.greedy else SAMPLES
    runs = [("autoregressive", None, 0)] + [
        (("speculative", gamma), gamma, j)
        for gamma in overhead_gammas(gamma_max)
        for j in range(samples if gamma == gamma_max else 1)
    ]
    calls = {name: len(batches) * sum(1 for other, _, _ in runs if other == name) for name, _, _ in runs}
    recorder = ProfileRecorder(gamma_max, max_new_tokens, calls, warmup, {}, batch_size)

    def job(name, gamma, sample, row):
        seed = row if gamma is None else SEED_OFFSET + samples * row + sample

        def run():
            randomness = seeded(seed, target.device)
            if gamma is None:
                generation = generate_autoregressive(
                    target,
                    batches[row],
                    max_new_tokens=max_new_tokens,
                    sampling=sampling,
                    randomness=randomness,
                    profile=True,
                )
            else:
                generation = generate_speculative(
                    target,
                    draft,
                    batches[row],
                    max_new_tokens=max_new_tokens,
                    config=SpeculativeConfig(gamma, sampling),
                    randomness=randomness,
                    profile=True,
                )
            recorder.add(name, generation.stats)

        return run

    jobs = {
        (name, row, sample): job(name, gamma, sample, row)
        for row in range(len(batches))
        for name, gamma, sample in runs
    }
    jobs[("verify widths", 0, 0)] = verify_widths_job(
        target, batches[0], sampling, range(1, widths + 1), recorder.add_widths
    )
    return jobs, recorder


def profile_checks(profile: CostProfile, spread: dict | None, speedups: dict | None = None) -> CostChecks:
    """The checks of a measured profile before anything forecasts from it (``spectheory.cost_checks``): its costs,
    their spread, its tokens per iteration and ``speedups`` ({gamma: forecast}; default its own speedup at every gamma
    it measured) under their ceiling."""
    if speedups is None:
        speedups = {g: profile.speedup(g) for g in range(1, profile.gamma_max + 1)}
    return check_costs(
        profile.t_step,
        profile.t_verify,
        spread=spread,
        tokens={g: profile.tokens_per_iteration(g) for g in speedups} or None,
        speedups=speedups or None,
    )


def measure_profile(
    pair: Pair, prompts: torch.Tensor, sampling: Sampling, plan: ProfilePlan, *, progress=None
) -> tuple[CostProfile, dict]:
    """The cost profile on its own (``spectheory profile``): (profile, spread over repeats); ``plan.call_steps`` 0
    leaves out c (Theorem 3.8's cost ratio, from that many one-token calls of each model)."""
    target, draft, repeats, warmup = pair.target, pair.draft, plan.repeats, plan.warmup
    prompts = prompts.to(target.device)
    c = (
        call_seconds(draft, prompts[0], steps=plan.call_steps, repeats=repeats, warmup=warmup)
        / call_seconds(target, prompts[0], steps=plan.call_steps, repeats=repeats, warmup=warmup)
        if plan.call_steps
        else None
    )
    jobs, recorder = profile_jobs(pair, prompts, sampling, plan)
    time_interleaved(
        jobs, repeats=repeats, warmup=warmup, synchronize=lambda: synchronize(target.device), progress=progress
    )
    return recorder.profile(c), recorder.spread()
