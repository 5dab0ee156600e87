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
from dataclasses import replace

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
from decoders.bench.spec_bench.questions import QUESTIONS_PER_CATEGORY, PromptRows, select_questions, spec_bench_prompts
from decoders.bench.spec_bench.recommend import NO_SPECULATION, NOT_SPECULATING, chain_setting, tree_setting
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


def _tree_iteration_seconds(cost: dict, tree_draft: str, tokens: int) -> float:
    """The dynamic tree's seconds per iteration on the cost question: its whole seconds (the baseline's over its
    measured speedup) less the prefills, over its iterations."""
    row, drafted = cost["dynamic"]["rows"][0], cost["drafts"][tree_draft]
    profile = drafted["profile"]
    seconds = drafted["autoregressive_seconds"] / row["speedup"]
    return (seconds - profile["target_prefill"] - profile["draft_prefill"]) / (tokens / row["mean_acceptance_length"])


def _tree_forecast(
    target, model, tree, rows: PromptRows, profile: CostProfile, iteration_seconds: float, tokens: int
) -> dict:
    """The dynamic tree's tokens per call from its untimed runs on ``rows`` and its forecast speedup, with a
    jackknife standard error over the rows."""
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
    return {
        "nodes": tree.budget,
        "tokens_per_call": per_call,
        "speedup": value,
        "standard_error": error,
        "interval": forecast_interval(value, error, len(made)),
        "seconds_per_iteration": iteration_seconds,
    }


def _recommended(drafts: dict, dynamic: dict | None) -> dict:
    """The setting of the largest forecast among every draft's gammas, the dynamic tree and no speculation (1x)."""
    settings = [
        {
            "setting": chain_setting(name, row["gamma"]),
            "draft": name,
            "gamma": row["gamma"],
            "forecast": row["speedup"],
            "drafted": row["gamma"],
        }
        for name, forecast in drafts.items()
        for row in forecast["speedups"]
    ]
    if dynamic is not None:
        settings.append(
            {
                "setting": tree_setting(dynamic["draft"], dynamic["nodes"]),
                "draft": "dynamic",
                "gamma": None,
                "forecast": dynamic["speedup"],
                "drafted": dynamic["nodes"],
            }
        )
    best = best_choice(settings + [NOT_SPECULATING], lambda s: s["forecast"], lambda s: s["drafted"])
    return {"setting": best["setting"], "draft": best["draft"], "gamma": best["gamma"], "speedup": best["forecast"]}


def forecast_category(
    target,
    tokenizer,
    category: str,
    models: dict,
    rooms: dict,
    cost_questions: dict,
    cost: dict,
    s: BenchSettings,
    *,
    dynamic,
    questions: int,
    repeats: int,
) -> dict:
    """One category's forecast (module docstring): ``models`` {name: (model, gammas)}, ``rooms`` {name: its prompt
    room}, ``cost_questions`` {room: the cost question cut to it}, ``cost``: the cost run's document, ``dynamic``
    (draft name, model, DynamicTree) or None."""
    started, tokens = time.perf_counter(), s.max_new_tokens
    asked = {room: other_questions(tokenizer, category, questions, s.seed, room, s.prompts) for room in cost_questions}
    ratios = {room: prefill_ratio(target, asked[room], cost_questions[room], repeats) for room in asked}
    profiles = {
        name: _scaled(CostProfile.from_dict(cost["drafts"][name]["profile"]), ratios[rooms[name]]) for name in models
    }
    drafts = {}
    for name, (model, gammas) in models.items():
        rows = PromptRows(list(q.tokens) for q in asked[rooms[name]])
        runs = acceptance_runs(target, model, rows, GREEDY, gamma_max=max(gammas), max_new_tokens=tokens)
        speedups = forecast_speedups(profiles[name], runs, gammas, tokens)
        drafts[name] = {
            "speedups": [row.as_dict() for row in speedups],
            "prompts_needed": prompts_needed(speedups, len(runs)),
            "alpha": with_acceptance(profiles[name], runs, tokens).alpha,
        }
    tree = None
    if dynamic is not None:
        name, model, shape = dynamic
        rows = PromptRows(list(q.tokens) for q in asked[rooms[name]])
        tree = dict(
            _tree_forecast(
                target, model, shape, rows, profiles[name], _tree_iteration_seconds(cost, name, tokens), tokens
            ),
            draft=name,
        )
    first = profiles[next(iter(models))]
    return {
        "questions": {str(room): [q.as_dict() for q in asked[room]] for room in asked},
        "prefill_ratio": {str(room): ratio for room, ratio in ratios.items()},
        "drafts": drafts,
        "dynamic": tree,
        "recommended": _recommended(drafts, tree),
        "autoregressive_seconds": first.target_prefill + tokens * first.t_step,
        "seconds": time.perf_counter() - started,
    }


