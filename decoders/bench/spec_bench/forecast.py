"""Spec-Bench's table forecast before it is timed, and judged on it (docs/findings/spec-bench.md, "The forecast").

* Costs, once for the table: the table's own timed jobs (``decoders.bench.spec_bench.suite.bench_category``) on one
  question that the table does not time (the first category's first other question), over ``FORECAST_REPEATS``
  after a warm-up: every draft's cost profile (docs/theory.md §10) and the dynamic tree's seconds per iteration.
* Per category, ``questions`` other questions of it (drawn at seed + ``FORECAST_SEED``, none of the timed ones):
  the target's prefill timed on them and on the cost question, interleaved, scales the profiles' prefill costs (a
  category's prompts are 40 to 1300 tokens long); each draft's acceptance along them (``acceptance_runs`` at its
  largest gamma, untimed) and the dynamic tree's tokens per call (its untimed runs on them).
* Per category: every draft's forecast speedup at each of its gammas with a jackknife standard error over the
  questions (``decoders.bench.forecast.sweep.forecast_speedups``), the dynamic tree's, and the setting it recommends:
  the largest forecast, "do not speculate" where none beats 1x (ties to fewer drafted tokens).

``judge_category`` puts the forecast beside the category's timed rows. Nothing the table times goes into it. Every
draft's cost profile is checked first (``decoders.bench.profile.profile_checks``; docs/forecasts.md, "Checks before a
forecast"): where one fails, the table keeps the forecast's numbers but withholds it (``withheld``, the one line).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

import torch

from decoders.bench.bench import BenchSettings
from decoders.bench.forecast.sweep import (
    FORECAST_LOSS,
    FORECAST_REPEATS,
    acceptance_runs,
    forecast_speedups,
    prompts_needed,
    with_acceptance,
)
from decoders.bench.profile import profile_checks
from decoders.bench.prompts import FORECAST_SEED
from decoders.bench.spec_bench.document import (
    CategoryForecast,
    CategoryJudgement,
    DraftForecast,
    ForecastChoice,
    JudgedSetting,
    SpecBenchCategory,
    TableForecast,
    TreeForecast,
)
from decoders.bench.spec_bench.questions import (
    QUESTIONS_PER_CATEGORY,
    PromptRows,
    select_questions,
    spec_bench_categories,
    spec_bench_prompts,
)
from decoders.bench.spec_bench.recommend import NO_SPECULATION, NOT_SPECULATING, Candidate, chain_setting, tree_setting
from decoders.bench.spec_bench.run import SpecBenchRun, TableModels
from decoders.models.protocol import synchronize
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.tree import TreeConfig, generate_tree
from plumbing.timing import time_interleaved
from spectheory.costs import CostProfile, forecast_speedup
from spectheory.intervals import covers, forecast_interval, jackknife_error, leave_one_out
from spectheory.optimum import best_choice

__all__ = [
    "SPEC_BENCH_FORECAST_QUESTIONS",
    "other_questions",
    "prefill_ratio",
    "forecast_category",
    "forecast_table",
    "judge_category",
]

#: Other questions per category whose acceptance the forecast measures (the timed table has 2 by default).
SPEC_BENCH_FORECAST_QUESTIONS = 3


def other_questions(tokenizer, category: str, count: int, seed: int, room: int, timed: int) -> list:
    """``count`` prompts of ``category`` cut to ``room`` (``spec_bench_prompts`` at seed + ``FORECAST_SEED``) that are
    none of the ``timed`` questions the table selects at ``seed``."""
    seen = {question["question_id"] for question in select_questions(category, timed, seed)}
    pool = spec_bench_prompts(
        tokenizer, category, min(count + len(seen), QUESTIONS_PER_CATEGORY), seed + FORECAST_SEED, room
    )
    kept = [prompt for prompt in pool if prompt.question_id not in seen][:count]
    if len(kept) < count:
        raise ValueError(f"forecast questions {count}: only {len(kept)} of {category}'s are not the table's")
    return kept


def _prefill_job(model, prompt: tuple):
    """One forward pass over ``prompt`` (ids) into an empty cache: the prefill."""
    ids = torch.tensor([prompt], dtype=torch.int64, device=model.device)

    @torch.no_grad()
    def run():
        model.forward(ids, model.new_state(1, len(prompt) + 1))

    return run


def prefill_ratio(target, questions: list, cost_question, repeats: int) -> float:
    """The target's mean prefill seconds over ``questions`` over its prefill of ``cost_question`` (medians over
    ``repeats``, timed interleaved)."""
    jobs = {"cost": _prefill_job(target, cost_question.tokens)}
    jobs |= {i: _prefill_job(target, question.tokens) for i, question in enumerate(questions)}
    timings = time_interleaved(jobs, repeats=repeats, warmup=1, synchronize=lambda: synchronize(target.device))
    return statistics.fmean(timings[i].median for i in range(len(questions))) / timings["cost"].median


def _scaled(profile: CostProfile, ratio: float) -> CostProfile:
    """``profile`` with its prefill costs scaled by ``ratio`` (the category's prompts against the cost question)."""
    return replace(profile, target_prefill=profile.target_prefill * ratio, draft_prefill=profile.draft_prefill * ratio)


@dataclass(frozen=True)
class _CostRun:
    """The table's timed jobs on the cost question (``category``: a ``SpecBenchCategory`` of one question), each
    draft's prompt room in it, the cost question cut to each room, and the prefill timing's repeats."""

    category: SpecBenchCategory
    rooms: dict  # draft name -> prompt room
    questions: dict  # prompt room -> SpecBenchPrompt
    repeats: int


def _tree_iteration_seconds(cost: SpecBenchCategory, tree_draft: str, tokens: int) -> float:
    """The dynamic tree's seconds per iteration on the cost question: its whole seconds (the baseline's over its
    measured speedup) less the prefills, over its iterations."""
    row, drafted = cost.dynamic.rows[0], cost.drafts[tree_draft]
    seconds = drafted.autoregressive_seconds / row.speedup
    prefills = drafted.profile.target_prefill + drafted.profile.draft_prefill
    return (seconds - prefills) / (tokens / row.mean_acceptance_length)


def _tree_forecast(
    target, dynamic: tuple, rows: PromptRows, profile: CostProfile, iteration_seconds: float, tokens: int
):
    """The dynamic tree's (draft name, model, tree) tokens per call from its untimed runs on ``rows`` and its forecast
    speedup, with a jackknife standard error over the rows."""
    name, model, tree = dynamic
    made = []  # per row: (tokens, target calls), tokens counted as the timed row counts them (1 + accepted)
    for row in range(len(rows)):
        stats = generate_tree(
            target,
            model,
            rows[row : row + 1],
            max_new_tokens=tokens,
            config=TreeConfig(tree, GREEDY, "target-only"),
            randomness=seeded(row, target.device),
        ).stats
        made.append((sum(n + 1 for iteration in stats.accepted_per_iteration for n in iteration), stats.iterations))

    def speedup(runs):
        per_call = sum(n for n, _ in runs) / sum(i for _, i in runs)
        return per_call, forecast_speedup(
            per_call,
            profile.t_step,
            0.0,
            iteration_seconds,  # the tree's iteration timed whole, its verify call included
            tokens=tokens,
            target_prefill=profile.target_prefill,
            draft_prefill=profile.draft_prefill,
        )

    per_call, value = speedup(made)
    error = jackknife_error([speedup(rest)[1] for rest in leave_one_out(made)])
    return TreeForecast(
        nodes=tree.budget,
        tokens_per_call=per_call,
        speedup=value,
        standard_error=error,
        interval=forecast_interval(value, error, len(made)),
        seconds_per_iteration=iteration_seconds,
        draft=name,
    )


def _recommended(drafts: dict, dynamic: TreeForecast | None) -> ForecastChoice:
    """The setting of the largest forecast among every draft's gammas, the dynamic tree and no speculation (1x)."""
    settings = [
        Candidate(
            setting=chain_setting(name, row.gamma),
            draft=name,
            gamma=row.gamma,
            drafted=row.gamma,
            predicted=row.speedup,
        )
        for name, forecast in drafts.items()
        for row in forecast.speedups
    ]
    if dynamic is not None:
        settings.append(
            Candidate(
                setting=tree_setting(dynamic.draft, dynamic.nodes),
                draft="dynamic",
                drafted=dynamic.nodes,
                predicted=dynamic.speedup,
            )
        )
    best = best_choice(settings + [NOT_SPECULATING], lambda c: c.predicted, lambda c: c.drafted)
    return ForecastChoice(setting=best.setting, draft=best.draft, gamma=best.gamma, speedup=best.predicted)


def forecast_category(models: TableModels, category: str, cost: _CostRun, s: BenchSettings, questions: int):
    """One category's ``CategoryForecast`` (module docstring) from ``questions`` other questions of it."""
    started, tokens, target = time.perf_counter(), s.max_new_tokens, models.target
    asked = {
        room: other_questions(models.tokenizer, category, questions, s.seed, room, s.prompts) for room in cost.questions
    }
    ratios = {room: prefill_ratio(target, asked[room], cost.questions[room], cost.repeats) for room in asked}
    profiles = {name: _scaled(cost.category.drafts[name].profile, ratios[cost.rooms[name]]) for name in models.drafts}
    drafts = {}
    for name, (model, gammas) in models.drafts.items():
        rows = PromptRows(list(q.tokens) for q in asked[cost.rooms[name]])
        runs = acceptance_runs(target, model, rows, GREEDY, gamma_max=max(gammas), max_new_tokens=tokens)
        speedups = forecast_speedups(profiles[name], runs, gammas, tokens)
        drafts[name] = DraftForecast(
            speedups=tuple(speedups),
            prompts_needed=prompts_needed(speedups, len(runs)),
            alpha=with_acceptance(profiles[name], runs, tokens).alpha,
        )
    tree = None
    if models.dynamic is not None:
        name = models.dynamic[0]
        rows = PromptRows(list(q.tokens) for q in asked[cost.rooms[name]])
        seconds = _tree_iteration_seconds(cost.category, name, tokens)
        tree = _tree_forecast(target, models.dynamic, rows, profiles[name], seconds, tokens)
    first = profiles[next(iter(models.drafts))]
    return CategoryForecast(
        questions={str(room): [q.as_dict() for q in asked[room]] for room in asked},
        prefill_ratio={str(room): ratio for room, ratio in ratios.items()},
        drafts=drafts,
        dynamic=tree,
        recommended=_recommended(drafts, tree),
        autoregressive_seconds=first.target_prefill + tokens * first.t_step,
        seconds=time.perf_counter() - started,
    )


def forecast_table(models: TableModels, run: SpecBenchRun, *, bench_category, progress=None) -> TableForecast:
    """The forecast of every category of ``run.task`` (``forecast_category``, from ``run.forecast_questions`` other
    questions each) from one cost run of the table's timer (``bench_category``:
    ``decoders.bench.spec_bench.suite``'s, passed in by it) on the cost question over ``FORECAST_REPEATS`` after a
    warm-up; ``progress(category)`` after each category."""
    s, categories = run.settings, spec_bench_categories(run.task)
    started, first = time.perf_counter(), categories[0]
    cost_settings = replace(s, prompts=1, repeats=FORECAST_REPEATS, warmup=1)

    def pick(room):
        return other_questions(models.tokenizer, first, 1, s.seed, room, s.prompts)

    measured = bench_category(models, first, cost_settings, questions=pick)
    rooms = {name: drafted.prompt_room for name, drafted in measured.drafts.items()}
    cost = _CostRun(measured, rooms, {room: pick(room)[0] for room in set(rooms.values())}, FORECAST_REPEATS)
    forecasts = {}
    for category in categories:
        forecasts[category] = forecast_category(models, category, cost, s, run.forecast_questions)
        if progress:
            progress(category)
    checks = {name: profile_checks(drafted.profile, drafted.spread) for name, drafted in measured.drafts.items()}
    failed = [(name, one) for name, one in checks.items() if not one.passed]
    return TableForecast(
        questions=run.forecast_questions,
        repeats=FORECAST_REPEATS,
        warmup=1,
        checks=checks,
        withheld=failed[0][1].line(f"Spec-Bench's forecast (the {failed[0][0]} draft's costs)") if failed else "",
        cost_question={str(room): q.as_dict() for room, q in cost.questions.items()},
        cost_seconds=time.perf_counter() - started - sum(c.seconds for c in forecasts.values()),
        profiles={name: drafted.profile_with_spread() for name, drafted in measured.drafts.items()},
        categories=forecasts,
        seconds=time.perf_counter() - started,
    )


def _judged_chain(name: str, forecast, row) -> JudgedSetting:
    """A draft's ``forecast`` (``ForecastRow``) at one gamma beside the table's ``row`` (``BenchRow``) there."""
    low, high = row.speedup_interval
    return JudgedSetting(
        setting=chain_setting(name, forecast.gamma),
        draft=name,
        gamma=forecast.gamma,
        drafted=forecast.gamma,
        forecast=forecast.speedup,
        forecast_standard_error=forecast.standard_error,
        measured=row.speedup,
        measured_interval=row.speedup_interval,
        forecast_over_measured=forecast.speedup / row.speedup,
        inside_interval=low <= forecast.speedup <= high,
        covered=covers(forecast.speedup, forecast.interval, row.speedup, row.speedup_interval),
    )


def judge_category(forecast: CategoryForecast, measured: SpecBenchCategory) -> CategoryJudgement:
    """One category's ``forecast`` beside its timed ``measured`` rows: forecast / measured at every draft and gamma and
    the dynamic tree, inside the measured 95% interval or not; the recommended setting's measured speedup, the best
    measured setting (no speculation at 1x included), the loss and whether the recommended lies within the best's
    interval."""
    rows = []
    for name, drafted in measured.drafts.items():
        timed = {row.gamma: row for row in drafted.rows}
        rows += [_judged_chain(name, f, timed[f.gamma]) for f in forecast.drafts[name].speedups]
    tree = forecast.dynamic
    if tree is not None and measured.dynamic is not None:
        timed = measured.dynamic.rows[0]
        rows.append(
            JudgedSetting(
                setting=tree_setting(tree.draft, tree.nodes),
                draft="dynamic",
                gamma=None,
                drafted=tree.nodes,
                forecast=tree.speedup,
                forecast_standard_error=tree.standard_error,
                measured=timed.speedup,
                measured_interval=None,
                forecast_over_measured=tree.speedup / timed.speedup,
                inside_interval=None,
            )
        )
    by_setting = {row.setting: row for row in rows}
    chosen = forecast.recommended.setting
    measured_there = 1.0 if chosen == NO_SPECULATION else by_setting[chosen].measured
    best = best_choice(rows + [NOT_SPECULATING], lambda row: row.measured, lambda row: row.drafted)
    loss = 1 - measured_there / best.measured
    interval = best.measured_interval
    return CategoryJudgement(
        rows=tuple(rows),
        recommended=chosen,
        recommended_forecast=forecast.recommended.speedup,
        recommended_measured=measured_there,
        best_measured=best.setting,
        best_measured_speedup=best.measured,
        loss=loss,
        within_5_percent=loss <= FORECAST_LOSS,
        within_best_interval=None if interval is None else interval[0] <= measured_there,
    )
