"""A serving engine's speed with and without its speculation, measured and predicted (docs/engines.md, "Bench").

Decoding of the same prompts, plainly and at each gamma, greedy or sampled at one temperature (prompt i seeded i on both
paths), timed interleaved over repeats (medians, min-max spread). The speedup is plain decode seconds over speculative
decode seconds for the same tokens (prefill apart: both paths prefill alike, and a prompt's prefill is reported beside).
Any engine with the capabilities ``tokenize``, ``model_path``, ``generate_ids`` and ``call_costs``
(``decoders.engines.base.CAPABILITIES``) is benched: llama.cpp in-process (prompt lookup) and llama-server (a draft
model or the n-gram drafters).

The prediction is the cost model of docs/theory.md §10 with the engine's own call costs, measured apart from the runs it
predicts (``call_costs``): t_verify(k), one call of k tokens; t_sample, paid once per emitted token; t_round, a drafting
cost paid once per round, whether it drafted or not (prompt lookup; vLLM's proposer, rejection sampler and bookkeeping);
t_draft, paid per drafted token (a draft model's step); where the engine has it, t_draft_batch(k), the draft model's own
evaluation of each round's verify batch (llama-server feeds the draft every batch the target evaluates; vLLM's draft
model evaluates it in the pass that drafts the first token, ``first_draft_in_batch`` = 1, so a round of m drafts makes m
- 1 steps). The costs are measured once per repeat, beside that repeat's runs, and each is the median over repeats: a
machine whose speed drifts by 15% over minutes moves the costs with the runs. From the speculative runs it takes only
what a cost model needs of the text: the tokens per round (accepted + 1) and the proposal lengths m (their distribution
where the engine counts it, else their mean). A round then costs t_round + (E[m] - P(drafted) first_draft_in_batch)
t_draft + E[t_verify(m + 1)] + E[tokens] t_sample (+ E[t_draft_batch(m + 1)]). A plain step is modelled by the same
costs, t_verify(1) + t_sample, and the predicted speedup is E[tokens] times that over a round's cost
(``spectheory.costs.forecast_speedup``, the verify calls priced by ``width_priced``): no timing of the runs enters the
prediction. The runs' own plain step (t_step) is reported beside, with the model's plain step over it. Each measured
speedup has a 95% bootstrap interval over repeats and prompts (``plumbing.timing.speedup_interval``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from functools import reduce

import numpy as np

from decoders.engine_results import (
    EngineBenchDocument,
    EngineBenchRow,
    EngineForecast,
    PeerRate,
    PlainRuns,
    ServerBench,
)
from decoders.engines.base import EngineSampling, add_counters, capability, recorded
from plumbing.timing import host, speedup_interval, units_needed
from plumbing.validation import as_int, as_real
from spectheory.cost_checks import CostChecks, check_costs, sweep_check
from spectheory.costs import forecast_speedup, width_priced
from spectheory.intervals import covers, forecast_interval, jackknife_error, leave_one_out
from spectheory.optimum import best_gamma_row, row_value
from spectheory.recommendation import from_sweep, recommendation_words

__all__ = [
    "engine_bench",
    "engine_bench_lines",
    "server_bench",
    "check_benchable",
    "predicted_round",
    "round_residual",
    "BENCH_CAPABILITIES",
]

ENGINE_GREEDY = EngineSampling(temperature=0.0)
SPEEDUP_TOLERANCE = 0.03  # a measured speedup is known when its 95% interval is within +-3% (issue 55)
#: What ``engine_bench`` needs of an engine (``decoders.engines.base.CAPABILITIES``).
BENCH_CAPABILITIES = ("tokenize", "model_path", "generate_ids", "call_costs")


def _runs(engine, prompts: list, tokens: int, gamma: int, sampling: EngineSampling) -> dict:
    """Decoding of every prompt at ``gamma`` (0: plain) with ``sampling`` (prompt i seeded i, in every repeat and on
    both paths): seconds to the first token and after it (in all and per prompt), the tokens, the counters summed
    and per prompt."""
    out = {"prefill": 0.0, "decode": 0.0, "decodes": [], "tokens": 0, "rows": [], "counters": {}, "by_prompt": []}
    for index, ids in enumerate(prompts):
        row, counters, to_first, after = engine.generate_ids(ids, tokens, sampling, speculate=gamma, seed=index)
        out["prefill"] += to_first
        out["decode"] += after
        out["decodes"].append(after)
        out["tokens"] += len(row)
        out["rows"].append(row)
        out["counters"] = add_counters(out["counters"], counters) if counters else out["counters"]
        out["by_prompt"].append(counters)
    return out


def _verify_seconds(counters: dict, t_verify: list, rounds: int) -> float:
    """E[t_verify(m + 1)] over the rounds (``spectheory.costs.width_priced``): by the counted proposal lengths where
    the engine counts them, else at the mean length (priced between its neighbouring widths)."""
    if "proposal_length_counts" in counters:
        counts = counters["proposal_length_counts"]
        return width_priced(t_verify, {m + 1: count for m, count in enumerate(counts) if count}) * sum(counts) / rounds
    return width_priced(t_verify, {min(counters["num_draft_tokens"] / rounds + 1, len(t_verify)): 1.0})


def plain_step(costs: dict) -> float:
    """The cost model's plain decode step: one call of one token and one sample (module docstring)."""
    return costs["t_verify"][0] + costs["t_sample"]


