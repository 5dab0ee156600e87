"""Spec-Bench's forecast (decoders/bench/spec_bench/forecast.py): its questions against the table's, its acceptance
against the decoders' own runs on the same questions, its judgement and the report's recommendation against
hand-computed values; never timings."""

import json
from dataclasses import replace

import pytest
from figure_inputs import small_spec_bench_table

from decoders.bench.bench import BenchSettings
from decoders.bench.bench_lines import recommendation_lines
from decoders.bench.rows import BenchRow, DynamicTreeRow, ForecastRow
from decoders.bench.spec_bench import forecast as spec_bench_forecast
from decoders.bench.spec_bench.document import (
    CategoryForecast,
    CategoryJudgement,
    DraftForecast,
    ForecastChoice,
    JudgedSetting,
    SpecBenchCategory,
    SpecBenchDraft,
    SpecBenchDynamic,
    SpecBenchTable,
    TreeForecast,
)
from decoders.bench.spec_bench.forecast import judge_category, other_questions
from decoders.bench.spec_bench.questions import LABELS, select_questions, spec_bench_prompts
from decoders.bench.spec_bench.recommend import NO_SPECULATION, recommend
from decoders.bench.spec_bench.run import SpecBenchRun
from decoders.bench.spec_bench.suite import spec_bench_document
from decoders.bench.spec_bench.table import category_rows, forecast_lines, spec_bench_lines
from decoders.dynamic_tree import DynamicTree
from spectheory.cost_checks import CostChecks, step_check
from spectheory.costs import CostProfile

SETTINGS = BenchSettings(
    gammas=(1, 2), temperatures=(0.0,), prompts=1, max_new_tokens=8, repeats=1, warmup=0, batch_sizes=(), call_steps=2
)


def test_other_questions_against_the_tables_selection():
    """The forecast's questions are none of the table's, the same for the same seed, and too many are refused."""
    timed = {q["question_id"] for q in select_questions("qa", 2, 0)}
    others = other_questions(None, "qa", 5, 0, 10_000, 2)
    assert len({q.question_id for q in others}) == 5 and not timed & {q.question_id for q in others}
    assert [q.question_id for q in other_questions(None, "qa", 5, 0, 10_000, 2)] == [q.question_id for q in others]
    with pytest.raises(ValueError, match="only 78 of qa's are not the table's"):
        other_questions(None, "qa", 79, 0, 10_000, 2)


def _measured(speedups: dict, intervals: dict, tree: float) -> SpecBenchCategory:
    """A category measured at ``speedups`` {gamma: speedup} with their 95% ``intervals``, the dynamic tree at
    ``tree``; what the judgement does not read is a placeholder."""
    rows = tuple(
        BenchRow(
            temperature=0.0,
            gamma=g,
            seconds=1.0,
            iterations=1,
            tokens_per_iteration=1.0,
            speedup=s,
            speedup_interval=intervals[g],
        )
        for g, s in speedups.items()
    )
    profile = CostProfile(t_step=0.05, t_draft=0.001, t_verify=(0.05, 0.06), t_iteration=0.002, acceptance=(0.5,))
    drafted = SpecBenchDraft(
        gammas=list(speedups),
        prompt_room=100,
        autoregressive_seconds=1.0,
        c=0.02,
        target_call_seconds=0.05,
        draft_call_seconds=0.001,
        alpha=0.5,
        rows=rows,
        profile=profile,
        spread={},
    )
    timed_tree = DynamicTreeRow(
        temperature=0.0,
        nodes=8,
        speedup=tree,
        speedup_spread=[tree] * 3,
        mean_acceptance_length=1.5,
        acceptance_rate=0.3,
        greedy_equal=[True],
    )
    dynamic = SpecBenchDynamic(draft="copy", tree={}, prompt_room=100, rows=(timed_tree,))
    return SpecBenchCategory(label=LABELS["qa"], prompts={}, drafts={"copy": drafted}, dynamic=dynamic)


