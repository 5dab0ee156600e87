"""The forecast of a gamma sweep, made before it and judged on it (docs/measuring.md, "Forecasts"): per temperature a
cost profile (docs/theory.md §10) timed on a few prompts the sweep does not decode and the acceptance along more of
them, its speedup at each gamma with a standard error over those prompts, and the gamma it recommends
(``forecast_sweep``); then, on the sweep's rows, forecast over measured at every gamma, the
recommended gamma's measured speedup, its loss against the best measured gamma and whether the sweep's 95%
intervals tell the two apart (``judge_forecast``). ``spectheory bench --forecast-prompts N`` and
``spectheory report`` print both."""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from decoders.bench.bench import BenchSettings
from decoders.bench.documents import BenchReport
from decoders.bench.forecast.document import Judgement, SweepForecast, TemperatureForecast
from decoders.bench.inputs import Pair
from decoders.bench.profile import (
    SAMPLES,
    SEED_OFFSET,
    ProfilePlan,
    acceptance_fields,
    counts_by_row,
    measure_profile,
    profile_checks,
)
from decoders.bench.rows import ForecastRow, JudgedRow
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.timing import units_needed
from plumbing.validation import as_int
from spectheory.cost_checks import CostChecks, sweep_check, tokens_check
from spectheory.costs import CostProfile
from spectheory.intervals import covers, forecast_interval, jackknife_error, leave_one_out
from spectheory.optimum import best_choice, best_gamma_row

__all__ = [
    "FORECAST_LOSS",
    "FORECAST_TOLERANCE",
    "FORECAST_COST_PROMPTS",
    "forecast_sweep",
    "judge_forecast",
    "FORECAST_REPEATS",
    "acceptance_runs",
    "with_acceptance",
    "forecast_speedups",
    "prompts_needed",
    "with_sweep_checks",
    "checked_against_sweep",
]

FORECAST_LOSS = 0.05  # a forecast's gamma is good when it loses at most this against the best measured gamma
FORECAST_TOLERANCE = 0.10  # the forecast's aim: within +-10% of the measured speedup (issue 55)
FORECAST_COST_PROMPTS = 1  # prompts the forecast's cost profile times (a call's cost is not the text's)
FORECAST_REPEATS = 3  # its timed repeats: the median of 3 sets one slow repeat aside, of 2 it averages it in


def acceptance_runs(
    target, draft, prompts: torch.Tensor, sampling: Sampling, *, gamma_max: int, max_new_tokens: int
) -> list[dict]:
    """Per prompt of ``prompts`` ``[P, L]``, its speculative runs at ``gamma_max`` (untimed; ``SAMPLES`` of them
    when sampling, on the profile's seeds): the accepted count and verified width of every iteration, and each
    run's counts in order (its text)."""
    samples, runs = 1 if sampling.greedy else SAMPLES, []
    prompts = prompts.to(target.device)
    for row in range(len(prompts)):
        texts, widths = [], []
        for sample in range(samples):
            stats = generate_speculative(
                target,
                draft,
                prompts[row : row + 1],
                max_new_tokens=max_new_tokens,
                config=SpeculativeConfig(gamma_max, sampling),
                randomness=seeded(SEED_OFFSET + samples * row + sample, target.device),
            ).stats
            texts.append(counts_by_row(stats.accepted_per_iteration, 1, max_new_tokens)[0])
            widths += [max(proposed) + 1 for proposed in stats.proposed_per_iteration]
        runs.append({"texts": texts, "widths": widths})
    return runs


def with_acceptance(profile: CostProfile, runs: list, tokens: int) -> CostProfile:
    """``profile`` with its acceptance replaced by that of ``runs`` (``acceptance_runs``'s), pooled."""
    texts = [text for run in runs for text in run["texts"]]
    fields = acceptance_fields(
        [n for text in texts for n in text],
        [k for run in runs for k in run["widths"]],
        texts,
        profile.gamma_max,
        tokens,
    )
    return replace(profile, **fields)


def forecast_speedups(profile: CostProfile, runs: list, gammas, tokens: int) -> list[ForecastRow]:
    """At each gamma the speedup of ``profile`` with the acceptance of every prompt's ``runs``, its jackknife
    standard error over the prompts (None for one prompt): how well the text decoded pins the forecast, and its
    stated 95% interval (``spectheory.intervals.forecast_interval``: the prompts and the run error)."""
    pooled = with_acceptance(profile, runs, tokens)
    left_out = [with_acceptance(profile, rest, tokens) for rest in leave_one_out(runs)]
    rows = []
    for gamma in gammas:
        speedup = pooled.speedup(gamma, tokens=tokens)
        error = jackknife_error([one.speedup(gamma, tokens=tokens) for one in left_out])
        rows.append(
            ForecastRow(
                gamma=gamma,
                speedup=speedup,
                standard_error=error,
                interval=forecast_interval(speedup, error, len(runs)),
            )
        )
    return rows


def prompts_needed(speedups: list, prompts: int, tolerance: float = FORECAST_TOLERANCE) -> int | None:
    """The prompts a forecast needs for a 95% interval of +-``tolerance`` at every gamma, scaling the jackknife
    standard errors of ``forecast_speedups`` (from ``prompts`` prompts) as 1 / sqrt(prompts)."""
    ratios = [row.standard_error / row.speedup for row in speedups if row.standard_error is not None]
    return units_needed(prompts, 1.96 * max(ratios), tolerance) if ratios else None