def median_costs(measured: list) -> dict:
    """Each cost's median over ``measured`` (one ``call_costs`` dict per repeat; lists element by element)."""

    def median(values: list):
        return (
            [median(list(column)) for column in zip(*values)]
            if isinstance(values[0], list)
            else statistics.median(values)
        )

    return {key: median([costs[key] for costs in measured]) for key in measured[0]}


def _spread(values: list) -> list:
    return [min(values), statistics.median(values), max(values)]


def predicted_round(counters: dict, costs: dict) -> tuple:
    """(tokens per round, mean proposal length, predicted seconds per round, predicted speedup) from a path's
    ``counters`` and the engine's call ``costs`` (module docstring)."""
    rounds = counters["rounds"]
    per_iteration = 1 + counters["num_accepted_tokens"] / rounds
    lengths = counters["num_draft_tokens"] / rounds  # mean proposal length m, empty rounds included
    drafting = min(counters.get("num_drafts", rounds), rounds) / rounds  # the share of rounds that drafted
    verify = _verify_seconds(counters, costs["t_verify"], rounds)
    steps = lengths - drafting * costs.get("first_draft_in_batch", 0)  # the draft's steps of one token a round
    other = costs["t_round"] + steps * costs["t_draft"] + per_iteration * costs["t_sample"]
    if "t_draft_batch" in costs:  # the draft evaluates the verify batch too (llama-server)
        other += _verify_seconds(counters, costs["t_draft_batch"], rounds)
    return per_iteration, lengths, verify + other, forecast_speedup(per_iteration, plain_step(costs), verify, other)


def round_residual(runs: list) -> float:
    """t_round from drafting ``runs`` ((counters, decode seconds, the call costs timed beside it) of one continuation
    each): the median over them of the decode seconds per round less the model's round at those costs without
    t_round, at least 0 (a round costs at least its calls: a negative residual says the calls were priced high, not
    that a round saves time). Costs timed minutes away from the runs would put the machine's drift into it."""
    return max(
        statistics.median(
            decode / counters["rounds"] - predicted_round(counters, dict(costs, t_round=0.0))[2]
            for counters, decode, costs in runs
        ),
        0.0,
    )