def _forecast(speedups: dict, tree: float, recommended: str) -> CategoryForecast:
    """A category's forecast at ``speedups`` {gamma: speedup} and ``tree``, recommending ``recommended``."""
    rows = tuple(
        ForecastRow(gamma=g, speedup=s, standard_error=0.01, interval=[s * 0.8, s * 1.25]) for g, s in speedups.items()
    )
    return CategoryForecast(
        questions={},
        prefill_ratio={},
        drafts={"copy": DraftForecast(speedups=rows, prompts_needed=None, alpha=None)},
        dynamic=TreeForecast(
            nodes=8, tokens_per_call=1.5, speedup=tree, standard_error=0.02, seconds_per_iteration=0.1, draft="copy"
        ),
        recommended=ForecastChoice(
            setting=recommended, draft=None, gamma=None, speedup=max([tree, 1.0, *speedups.values()])
        ),
        autoregressive_seconds=1.0,
        seconds=1.0,
    )


def test_judge_category_against_hand_computed_values():
    """Forecast / measured per setting and inside the interval or not; the forecast's choice (copy gamma 2) measured
    at 1.2x against the best measured (the tree, 1.3x): loses 1 - 1.2 / 1.3, more than 5%, and the tree has no
    interval to be inside of; a right forecast loses 0."""
    measured = _measured({1: 1.1, 2: 1.2}, {1: [1.0, 1.2], 2: [1.15, 1.25]}, 1.3)
    judged = judge_category(_forecast({1: 1.0, 2: 1.5}, 1.25, "copy gamma 2"), measured)
    assert [(r.setting, r.forecast_over_measured, r.inside_interval) for r in judged.rows] == [
        ("copy gamma 1", pytest.approx(1.0 / 1.1), True),
        ("copy gamma 2", pytest.approx(1.5 / 1.2), False),
        ("dynamic tree (copy) 8 nodes", pytest.approx(1.25 / 1.3), None),
    ]
    assert (judged.recommended_measured, judged.best_measured) == (1.2, "dynamic tree (copy) 8 nodes")
    assert judged.loss == pytest.approx(1 - 1.2 / 1.3) and not judged.within_5_percent
    assert judged.within_best_interval is None
    right = judge_category(
        _forecast({1: 1.0, 2: 1.5}, 1.25, "copy gamma 2"),
        _measured({1: 1.1, 2: 1.4}, {1: [1.0, 1.2], 2: [1.3, 1.5]}, 1.3),
    )
    assert right.loss == 0 and right.within_5_percent and right.within_best_interval
    # "do not speculate" is measured at 1x: chosen where everything measures below
    slow = judge_category(
        _forecast({1: 0.9, 2: 0.8}, 0.7, NO_SPECULATION),
        _measured({1: 0.95, 2: 0.9}, {1: [0.9, 1.0], 2: [0.85, 0.95]}, 0.8),
    )
    assert (slow.recommended_measured, slow.best_measured, slow.loss) == (1.0, NO_SPECULATION, 0.0)


def _judged(setting: str, drafted: int, forecast: float, measured: float) -> JudgedSetting:
    """A setting's forecast beside its measurement, as the recommendation reads it (the rest placeholders)."""
    draft, _, gamma = setting.partition(" gamma ")
    return JudgedSetting(
        setting=setting,
        draft="dynamic" if not gamma else draft,
        gamma=int(gamma) if gamma else None,
        drafted=drafted,
        forecast=forecast,
        forecast_standard_error=None,
        measured=measured,
        measured_interval=None,
        forecast_over_measured=forecast / measured,
        inside_interval=None,
    )


