"""A serving engine's goodput under concurrency, forecast and then measured (docs/engines-load.md;
docs/theory-goodput.md §16, "Engines").

The bench: a fixed count of requests (Spec-Bench questions, greedy, ``max_new_tokens`` each) kept in flight at each
concurrency on the plain server and on the speculating one, alternated (plain first in even repeats, speculative first
in odd ones), after one untimed run of each at the largest concurrency; goodput is output tokens per second over all
requests, its speedup the speculative server's over the plain one's in the same repeat.

The forecast, made first from other questions only, each paired with a bench request of its category
(docs/theory-goodput.md §16, "Engines"; ``spectheory.goodput.fit_server_costs``): after an untimed run of each server at
the largest concurrency (warmed, and an engine that remembers its answers has seen the questions, as the bench's warm-up
lets it see its own), the plain server's runs of the other questions at each concurrency (a prefill's cost per token
from their seconds to the first token at concurrency 1, one at a time; the plain step at each concurrency from the
rest), and the speculating server's beside each (a round's own seconds at each concurrency, from their residuals; the
rounds each question took at the smallest, and the tokens drafted a round). The bench's requests (their prompts'
lengths, their partners' rounds) are then scheduled as the server batches them
(``spectheory.goodput.batched_iterations``: the same count, the same concurrency) and each iteration priced: the costs
carry the other questions' own runs at every concurrency, and what differs is the rounds, the prompts' lengths and the
iterations with fewer rows than slots."""

from __future__ import annotations

import statistics
import time
from dataclasses import astuple
from functools import reduce

import numpy as np

from decoders.engines.base import add_counters, capability, recorded
from decoders.load_results import ConcurrencyRow, LoadBenchDocument, LoadForecast, SpeculativeRun, crossover
from plumbing.timing import host
from plumbing.validation import as_int
from spectheory.costs import schedule_settings
from spectheory.goodput import fit_server_costs, fixed_count_interval, fixed_count_speedups

__all__ = ["load_bench", "load_lines", "check_loadable", "INTERVAL_SEED"]

INTERVAL_SEED = 0  # the forecast interval's draws of question sets


def check_loadable(engine) -> None:
    """A one-line error where ``engine`` cannot be benched under load (it lacks ``load_run``)."""
    if capability(engine, "load_run") is None:
        raise ValueError(f"engine {engine.name} cannot be benched under load: it lacks load_run (docs/engines.md §2)")


def _speculative(run) -> SpeculativeRun:
    """A speculative ``LoadRun`` as the cost fit reads it."""
    rounds = tuple(request.rounds for request in run.requests)
    drafted = run.counters.get("num_draft_tokens", 0) / sum(rounds) if sum(rounds) else 0.0
    return SpeculativeRun(concurrency=run.concurrency, rounds=rounds, drafted_per_round=drafted, seconds=run.seconds)


def _forecast(engine, prompts: list, bench_tokens: list, gamma: int, tokens: int, concurrency: list, progress):
    """The forecast's measurements on ``prompts`` (other questions than the bench's, paired with them in order) and
    its speedups for the bench's requests, prompts of ``bench_tokens`` (module docstring): a ``LoadForecast``."""
    started = time.perf_counter()
    load = engine.load_run
    for speculate in (0, gamma):  # untimed: each server warmed, and an engine that remembers has seen the questions
        load(prompts, tokens, speculate, max(concurrency))
    plain_seconds, speculative, first = {}, [], ()
    for c in concurrency:  # each speculative run beside the plain one at its concurrency
        run = load(prompts, tokens, 0, c)
        plain_seconds[c] = run.seconds
        first = first or tuple(request.first_seconds for request in run.requests)  # concurrency 1: a prefill alone
        speculative.append(_speculative(load(prompts, tokens, gamma, c)))
        progress(1)
    lengths = tuple(len(p) for p in prompts)
    costs = fit_server_costs(lengths, first, tokens, plain_seconds, [astuple(run) for run in speculative])
    rounds, drafted = speculative[0].rounds, speculative[0].drafted_per_round
    speedups, plain = fixed_count_speedups(costs, rounds, drafted, bench_tokens, tokens, concurrency)
    intervals = fixed_count_interval(
        costs, rounds, drafted, bench_tokens, tokens, concurrency, np.random.default_rng(INTERVAL_SEED)
    )
    return LoadForecast(
        lengths,
        first,
        plain_seconds,
        tuple(speculative),
        costs,
        speedups,
        plain,
        time.perf_counter() - started,
        intervals,
    )


def _tpot(runs: list) -> tuple:
    """(median, p90) of every request's time per output token over ``runs``."""
    values = sorted(request.time_per_output_token for run in runs for request in run.requests)
    return statistics.median(values), statistics.quantiles(values, n=10, method="inclusive")[-1]