def _row(
    gamma: int, plain: list, runs: list, costs: dict, forecast: dict | None = None, greedy: bool = True
) -> EngineBenchRow:
    """One gamma's measured and predicted speedup (module docstring), and the forecast's where there is one: the
    model at the costs and counters of ``forecast`` ({"costs", "counters", "by_prompt"}, measured on other
    prompts); whether the output equals plain decoding where it is ``greedy``."""
    ratios = [
        p["decode"] / (p["tokens"] - len(p["rows"])) / (r["decode"] / (r["tokens"] - len(r["rows"])))
        for p, r in zip(plain, runs)
    ]  # decode seconds per token after the first, plain over speculative
    counters = runs[0]["counters"]
    per_iteration, lengths, seconds, predicted = predicted_round(counters, costs)
    trials = sum(counters.get("reached_per_position", []))
    alpha = counters["num_accepted_tokens"] / trials if trials else None
    drafted = counters["num_draft_tokens"]
    interval = speedup_interval(
        [p["decodes"] for p in plain],
        [r["decodes"] for r in runs],
        *([len(row) - 1 for row in path[0]["rows"]] for path in (plain, runs)),
    )
    half_width = (interval[1] - interval[0]) / 2 / statistics.median(ratios)
    return EngineBenchRow(
        gamma=gamma,
        speedup=statistics.median(ratios),
        speedup_spread=_spread(ratios),
        speedup_interval=interval,
        prompts_for_3_percent=units_needed(len(plain[0]["rows"]), half_width, SPEEDUP_TOLERANCE),
        predicted_speedup=predicted,
        predicted_over_measured=predicted / statistics.median(ratios),
        **_forecast_fields(forecast, statistics.median(ratios), interval),
        tokens_per_iteration=per_iteration,
        mean_proposal_length=lengths,
        alpha=alpha,
        alpha_standard_error=None if alpha is None else float(np.sqrt(alpha * (1 - alpha) / trials)),
        acceptance_rate=counters["num_accepted_tokens"] / drafted if drafted else None,
        seconds_per_iteration_predicted=seconds,
        counters=counters,
        greedy_equal_to_plain=runs[0]["rows"] == plain[0]["rows"] if greedy else None,
        decode_seconds=[r["decode"] for r in runs],
        tokens_per_second=statistics.median((r["tokens"] - len(r["rows"])) / r["decode"] for r in runs),
    )


def _forecast_fields(forecast: dict | None, measured: float, interval: list) -> dict:
    """A row's forecast (``predicted_round`` at the forecast's costs and its prompts' counters summed) against its
    measured speedup; its stated interval carries the jackknife over the forecast's prompts (each left out of the
    sum in turn) beside the run error."""
    if forecast is None:
        return {}
    tokens, _, _, speedup = predicted_round(forecast["counters"], forecast["costs"])
    by_prompt = forecast.get("by_prompt") or []
    error = jackknife_error(
        [predicted_round(reduce(add_counters, rest, {}), forecast["costs"])[3] for rest in leave_one_out(by_prompt)]
    )
    stated = forecast_interval(speedup, error, len(by_prompt) if error is not None else None)
    return {
        "forecast_speedup": speedup,
        "forecast_standard_error": error,
        "forecast_over_measured": speedup / measured,
        "forecast_tokens_per_iteration": tokens,
        "forecast_inside_interval": interval[0] <= speedup <= interval[1],
        "forecast_interval": stated,
        "forecast_covered": covers(speedup, stated, measured, interval),
    }


def _forecast(
    engine, prompts: list, gammas: list, tokens: int, sampling: EngineSampling, passes: int
) -> EngineForecast:
    """The forecast's measurements on ``prompts`` that the bench does not time: each gamma's counters (summed and per
    prompt) from untimed runs of every prompt, counted on the last of ``passes`` (2 for an engine that remembers its
    earlier answers, as the bench sends its prompts once in the warm-up and again in every repeat), and the engine's
    call costs timed beside each gamma's runs, just before them (their median, as the bench's over its repeats). An
    engine whose t_round is a residual of runs (``round_cost_along_runs``) has it measured along these runs, every
    prompt at every gamma against the costs timed beside them (``round_residual``), not on the cost prompt's: the
    rounds the forecast prices are these (docs/findings/forecasts-real.md, suffix decoding's round cost)."""
    started = time.perf_counter()
    timed, runs = [], {}
    for gamma in gammas:
        timed.append(engine.call_costs(prompts[0], max(gammas) + 1))
        runs[gamma] = [_runs(engine, prompts, tokens, gamma, sampling) for _ in range(passes)][-1]
    costs = median_costs(timed)
    along = capability(engine, "round_cost_along_runs")
    if along and along():
        beside = [
            (counters, decode, cost)
            for cost, run in zip(timed, runs.values())
            for counters, decode in zip(run["by_prompt"], run["decodes"])
        ]
        costs = dict(costs, t_round=round_residual(beside), t_round_cost_prompt=costs["t_round"])
    return EngineForecast(
        prompts=len(prompts),
        prompt_tokens=[len(p) for p in prompts],
        passes=passes,
        cost_timings=len(timed),  # one beside each gamma's runs (files before 2026-12-07, 14:00: one in all)
        costs=costs,
        counters={gamma: run["counters"] for gamma, run in runs.items()},
        by_prompt={gamma: run["by_prompt"] for gamma, run in runs.items()},
        seconds=time.perf_counter() - started,
    )