def forecast_table(
    target,
    tokenizer,
    categories: tuple,
    models: dict,
    s: BenchSettings,
    *,
    dynamic=None,
    questions: int = SPEC_BENCH_FORECAST_QUESTIONS,
    repeats: int = FORECAST_REPEATS,
    bench_category,
    progress=None,
) -> dict:
    """The forecast of every category (``forecast_category``) from one cost run of the table's timer
    (``bench_category``: ``decoders.bench.spec_bench.suite``'s, passed in by it) on the cost question over ``repeats``
    after a warm-up; ``progress(category)`` after each category."""
    started, first = time.perf_counter(), categories[0]
    cost_settings = replace(s, prompts=1, repeats=repeats, warmup=1)

    def pick(room):
        return other_questions(tokenizer, first, 1, s.seed, room, s.prompts)

    cost = bench_category(target, tokenizer, first, models, cost_settings, dynamic=dynamic, questions=pick)
    rooms = {name: drafted["prompt_room"] for name, drafted in cost["drafts"].items()}
    cost_questions = {room: pick(room)[0] for room in set(rooms.values())}
    measured = {}
    for category in categories:
        measured[category] = forecast_category(
            target,
            tokenizer,
            category,
            models,
            rooms,
            cost_questions,
            cost,
            s,
            dynamic=dynamic,
            questions=questions,
            repeats=repeats,
        )
        if progress:
            progress(category)
    checks = {
        name: profile_checks(CostProfile.from_dict(drafted["profile"]), drafted["profile"].get("spread"))
        for name, drafted in cost["drafts"].items()
    }
    failed = [(name, one) for name, one in checks.items() if not one.passed]
    return {
        "questions": questions,
        "repeats": repeats,
        "warmup": 1,
        "checks": {name: one.as_dict() for name, one in checks.items()},
        "withheld": failed[0][1].line(f"Spec-Bench's forecast (the {failed[0][0]} draft's costs)") if failed else "",
        "cost_question": {str(room): q.as_dict() for room, q in cost_questions.items()},
        "cost_seconds": time.perf_counter() - started - sum(c["seconds"] for c in measured.values()),
        "profiles": {name: drafted["profile"] for name, drafted in cost["drafts"].items()},
        "categories": measured,
        "seconds": time.perf_counter() - started,
    }


def judge_category(forecast: dict, measured: dict) -> dict:
    """One category's ``forecast`` (``forecast_category``'s) beside its timed ``measured`` document: forecast /
    measured at every draft and gamma and the dynamic tree, inside the measured 95% interval or not; the
    recommended setting's measured speedup, the best measured setting (no speculation at 1x included), the loss and
    whether the recommended lies within the best's interval."""
    rows = []
    for name, drafted in measured["drafts"].items():
        timed = {row["gamma"]: row for row in drafted["rows"]}
        for f in forecast["drafts"][name]["speedups"]:
            row = timed[f["gamma"]]
            rows.append(
                {
                    "setting": chain_setting(name, f["gamma"]),
                    "draft": name,
                    "gamma": f["gamma"],
                    "drafted": f["gamma"],
                    "forecast": f["speedup"],
                    "forecast_standard_error": f["standard_error"],
                    "measured": row["speedup"],
                    "measured_interval": row["speedup_interval"],
                    "forecast_over_measured": f["speedup"] / row["speedup"],
                    "inside_interval": row["speedup_interval"][0] <= f["speedup"] <= row["speedup_interval"][1],
                    "covered": covers(f["speedup"], f["interval"], row["speedup"], row["speedup_interval"]),
                }
            )
    tree = forecast.get("dynamic")
    if tree is not None and measured.get("dynamic"):
        timed = measured["dynamic"]["rows"][0]
        rows.append(
            {
                "setting": tree_setting(tree["draft"], tree["nodes"]),
                "draft": "dynamic",
                "gamma": None,
                "drafted": tree["nodes"],
                "forecast": tree["speedup"],
                "forecast_standard_error": tree["standard_error"],
                "measured": timed["speedup"],
                "measured_interval": None,
                "forecast_over_measured": tree["speedup"] / timed["speedup"],
                "inside_interval": None,
                "covered": None,
            }
        )
    by_setting = {row["setting"]: row for row in rows}
    chosen = forecast["recommended"]["setting"]
    measured_there = 1.0 if chosen == NO_SPECULATION else by_setting[chosen]["measured"]
    best = best_choice(rows + [NOT_SPECULATING], lambda row: row["measured"], lambda row: row["drafted"])
    loss = 1 - measured_there / best["measured"]
    interval = best["measured_interval"]
    return {
        "rows": rows,
        "recommended": chosen,
        "recommended_forecast": forecast["recommended"]["speedup"],
        "recommended_measured": measured_there,
        "best_measured": best["setting"],
        "best_measured_speedup": best["measured"],
        "loss": loss,
        "within_5_percent": loss <= FORECAST_LOSS,
        "within_best_interval": None if interval is None else interval[0] <= measured_there,
    }