def _forecast_table() -> SpecBenchTable:
    """``small_spec_bench_table`` with a forecast that prefers copy gamma 1 on QA (against the model's gamma 2) and
    the dynamic tree on RAG."""
    table = SpecBenchTable.from_dict(small_spec_bench_table())
    wanted = {
        "qa": {"copy gamma 1": 1.6, "copy gamma 2": 1.3, "slow gamma 1": 0.5, "tree": 0.9},
        "rag": {"copy gamma 1": 0.9, "copy gamma 2": 0.8, "slow gamma 1": 0.5, "tree": 1.2},
    }
    categories = {}
    for category, measured in table.categories.items():
        rows = [
            _judged(f"{name} gamma {row.gamma}", row.gamma, wanted[category][f"{name} gamma {row.gamma}"], row.speedup)
            for name, drafted in measured.drafts.items()
            for row in drafted.rows
        ]
        rows.append(
            _judged("dynamic tree (copy) 8 nodes", 8, wanted[category]["tree"], measured.dynamic.rows[0].speedup)
        )
        judged = CategoryJudgement(
            rows=tuple(rows),
            recommended=NO_SPECULATION,
            recommended_forecast=1.0,
            recommended_measured=1.0,
            best_measured=NO_SPECULATION,
            best_measured_speedup=1.0,
            loss=0.0,
            within_5_percent=True,
            within_best_interval=None,
        )  # the recommendation reads its rows alone
        forecast = replace(_forecast({}, 1.0, NO_SPECULATION), judged=judged)
        categories[category] = replace(measured, forecast=forecast)
    return replace(table, categories=categories)


def test_recommendation_from_the_forecast_against_hand_computed_choices():
    """With a forecast the report recommends from it, the dynamic tree included, and says so; the calibrated model
    (QA: copy gamma 2) is not consulted. One setting for all weighs the categories by the forecast's own baseline
    seconds (1 each): copy gamma 1, (1 + 1) / (1 / 1.6 + 1 / 0.9)."""
    answer = recommend(_forecast_table())
    qa, rag = answer.categories["qa"], answer.categories["rag"]
    assert (qa.recommended, qa.predicted_speedup, qa.predicted_by) == ("copy gamma 1", 1.6, "forecast")
    assert (rag.recommended, rag.predicted_speedup) == ("dynamic tree (copy) 8 nodes", 1.2)
    assert rag.measured_speedup == _forecast_table().categories["rag"].dynamic.rows[0].speedup
    one = answer.one_setting
    assert one.setting == "copy gamma 1" and one.predicted_overall == pytest.approx(2 / (1 / 1.6 + 1 / 0.9))
    lines = recommendation_lines(answer)
    assert "forecast" in lines[0] and "forecast overall" in lines[-1]
    control = recommend(SpecBenchTable.from_dict(small_spec_bench_table()))  # no forecast: the calibrated model's
    assert control.categories["qa"].recommended == "copy gamma 2"
    assert control.categories["qa"].predicted_by == "model"


def test_measured_only_tree_against_hand_computed_best():
    """Without a forecast the dynamic tree is still a measured candidate, though its draft (copy) has chain rows
    too: at 2.0x on QA it is the best measured, and the model's choice (copy gamma 2, 1.4x) is 0.7 of it."""
    saved = small_spec_bench_table()
    saved["categories"]["qa"]["dynamic"]["rows"][0]["speedup"] = 2.0
    qa = recommend(SpecBenchTable.from_dict(saved)).categories["qa"]
    assert (qa.recommended, qa.best_measured) == ("copy gamma 2", "dynamic tree (copy) 8 nodes")
    assert qa.recommended_over_best == pytest.approx(1.4 / 2.0)


def _checks_that(passed: bool):
    """A stand-in for the cost checks (``decoders.bench.profile.profile_checks``): these tests judge acceptance and
    documents, not this machine's load, so the verdict is set (passed, or a step at 3 times the width-1 call)."""
    return lambda profile, spread: CostChecks(() if passed else (step_check(0.003, (0.001,)),))