def _forecast_checks(ahead: EngineForecast, rows: list, t_step: float) -> EngineForecast:
    """``ahead`` with the checks of its costs (``spectheory.cost_checks``): its verify calls' widths, tokens per
    round, every forecast under its ceiling, and its plain step against the plain runs' ``t_step`` (the sweep's, which
    decides whether the forecast is shown, never its value), and the line that withholds it ('' where they pass)."""
    step = plain_step(ahead.costs)
    checks = check_costs(
        step,
        ahead.costs["t_verify"],
        tokens={row.gamma: row.forecast_tokens_per_iteration for row in rows},
        speedups={row.gamma: row.forecast_speedup for row in rows},
    ) + CostChecks((sweep_check(step, t_step),))
    return replace(ahead, checks=checks, withheld=checks.line())


def check_benchable(engine) -> None:
    """A one-line error naming what ``engine`` lacks of ``BENCH_CAPABILITIES``."""
    missing = [name for name in BENCH_CAPABILITIES if capability(engine, name) is None]
    if missing:
        raise ValueError(
            f"engine {engine.name} cannot be benched here: it lacks {', '.join(missing)} "
            f"(docs/engines.md §2); for two servers by URL use --engine URL --against URL"
        )


def engine_bench(
    engine,
    prompts: list,
    *,
    gammas,
    max_new_tokens: int,
    repeats: int,
    warmup: int = 1,
    temperature: float = 0.0,
    forecast_prompts: list | None = None,
    peers: dict | None = None,
    progress=None,
) -> EngineBenchDocument:
    """The bench document of ``engine`` on ``prompts`` (lists of ids) at ``temperature`` (0: greedy; above, pure
    sampling, prompt i seeded i): plain and every gamma interleaved per repeat, the costs measured at the start of
    each repeat (module docstring). With ``forecast_prompts`` (other prompts, lists of ids), first the forecast: the
    costs and each gamma's counters measured on them (``_forecast``), the model's speedup from those alone beside
    every measured row. ``peers`` (name -> a call of (prompts, tokens) giving greedy tokens per second) are timed in
    each repeat too, interleaved with the engine's runs: other engines' plain decoding of the same prompts, for the
    record beside its own."""
    check_benchable(engine)
    sampling = EngineSampling(temperature=float(as_real("temperature", temperature, low=0.0, high=2.0)))
    gammas = [as_int("gammas", g, low=1, high=32) for g in gammas]
    repeats, max_new_tokens = (
        as_int("repeats", repeats, low=1, high=100),
        as_int("max_new_tokens", max_new_tokens, low=2, high=1024),
    )
    if forecast_prompts and set(map(tuple, forecast_prompts)) & set(map(tuple, prompts)):
        raise ValueError("the forecast's prompts share a prompt with the bench's: a forecast must not see them")
    remembers = capability(engine, "remembers_outputs")
    repeated = bool(remembers and remembers())  # its prompts answered before, in the warm-up and earlier repeats
    ahead = (
        _forecast(engine, forecast_prompts, gammas, max_new_tokens, sampling, 2 if repeated else 1)
        if forecast_prompts
        else None
    )
    swept = time.perf_counter()
    measured_costs, runs = [], {0: [], **{g: [] for g in gammas}}
    peer_rates: dict = {name: [] for name in peers or {}}
    for repeat in range(warmup + repeats):
        if repeat >= warmup:
            measured_costs.append(engine.call_costs(prompts[0], max(gammas) + 1))
        for name, rate in (peers or {}).items():
            value = rate(prompts, max_new_tokens)
            if repeat >= warmup:
                peer_rates[name].append(value)
        for gamma in runs:
            result = _runs(engine, prompts, max_new_tokens, gamma, sampling)
            if repeat >= warmup:
                runs[gamma].append(result)
            if progress:
                progress(1)
    plain, costs = runs.pop(0), median_costs(measured_costs)
    rows = [
        _row(
            gamma,
            plain,
            runs[gamma],
            costs,
            ahead and {"costs": ahead.costs, "counters": ahead.counters[gamma], "by_prompt": ahead.by_prompt[gamma]},
            greedy=sampling.temperature == 0,
        )
        for gamma in gammas
    ]
    t_step = statistics.median(p["decode"] / (p["tokens"] - len(p["rows"])) for p in plain)
    if ahead:
        ahead = _forecast_checks(ahead, rows, t_step)
    pick = (
        row_value(best_gamma_row([{"gamma": 0, "forecast_speedup": 1.0}, *rows], "forecast_speedup"), "gamma")
        if ahead and not ahead.withheld
        else None
    )
    recommended = from_sweep(rows, pick)  # docs/measuring.md, "The recommendation"
    settings, version = recorded(engine)
    return EngineBenchDocument(
        engine=engine.name,
        model=engine.model_path.name,
        threads=settings.get("threads"),
        engine_settings=settings,
        engine_version=version,
        temperature=sampling.temperature,
        batch_size=1,
        dtype=settings.get("dtype", "GGUF quantized (llama.cpp kernels)"),
        device="cpu",
        repeats=repeats,
        warmup=warmup,
        prompts=len(prompts),
        prompt_tokens=[len(p) for p in prompts],
        repeated_prompts=repeated,
        max_new_tokens=max_new_tokens,
        costs=dict(costs, t_step=t_step, t_plain=plain_step(costs)),
        plain_step_model_over_measured=plain_step(costs) / t_step,
        plain_step_model_spread=_spread([plain_step(c) for c in measured_costs]),
        plain=PlainRuns(
            tokens_per_second=1 / t_step,
            decode_seconds=[p["decode"] for p in plain],
            prefill_seconds=[p["prefill"] for p in plain],
        ),
        rows=tuple(rows),
        recommended_gamma=recommended.gamma,
        recommendation=recommended,
        forecast_gamma=pick,
        environment=host(),
        forecast=ahead,
        peers={
            name: PeerRate(tokens_per_second=statistics.median(rates), spread=_spread(rates))
            for name, rates in peer_rates.items()
        },
        sweep_seconds=time.perf_counter() - swept,
    )