def forecast_sweep(
    pair: Pair,
    prompts: torch.Tensor,
    settings: BenchSettings,
    *,
    repeats: int = FORECAST_REPEATS,
    cost_prompts: int = FORECAST_COST_PROMPTS,
    progress=None,
) -> SweepForecast:
    """Per temperature of ``settings``: a cost profile (``decoders.bench.profile.measure_profile``) on the first
    ``cost_prompts`` of ``prompts`` ``[P, L]`` over ``repeats`` timed repeats after one warm-up, and the
    acceptance along all P (``acceptance_runs``); its speedup at each of ``settings.gammas`` with a standard
    error over the prompts, the prompts that would pin it to +-10%, and the gamma it recommends (ties to the
    smaller). Nothing the sweep measures goes into it."""
    target, draft = pair.target, pair.draft
    start, s = time.perf_counter(), settings
    as_int("cost_prompts", cost_prompts, low=1, high=len(prompts))
    temperatures = []
    for temperature in s.temperatures:
        plan = ProfilePlan(max(s.gammas), s.max_new_tokens, warmup=1, repeats=repeats, call_steps=0)  # no c
        profile, spread = measure_profile(pair, prompts[:cost_prompts], s.at(temperature), plan, progress=progress)
        runs = acceptance_runs(
            target, draft, prompts, s.at(temperature), gamma_max=max(s.gammas), max_new_tokens=s.max_new_tokens
        )
        speedups = forecast_speedups(profile, runs, s.gammas, s.max_new_tokens)
        best = best_choice(speedups, lambda row: row.speedup, lambda row: row.gamma)
        pooled = with_acceptance(profile, runs, s.max_new_tokens)
        temperatures.append(
            TemperatureForecast(
                temperature=temperature,
                gamma=best.gamma,
                speedup=best.speedup,
                speedups=tuple(speedups),
                prompts_needed=prompts_needed(speedups, len(prompts)),
                profile=pooled,
                spread=spread,
                checks=profile_checks(pooled, spread, {row.gamma: row.speedup for row in speedups}),
            )
        )
    return SweepForecast(
        prompts=len(prompts),
        prompt_ids=prompts.tolist(),
        cost_prompts=cost_prompts,
        repeats=repeats,
        warmup=1,
        temperatures=tuple(temperatures),
        seconds=time.perf_counter() - start,
    )


def with_sweep_checks(forecast: TemperatureForecast, rows: list, sweep_t_step: float | None) -> TemperatureForecast:
    """One temperature's forecast with the checks the sweep beside it allows added to its own: its t_step against the
    sweep profile's ``sweep_t_step`` (the same machine state) and the sweep rows' tokens per iteration (``rows``:
    ``bench_row``'s). They decide whether the forecast is shown; they do not change it."""
    added = [tokens_check({row.gamma: row.tokens_per_iteration for row in rows})]
    if sweep_t_step:
        added.append(sweep_check(forecast.profile.t_step, sweep_t_step))
    return replace(forecast, checks=forecast.checks + CostChecks(tuple(added)))


def checked_against_sweep(forecast: SweepForecast, bench: BenchReport) -> SweepForecast:
    """``forecast_sweep``'s forecast with every temperature's checks extended by those of the sweep ``bench`` that
    checks it (``with_sweep_checks``)."""
    return replace(
        forecast,
        temperatures=tuple(
            with_sweep_checks(
                entry,
                bench.rows_at(entry.temperature),
                bench.profiles.get(entry.temperature, {}).get("t_step"),
            )
            for entry in forecast.temperatures
        ),
    )


def judge_forecast(forecast: TemperatureForecast, rows: list) -> Judgement:
    """One temperature's forecast against the sweep's ``rows`` at that temperature (``decoders.bench.bench.bench_row``'s
    ``BenchRow``s, with ``speedup_interval``): forecast / measured at every gamma, whether the forecast lies in the
    measured 95% interval and whether the measurement lies in the forecast's interval combined with its own
    (``covered``, ``spectheory.intervals.covers``); the forecast's gamma measured, its loss against the best measured
    gamma, and ``loss_resolved``: whether the intervals of the two are apart (where they overlap, the sweep cannot tell
    the loss from noise)."""
    measured = {row.gamma: row for row in rows}
    best, chosen = best_gamma_row(rows), measured[forecast.gamma]  # the forecast chooses among the swept gammas
    judged = []
    for f in forecast.speedups:
        row = measured[f.gamma]
        judged.append(
            JudgedRow(
                gamma=f.gamma,
                forecast=f.speedup,
                measured=row.speedup,
                forecast_standard_error=f.standard_error,
                forecast_over_measured=f.speedup / row.speedup,
                measured_interval=row.speedup_interval,
                inside_interval=_inside(f.speedup, row.speedup_interval),
                covered=covers(f.speedup, f.interval, row.speedup, row.speedup_interval),
            )
        )
    loss = 1 - chosen.speedup / best.speedup
    return Judgement(
        temperature=forecast.temperature,
        checks=forecast.checks,
        withheld=forecast.withheld,
        forecast_gamma=forecast.gamma,
        forecast_speedup=forecast.speedup,
        forecast_interval=forecast.at(forecast.gamma).interval,
        measured_speedup_at_forecast_gamma=chosen.speedup,
        forecast_loss=loss,
        forecast_within_5_percent=loss <= FORECAST_LOSS,
        forecast_by_gamma=tuple(judged),
        best_measured_gamma=best.gamma,
        best_measured_speedup=best.speedup,
        loss_resolved=chosen.speedup_interval[1] < best.speedup_interval[0],
    )


def _inside(value: float, interval: list) -> bool:
    return interval[0] <= value <= interval[1]