@pytest.fixture(scope="module")
def forecast_table():
    """QA on the shipped target, bigram at gammas 1 and 2 and EAGLE-2's tree, forecast from 2 other questions."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spec_bench_forecast, "profile_checks", _checks_that(True))
        run = SpecBenchRun(SETTINGS, "spec-bench:qa", forecast_questions=2, progress=False)
        return spec_bench_document(run, {"bigram": (1, 2)}, DynamicTree(2, 2, 4))


def test_withheld_forecast_against_the_table(monkeypatch):
    """Where a draft's costs fail their checks the table keeps the forecast's numbers but judges nothing with them:
    no category carries a forecast, the recommendation is the cost model's, and the lines print the one line."""
    monkeypatch.setattr(spec_bench_forecast, "profile_checks", _checks_that(False))
    document = spec_bench_document(
        SpecBenchRun(SETTINGS, "spec-bench:qa", forecast_questions=1, progress=False), {"bigram": (1, 2)}
    )
    withheld = document.forecast.withheld
    assert withheld.startswith("Spec-Bench's forecast (the bigram draft's costs) withheld: a width-1 verify call took")
    assert document.categories["qa"].forecast is None and "qa" in document.forecast.categories
    assert "forecast" not in document.as_dict()["categories"]["qa"]
    assert forecast_lines(document)[-1] == withheld
    assert recommend(document).categories["qa"].predicted_by == "model"


def test_forecast_document_against_its_table(forecast_table):
    """The forecast names its questions (none the table's), judges every setting of the table, and prints; the
    document is strict JSON."""
    measured = forecast_table.categories["qa"]
    forecast = measured.forecast
    timed = {q["question_id"] for room in measured.prompts.values() for q in room}
    asked = {q["question_id"] for room in forecast.questions.values() for q in room}
    assert len(asked) == 2 and not timed & asked
    assert [row.setting for row in forecast.judged.rows] == [
        "bigram gamma 1",
        "bigram gamma 2",
        "dynamic tree (bigram) 4 nodes",
    ]
    assert forecast.recommended.setting in {row.setting for row in forecast.judged.rows} | {NO_SPECULATION}
    assert [row.forecast_speedup is not None for row in category_rows(forecast_table)] == [True, True]
    assert forecast_table.forecast.questions == 2 and forecast_table.sweep_seconds > 0
    lines = forecast_lines(forecast_table)
    assert lines[1].startswith(f"{LABELS['qa']}: recommended ") and "over 3 settings" in lines[1]
    assert spec_bench_lines(forecast_table)[-2:] == lines
    saved = json.loads(json.dumps(forecast_table.as_dict(), allow_nan=False))
    assert json.loads(json.dumps(SpecBenchTable.from_dict(saved).as_dict())) == saved


def test_forecast_acceptance_against_the_decoders_runs(monkeypatch):
    """Given the table's own question, the forecast's acceptance runs decode the timed runs' text at T = 0: the
    pooled alpha at the largest gamma is the timed row's alpha_counts, and the tree's tokens per call the timed
    tree's. Negative control: on another question (seed + 7; the shipped character model continues most QA
    questions alike over 8 tokens) they differ."""

    def table_question(tokenizer, category, count, seed, room, timed):
        return spec_bench_prompts(tokenizer, category, count, seed, room)

    monkeypatch.setattr(spec_bench_forecast, "other_questions", table_question)
    monkeypatch.setattr(spec_bench_forecast, "profile_checks", _checks_that(True))
    document = spec_bench_document(
        SpecBenchRun(SETTINGS, "spec-bench:qa", forecast_questions=1, progress=False),
        {"bigram": (1, 2)},
        DynamicTree(2, 2, 4),
    )
    measured = document.categories["qa"]
    forecast = measured.forecast
    assert forecast.drafts["bigram"].alpha == pytest.approx(measured.drafts["bigram"].rows[-1].alpha_counts)
    assert forecast.dynamic.tokens_per_call == pytest.approx(measured.dynamic.rows[0].mean_acceptance_length)
    monkeypatch.setattr(
        spec_bench_forecast,
        "other_questions",
        lambda tokenizer, category, count, seed, room, timed: spec_bench_prompts(
            tokenizer, category, count, seed + 7, room
        ),
    )
    other = spec_bench_document(
        SpecBenchRun(SETTINGS, "spec-bench:qa", forecast_questions=1, progress=False),
        {"bigram": (1, 2)},
        DynamicTree(2, 2, 4),
    ).categories["qa"]
    assert other.forecast.drafts["bigram"].alpha != pytest.approx(other.drafts["bigram"].rows[-1].alpha_counts)
    assert other.forecast.dynamic.tokens_per_call != pytest.approx(other.dynamic.rows[0].mean_acceptance_length)