def server_bench(
    speculating, plain, prompts: list, *, max_new_tokens: int, repeats: int, warmup: int = 1, progress=None
) -> ServerBench:
    """Two OpenAI-compatible servers of one model, one speculating and one not (a server's own setting), timed
    on greedy completions of ``prompts`` (texts) interleaved over repeats: seconds per generated token of
    each, end to end (prefill and HTTP included), and their ratio. Servers report no costs, so there is no
    prediction here; the in-process engine has one."""
    repeats = as_int("repeats", repeats, low=1, high=100)
    seconds: dict = {"plain": [], "speculating": []}
    rows: dict = {"plain": None, "speculating": None}
    for repeat in range(warmup + repeats):
        for name, server in (("plain", plain), ("speculating", speculating)):
            runs = [server.generate(prompt, 1, max_new_tokens, ENGINE_GREEDY) for prompt in prompts]
            tokens = sum(run.generated_tokens for run in runs)
            if repeat >= warmup:
                seconds[name].append(sum(run.seconds for run in runs) / tokens)
                rows[name] = [run.rows[0] for run in runs]
            if progress:
                progress(1)
    ratios = [p / s for p, s in zip(seconds["plain"], seconds["speculating"])]
    return ServerBench(
        engine=speculating.name,
        against=plain.name,
        temperature=0.0,
        batch_size=1,
        repeats=repeats,
        warmup=warmup,
        prompts=len(prompts),
        max_new_tokens=max_new_tokens,
        seconds_per_token=seconds,
        speedup=statistics.median(ratios),
        speedup_spread=_spread(ratios),
        greedy_equal=rows["plain"] == rows["speculating"],
        environment=host(),
    )