def _row(concurrency: int, plain: list, speculative: list, forecast: LoadForecast | None, workload: tuple):
    """One concurrency's row (``ConcurrencyRow``) from its runs; ``workload``: (prompt lengths, tokens a request)."""
    ratios = [s.goodput / p.goodput for p, s in zip(plain, speculative)]
    own = _speculative(speculative[0])
    counters = reduce(add_counters, (run.counters for run in speculative), {})
    drafted, accepted = counters.get("num_draft_tokens", 0), counters.get("num_accepted_tokens", 0)
    positions = counters.get("accepted_per_position")
    rounds = sum(request.rounds for run in speculative for request in run.requests)
    iterations = [run.iterations for run in plain], [run.iterations for run in speculative]
    return ConcurrencyRow(
        concurrency=concurrency,
        plain_goodput=tuple(run.goodput for run in plain),
        speculative_goodput=tuple(run.goodput for run in speculative),
        speedup=statistics.median(ratios),
        speedup_spread=(min(ratios), statistics.median(ratios), max(ratios)),
        plain_tpot=_tpot(plain),
        speculative_tpot=_tpot(speculative),
        acceptance_rate=accepted / drafted if drafted else None,
        acceptance_per_position=(
            tuple(a / counters["num_drafts"] for a in positions) if positions and counters.get("num_drafts") else None
        ),
        tokens_per_round=(sum(r.tokens - 1 for run in speculative for r in run.requests)) / rounds if rounds else 1.0,
        plain_iterations=None if None in iterations[0] else int(statistics.median(iterations[0])),
        speculative_iterations=None if None in iterations[1] else int(statistics.median(iterations[1])),
        rounds=own.rounds,
        model_speedup=None
        if forecast is None
        else fixed_count_speedups(forecast.costs, own.rounds, own.drafted_per_round, *workload, [concurrency])[0][
            concurrency
        ],
        forecast_speedup=None if forecast is None else forecast.speedups[concurrency],
        forecast_interval=None if forecast is None else tuple(forecast.intervals[concurrency]),
    )


def load_bench(
    engine,
    prompts: list,
    *,
    forecast_prompts: list | None,
    concurrency: list,
    gamma: int,
    max_new_tokens: int,
    repeats: int,
    progress=None,
) -> LoadBenchDocument:
    """The load bench of ``engine`` on ``prompts`` (lists of ids) at each of ``concurrency`` at draft length ``gamma``,
    with the forecast from ``forecast_prompts`` first (module docstring)."""
    check_loadable(engine)
    concurrency = sorted({as_int("concurrency", c, low=1, high=256) for c in concurrency})
    gamma = as_int("gamma", gamma, low=1, high=32)
    repeats, max_new_tokens = (
        as_int("repeats", repeats, low=1, high=100),
        as_int("max_new_tokens", max_new_tokens, low=2, high=1024),
    )
    if forecast_prompts and set(map(tuple, forecast_prompts)) & set(map(tuple, prompts)):
        raise ValueError("the forecast's prompts share a prompt with the bench's: a forecast must not see them")
    step = progress or (lambda _: None)
    started = time.perf_counter()
    if forecast_prompts and (len(forecast_prompts) != len(prompts) or min(concurrency) != 1):
        raise ValueError(
            "the forecast needs as many other questions as the bench's requests and concurrency 1 among "
            f"--concurrency (a prefill's cost is timed one request at a time), got {len(forecast_prompts)} for "
            f"{len(prompts)} and {min(concurrency)}"
        )
    lengths = [len(p) for p in prompts]
    ahead = (
        _forecast(engine, forecast_prompts, lengths, gamma, max_new_tokens, concurrency, step)
        if forecast_prompts
        else None
    )
    for speculate in (0, gamma):  # the warm-up: each server once at the largest concurrency, untimed
        engine.load_run(prompts, max_new_tokens, speculate, max(concurrency))
    runs: dict = {(c, s): [] for c in concurrency for s in (0, gamma)}
    for repeat in range(repeats):
        for c in concurrency:
            for speculate in (0, gamma) if repeat % 2 == 0 else (gamma, 0):
                runs[c, speculate].append(engine.load_run(prompts, max_new_tokens, speculate, c))
            step(1)
    rows = tuple(_row(c, runs[c, 0], runs[c, gamma], ahead, (lengths, max_new_tokens)) for c in concurrency)
    settings, version = recorded(engine)
    return LoadBenchDocument(
        engine=engine.name,
        model=engine.model_path.name,
        engine_settings=settings,
        engine_version=version,
        gamma=gamma,
        requests=len(prompts),
        prompt_tokens=tuple(len(p) for p in prompts),
        max_new_tokens=max_new_tokens,
        repeats=repeats,
        warmup=1,
        rows=rows,
        forecast=ahead,
        schedule=_schedule(gamma, ahead.speedups if ahead else {r.concurrency: r.speedup for r in rows}),
        environment=host(),
        seconds=time.perf_counter() - started,
        dtype=settings.get("dtype", "GGUF quantized (llama.cpp kernels)"),
    )