def engine_bench_lines(document: EngineBenchDocument) -> list:
    """The bench as printed lines: the engine's plain rate beside ours and its peers', its cost model's plain step,
    then per gamma the forecast and the measurement, and the recommendation."""
    d, plain, costs = document, document.plain, document.costs
    lines = [
        f"{d.engine} ({d.model}, {d.threads} threads, {d.cpu}): plain "
        f"{plain.tokens_per_second:.1f} tokens/s; our reference autoregressive decoder "
        f"{d.ours_tokens_per_second:.1f} tokens/s on the same model (the engine "
        f"{plain.tokens_per_second / d.ours_tokens_per_second:.2f}x faster per token)",
        f"cost model's plain step {costs['t_plain'] * 1e3:.2f} ms (t_verify(1) + t_sample, costs "
        f"measured beside each repeat), the plain runs' {costs['t_step'] * 1e3:.2f} ms: ratio "
        f"{d.plain_step_model_over_measured:.3f}",
    ]
    for name, peer in (d.peers or {}).items():
        low, _, high = peer.spread
        lines.append(
            f"{name}, plain, the same prompts in the same repeats: {peer.tokens_per_second:.1f} tokens/s "
            f"({low:.1f}-{high:.1f})"
        )
    if d.repeated_prompts:
        lines.append(
            f"{d.engine} drafts from its own earlier answers: the bench sends each prompt in the warm-up "
            f"and again in every repeat, so it measures prompts answered before (the forecast counts its prompts' "
            f"second pass), not fresh ones"
        )
    forecast = d.forecast
    withheld = forecast.withheld if forecast else None
    if withheld:
        lines.append(withheld)
    if forecast and "t_round_cost_prompt" in forecast.costs:
        lines.append(
            f"the forecast's rounds cost {forecast.costs['t_round'] * 1e3:.1f} ms beyond their calls, measured "
            f"along its own runs (its cost prompt's: {forecast.costs['t_round_cost_prompt'] * 1e3:.1f} ms)"
        )
    lines += [line for row in d.rows for line in _row_lines(row, withheld)]
    lines.append(
        "recommended: "
        + recommendation_words(d.recommendation.as_dict())
        + (
            f"; the forecast from {forecast.prompts} other prompt{'s' if forecast.prompts != 1 else ''} "
            f"({forecast.seconds:.1f} s; the bench {d.sweep_seconds:.1f} s) picked "
            + ("do not speculate" if d.forecast_gamma == 0 else f"gamma {d.forecast_gamma}")
            if forecast and not withheld
            else "; no forecast made"
        )
    )
    return lines


def _row_lines(row: EngineBenchRow, withheld: str | None) -> list:
    """One gamma's lines: its forecast (where made and shown), then its measurement and the model beside."""
    low, _, high = row.speedup_spread
    alpha = (
        f"alpha {row.alpha:.3f}"
        if row.alpha is not None
        else "acceptance rate " + ("n/a" if row.acceptance_rate is None else f"{row.acceptance_rate:.3f}")
    )
    bottom, top = row.speedup_interval
    lines = []
    if row.forecast_speedup is not None and not withheld:
        lines.append(
            f"gamma {row.gamma}: forecast {row.forecast_speedup:.3f}x from other prompts "
            + (
                "(95% interval {:.3f}-{:.3f}; ".format(*row.forecast_interval)
                if row.forecast_interval is not None
                else "("
            )
            + f"forecast / measured {row.forecast_over_measured:.3f}, "
            f"{'inside' if row.forecast_inside_interval else 'outside'} the measured 95% interval)"
        )
    lines.append(
        f"gamma {row.gamma}: measured {row.speedup:.3f}x ({low:.3f}-{high:.3f}; 95% interval "
        f"{bottom:.3f}-{top:.3f}, +-3% would take {row.prompts_for_3_percent} prompts); the model at "
        f"these runs' counters (a diagnostic) {row.predicted_speedup:.3f}x (ratio "
        f"{row.predicted_over_measured:.3f}); "
        f"{row.tokens_per_iteration:.2f} tokens per call, proposals {row.mean_proposal_length:.2f} "
        f"tokens, {alpha}; "
        + (
            "sampled (T > 0): no greedy comparison"
            if row.greedy_equal_to_plain is None
            else f"greedy equal to plain: {row.greedy_equal_to_plain}"
        )
    )
    return lines