def _schedule(gamma: int, speedups: dict) -> dict:
    """The draft length per concurrency in the engines' words (``spectheory.costs.schedule_settings``): ``gamma``
    where ``speedups`` (the forecast's) pay, 0 from its crossover on."""
    stop = crossover(speedups)
    rows = [
        {"batch_size": c, "gamma": 0 if stop is not None and c >= stop else gamma, "gamma_max": gamma}
        for c in sorted(speedups)
    ]
    return schedule_settings(rows)


def load_lines(document: LoadBenchDocument) -> list:
    """The load bench as printed lines: per concurrency the forecast (first) and the measurement, then the answer."""
    d, ahead = document, document.forecast
    lines = [
        f"{d.engine} ({d.model}) under load: {d.requests} Spec-Bench questions at each concurrency, "
        f"{d.max_new_tokens} tokens each, greedy, gamma {d.gamma}, {d.repeats} repeats (plain and speculative "
        f"alternated); {d.environment['host']['cpu']}",
    ]
    if ahead:
        lines.append(
            f"forecast from {len(ahead.prompt_tokens)} other questions ({ahead.seconds:.0f} s): a token beyond one a "
            f"row {ahead.costs.token_seconds * 1e3:.3f} ms; per concurrency, plain step and a round's own seconds "
            + ", ".join(
                f"{c}: {s * 1e3:.1f} + {ahead.costs.round_step.get(c, float('nan')) * 1e3:.1f}"
                for c, s in sorted(ahead.costs.plain_step.items())
            )
            + f" ms; {ahead.drafted_per_round:.2f} tokens drafted a round"
        )
    lines.append(
        f"{'conc':>4} {'forecast':>9} {'(95%)':>13} {'measured':>9} {'(min-max)':>13} {'f/m':>6} {'model':>7} "
        f"{'plain tok/s':>11} {'spec tok/s':>10} {'TPOT plain med/p90 ms':>21} {'TPOT spec med/p90 ms':>20} "
        f"{'accept':>6}"
    )
    for row in d.rows:
        low, _, high = row.speedup_spread
        forecast = "" if row.forecast_speedup is None else f"{row.forecast_speedup:.3f}x"
        interval = "" if row.forecast_interval is None else "({:.3f}-{:.3f})".format(*row.forecast_interval)
        ratio = "" if row.forecast_over_measured is None else f"{row.forecast_over_measured:.3f}"
        model = "" if row.model_speedup is None else f"{row.model_speedup:.3f}x"
        accept = "" if row.acceptance_rate is None else f"{row.acceptance_rate:.3f}"
        lines.append(
            f"{row.concurrency:>4} {forecast:>9} {interval:>13} {row.speedup:>8.3f}x {f'({low:.3f}-{high:.3f})':>13} "
            f"{ratio:>6} {model:>7} "
            f"{statistics.median(row.plain_goodput):>11.1f} {statistics.median(row.speculative_goodput):>10.1f} "
            f"{row.plain_tpot[0] * 1e3:>10.1f}/{row.plain_tpot[1] * 1e3:<10.1f} "
            f"{row.speculative_tpot[0] * 1e3:>9.1f}/{row.speculative_tpot[1] * 1e3:<10.1f} {accept:>6}"
        )
    if ahead:
        lines.append(
            "model: the forecast's costs at the bench's own rounds (a diagnostic, not a forecast); "
            f"tokens a round, the forecast's questions {_per_round(ahead.rounds, d.max_new_tokens):.3f}, the bench's "
            f"{_per_round(d.rows[0].rounds, d.max_new_tokens):.3f}"
        )
    lines += _answer_lines(document)
    return lines


def _per_round(rounds: tuple, tokens: int) -> float:
    """Tokens a request emitted a round after its first, over requests of ``tokens`` each."""
    return len(rounds) * (tokens - 1) / sum(rounds)


def _answer_lines(document: LoadBenchDocument) -> list:
    """The answer from the forecast (the measurement where none was made), the measured crossover beside."""
    d = document
    stop = d.forecast_crossover if d.forecast else d.measured_crossover
    paying = [row.concurrency for row in d.rows if stop is None or row.concurrency < stop]
    source = "the forecast" if d.forecast else "the measurement"
    if not paying:
        answer = f"do not speculate at any concurrency measured ({source})"
    elif stop is None:
        answer = f"use {d.engine} at gamma {d.gamma} up to concurrency {max(paying)} at least ({source})"
    else:
        answer = (
            f"use {d.engine} at gamma {d.gamma} up to concurrency {max(paying)}; from {stop} on, do not "
            f"speculate ({source})"
        )
    crossings = (
        f"crossover: forecast {d.forecast_crossover}, measured {d.measured_crossover} (None: it pays at the largest)"
    )
    ranges = d.schedule["num_speculative_tokens_per_batch_size"]
    return [
        f"recommended: {answer}",
        crossings,
        f"vLLM num_speculative_tokens_per_batch_size (min, max, k): {ranges}; llama-server has no draft length "
        f"per batch size: --spec-draft-n-max {d.gamma} below the crossover, no speculation from it",
    ]
