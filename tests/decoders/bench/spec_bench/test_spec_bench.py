"""Spec-Bench's questions (decoders/bench/spec_bench/questions.py) against the file's own counts; its table on the
shipped tiny pair against greedy autoregressive decoding, prompt by prompt; the report's recommendation against
hand-computed choices; never timings."""

import collections
import dataclasses
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from command import run
from figure_inputs import small_spec_bench_table

from decoders.bench.bench import BenchSettings, bench_pair
from decoders.bench.bench_lines import recommendation_lines
from decoders.bench.inputs import Pair
from decoders.bench.profile import ProfileRecorder
from decoders.bench.runs import SPEC_BENCH_TOKENS, AlphaRun, spec_bench_alpha_document
from decoders.bench.spec_bench.document import SpecBenchTable
from decoders.bench.spec_bench.questions import (
    CATEGORIES,
    LABELS,
    QUESTIONS,
    PromptRows,
    select_questions,
    spec_bench_categories,
    spec_bench_prompts,
)
from decoders.bench.spec_bench.recommend import (
    NO_SPECULATION,
    Z95,
    overall_error,
    recommend,
    within_noise,
)
from decoders.bench.spec_bench.run import SpecBenchRun
from decoders.bench.spec_bench.suite import spec_bench_document
from decoders.bench.spec_bench.table import category_rows, spec_bench_lines
from decoders.dynamic_tree import DynamicTree

#: Spec-Bench's question file as its README describes it: MT-bench's 8 sub-categories of 10, then 80 of each.
FILE_COUNTS = {
    "writing": 10,
    "roleplay": 10,
    "reasoning": 10,
    "math": 10,
    "coding": 10,
    "extraction": 10,
    "stem": 10,
    "humanities": 10,
    "translation": 80,
    "summarization": 80,
    "qa": 80,
    "math_reasoning": 80,
    "rag": 80,
}


def test_shipped_questions_against_spec_bench_counts():
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 480 and len({row["question_id"] for row in rows}) == 480
    assert collections.Counter(row["category"] for row in rows) == FILE_COUNTS
    assert sorted(name for group in CATEGORIES.values() for name in group) == sorted(FILE_COUNTS)
    assert "Apache License" in (QUESTIONS.parent / "LICENSE").read_text()
    assert "Apache License 2.0" in (QUESTIONS.parent / "README.md").read_text()


def test_task_categories_against_the_table_order():
    assert spec_bench_categories("spec-bench") == tuple(CATEGORIES) == tuple(LABELS)
    assert spec_bench_categories("spec-bench:rag,qa") == ("qa", "rag")
    with pytest.raises(ValueError, match="got poetry"):
        spec_bench_categories("spec-bench:qa,poetry")


def test_cli_refuses_an_unknown_category_in_one_line(capsys):
    status, _, err = run(capsys, "bench", "--task", "spec-bench:poetry")
    assert status == 2 and "got poetry" in err and len(err.strip().splitlines()) == 1


def test_selection_against_its_seed():
    first = [q["question_id"] for q in select_questions("qa", 5, seed=0)]
    assert first == [q["question_id"] for q in select_questions("qa", 5, seed=0)] == sorted(first)
    assert first != [q["question_id"] for q in select_questions("qa", 5, seed=1)]
    assert len({q["question_id"] for q in select_questions("mt_bench", 80, seed=3)}) == 80  # the whole category
    assert {q["category"] for q in select_questions("mt_bench", 80, seed=3)} == set(CATEGORIES["mt_bench"])
    with pytest.raises(ValueError, match="prompts per category"):
        select_questions("qa", 81, seed=0)


def test_long_prompt_cut_from_the_front():
    """Character ids (no tokenizer): a 3,000-character RAG prompt cut to 200 keeps its last 200, question and
    the opened assistant turn included; a short QA prompt is whole."""
    whole = spec_bench_prompts(None, "rag", 1, 0, 10**6)[0]
    cut = spec_bench_prompts(None, "rag", 1, 0, 200)[0]
    assert whole.cut == 0 and cut.cut == len(whole.tokens) - 200 > 2000
    assert cut.tokens == whole.tokens[-200:]
    short = spec_bench_prompts(None, "qa", 1, 0, 200)[0]
    assert short.cut == 0 and len(short.tokens) < 200


class _ChatTokenizer:
    """The two calls the framing makes of a Hugging Face tokenizer with a chat template."""

    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return f"<user>{messages[0]['content']}<assistant>"

    def __call__(self, text, add_special_tokens):
        return {"input_ids": [ord(c) for c in text]}


def test_first_turn_through_the_chat_template():
    question = select_questions("mt_bench", 1, seed=0)[0]
    prompt = spec_bench_prompts(_ChatTokenizer(), "mt_bench", 1, 0, 10**6)[0]
    assert "".join(map(chr, prompt.tokens)) == f"<user>{question['turns'][0]}<assistant>"


def test_prompt_rows_against_tensors():
    rows = PromptRows([[1, 2, 3], [4, 5]])
    assert rows[0].tolist() == [1, 2, 3] and rows[1:2].tolist() == [[4, 5]] and rows[1:2].shape == (1, 2)
    assert isinstance(rows[0:2], PromptRows) and rows.tolist() == [[1, 2, 3], [4, 5]]
    assert rows.to("cpu").device == torch.device("cpu") and len(rows) == 2


SETTINGS = BenchSettings(
    gammas=(1, 2), temperatures=(0.0,), prompts=1, max_new_tokens=8, repeats=1, warmup=0, batch_sizes=(), call_steps=2
)


@pytest.fixture(scope="module")
def table():
    """Two categories on the shipped target: bigram at gammas 1 and 2, unigram at 2, EAGLE-2's tree with bigram."""
    run = SpecBenchRun(SETTINGS, "spec-bench:qa,rag", progress=False)
    return spec_bench_document(run, {"bigram": (1, 2), "unigram": (2,)}, DynamicTree(2, 2, 4))


def test_spec_bench_table_against_autoregressive(table):
    """Every row's tokens equal greedy autoregressive decoding's, prompt by prompt; one line per category and
    draft, those of one gamma and the dynamic tree's without a prediction; a RAG question is cut to the shipped
    target's context."""
    assert list(table.categories) == ["qa", "rag"]
    for measured in table.categories.values():
        assert {name: [row.gamma for row in drafted.rows] for name, drafted in measured.drafts.items()} == {
            "bigram": [1, 2],
            "unigram": [2],
        }
        assert all(row.greedy_equal == [True] for drafted in measured.drafts.values() for row in drafted.rows)
        assert measured.dynamic.rows[0].greedy_equal == [True]
    rows = category_rows(table)
    assert [(row.label, row.draft) for row in rows] == [
        (LABELS[c], d) for c in ("qa", "rag") for d in ("bigram", "unigram", "dynamic tree (bigram)")
    ]
    assert all(row.greedy_equal for row in rows)
    # unigram's one gamma would calibrate its own prediction, and the rank model does not predict dynamic trees
    assert [row.calibrated_speedup is None for row in rows] == [False, True, True] * 2
    assert rows[3].cut == 1 and rows[3].prompt_tokens == table.categories["rag"].drafts["bigram"].prompt_room
    lines = spec_bench_lines(table)
    assert sum(line.startswith(LABELS["qa"]) for line in lines) == 3 and "lost their front" in lines[-2]


def test_greedy_check_catches_a_wrong_draft_output(monkeypatch):
    """Negative control: a speculative decoder whose last token is off marks its prompts unequal."""
    from decoders.bench.spec_bench import suite as spec_bench_suite

    real = spec_bench_suite.generate_speculative

    def off_by_one(*args, **kwargs):
        generation = real(*args, **kwargs)
        tokens = tuple(row[:-1] + ((row[-1] + 1) % 2,) for row in generation.tokens)
        return dataclasses.replace(generation, tokens=tokens)

    monkeypatch.setattr(spec_bench_suite, "generate_speculative", off_by_one)
    document = spec_bench_document(SpecBenchRun(SETTINGS, "spec-bench:qa", progress=False), {"bigram": (2,)}, None)
    assert [row.greedy_equal for row in document.categories["qa"].drafts["bigram"].rows] == [[False]]


def test_greedy_check_catches_a_wrong_reference():
    """Negative control: a reference that differs in its last token marks the prompt unequal."""
    from decoders.zoo import load_pair

    target, draft = load_pair("bigram")
    rows = PromptRows([[5, 6, 7, 8]])
    report = bench_pair(Pair(target, draft), rows, replace(SETTINGS, gammas=(2,)), greedy=[(0,) * 8], progress=False)
    assert report.rows[0].greedy_equal == [False]


def test_profile_lent_by_the_sweep_against_planted_costs():
    """A recorder whose smallest gamma is 2 (the sweep's runs, not the profile's own at 1) recovers planted
    affine draft and other costs per iteration: draft = 0.01 + 0.002 gamma, other = 0.003 + 0.0005 gamma."""
    tokens, t_step = 12, 0.05
    recorder = ProfileRecorder(5, tokens, {"autoregressive": 1, ("speculative", 2): 1, ("speculative", 5): 1}, 0, {})
    recorder.add(
        "autoregressive",
        SimpleNamespace(
            seconds={"prefill": t_step, "total": tokens * t_step},
            iterations=0,
            proposed_per_iteration=[],
            accepted_per_iteration=[],
        ),
    )
    for gamma in (2, 5):
        iterations = tokens // (gamma + 1)
        draft, other, verify = (iterations * x for x in (0.01 + 0.002 * gamma, 0.003 + 0.0005 * gamma, 0.06))
        recorder.add(
            ("speculative", gamma),
            SimpleNamespace(
                seconds={"prefill": 0.0, "draft": draft, "verify": verify, "total": draft + verify + other},
                iterations=iterations,
                proposed_per_iteration=[[gamma]] * iterations,
                accepted_per_iteration=[[gamma]] * iterations,
            ),
        )
    recorder.add_widths({k: 0.06 for k in range(1, 7)})
    values = {key: value[0] for key, value in recorder.components().items()}
    assert values["draft_slope"] == pytest.approx(0.002) and values["draft_intercept"] == pytest.approx(0.01)
    assert values["other_slope"] == pytest.approx(0.0005) and values["other_intercept"] == pytest.approx(0.003)


def test_recommendation_against_hand_computed_choices():
    """``small_spec_bench_table``: QA takes copy at gamma 2 (predicted 1.5x, the best measured, 1.4x); RAG,
    predicted below 1x everywhere, is not sped up (measured 1.00x against copy gamma 1's 1.02x). One setting for
    all: copy gamma 1, overall (2 + 6) / (2 / 1.2 + 6 / 0.95) predicted, (2 + 6) / (2 / 1.25 + 6 / 1.02) measured,
    against the per-category (2 + 6) / (2 / 1.4 + 6 / 1)."""
    answer = recommend(_table())
    qa, rag = answer.categories["qa"], answer.categories["rag"]
    assert (qa.recommended, qa.predicted_speedup, qa.measured_speedup) == ("copy gamma 2", 1.5, 1.4)
    assert qa.best_measured == "copy gamma 2" and qa.recommended_over_best == 1.0
    assert (rag.recommended, rag.measured_speedup, rag.best_measured) == (NO_SPECULATION, 1.0, "copy gamma 1")
    assert rag.recommended_over_best == pytest.approx(1 / 1.02)
    one = answer.one_setting
    assert one.setting == "copy gamma 1"
    assert one.predicted_overall == pytest.approx(8 / (2 / 1.2 + 6 / 0.95))
    assert one.measured_overall == pytest.approx(8 / (2 / 1.25 + 6 / 1.02))
    assert one.per_category_measured_overall == pytest.approx(8 / (2 / 1.4 + 6 / 1.0))
    assert one.loss == pytest.approx(1 - one.measured_overall / one.per_category_measured_overall)
    lines = recommendation_lines(answer)
    assert lines[2].startswith(LABELS["rag"]) and NO_SPECULATION in lines[2] and "loses 0.7%" in lines[-1]


def test_noise_bands_against_hand_computed_differences():
    """Two speedups are apart at 95% when they differ by more than 1.96 sqrt(e_a^2 + e_b^2); an unknown error
    decides nothing."""
    assert within_noise(1.1, 0.05, 1.0, 0.0) is False  # 0.1 > 0.098
    assert within_noise(1.09, 0.05, 1.0, 0.0) is True
    assert within_noise(1.3, 0.1, 1.1, 0.1) is True  # 0.2 <= 1.96 * 0.1414 = 0.277
    assert within_noise(1.3, None, 1.0, 0.0) is None


def test_overall_error_against_monte_carlo():
    """The delta-method error of the overall speedup against the spread of 200,000 seeded draws of the categories'
    speedups (normal, independent); they agree within 3% at errors this small."""
    weights, speedups, errors = {"a": 2.0, "b": 6.0}, {"a": 1.4, "b": 1.0}, {"a": 0.05, "b": 0.03}
    draws = {
        c: torch.normal(speedups[c], errors[c], (200_000,), generator=torch.Generator().manual_seed(i))
        for i, c in enumerate(weights)
    }
    overall = sum(weights.values()) / sum(weights[c] / draws[c] for c in weights)
    assert overall_error(weights, speedups, errors) == pytest.approx(float(overall.std()), rel=0.03)
    assert overall_error(weights, speedups, {"a": 0.05, "b": None}) is None


def _table(error: float | None = None) -> SpecBenchTable:
    """``small_spec_bench_table``, each row's measured standard error ``error`` where given."""
    saved = small_spec_bench_table()
    for measured in saved["categories"].values():
        for drafted in measured["drafts"].values():
            for row in drafted["rows"]:
                row["speedup_standard_error"] = error
    return SpecBenchTable.from_dict(saved)


def test_recommendation_noise_against_hand_computed_bands():
    """QA's recommendation (copy gamma 2, measured 1.4) against its best measured (the same): within noise; RAG's
    (do not speculate, exact 1x) against copy gamma 1's 1.02 with error e: apart at e = 0.01 (0.02 > 0.0196), within
    at e = 0.1; the one-setting loss carries the delta method's half-width, and without errors all is unknown."""
    tight = recommend(_table(0.01))
    qa, rag = tight.categories["qa"], tight.categories["rag"]
    assert qa.within_noise_of_best is True and rag.within_noise_of_best is False
    assert recommend(_table(0.1)).categories["rag"].within_noise_of_best is True
    one = tight.one_setting
    weights = {"qa": 2.0, "rag": 6.0}
    one_error = overall_error(weights, {"qa": 1.25, "rag": 1.02}, {"qa": 0.01, "rag": 0.01})
    each_error = overall_error(weights, {"qa": 1.4, "rag": 1.0}, {"qa": 0.01, "rag": 0.0})
    ratio = one.measured_overall / one.per_category_measured_overall
    assert one.loss_standard_error == pytest.approx(
        ratio * ((one_error / one.measured_overall) ** 2 + (each_error / one.per_category_measured_overall) ** 2) ** 0.5
    )
    assert one.loss_within_noise == (abs(one.loss) <= Z95 * one.loss_standard_error)
    assert lines_apart(recommendation_lines(tight)) == ["no", "yes"]
    unknown = recommend(_table())  # the control: no errors measured, nothing decided
    assert unknown.categories["qa"].within_noise_of_best is None and unknown.one_setting.loss_standard_error is None
    assert lines_apart(recommendation_lines(unknown)) == ["unknown", "unknown"]


def lines_apart(lines: list) -> list:
    return [line.split()[-1] for line in lines[1:-1]]


def test_report_from_a_saved_table(tmp_path, capsys):
    """``report --task spec-bench --from FILE``: the recommendation printed and written, with the bar chart."""
    saved = tmp_path / "table.json"
    saved.write_text(json.dumps(small_spec_bench_table()))
    status, printed, _ = run(
        capsys, "report", "--task", "spec-bench", "--from", str(saved), "--out", str(tmp_path / "report")
    )
    assert status == 0 and "copy gamma 2" in printed and NO_SPECULATION in printed
    written = json.loads((tmp_path / "report" / "report.json").read_text())
    assert written["recommendation"]["categories"]["qa"]["recommended"] == "copy gamma 2"
    assert (tmp_path / "report" / "figures" / "spec_bench.png").stat().st_size > 1000
    assert "copy gamma 2" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.parametrize(
    "flags, message",
    [(("--windows", "4"), "does not take --windows"), (("--from", "/nonexistent.json"), "cannot read a JSON table")],
)
def test_report_refuses_in_one_line(tmp_path, capsys, flags, message):
    status, _, err = run(capsys, "report", "--task", "spec-bench", *flags, "--out", str(tmp_path / "report"))
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_alpha_per_category_against_acceptance_counts():
    """``alpha --task spec-bench``'s estimates: one per category and draft; the acceptance counts are the
    speculative runs' own (accepted over verified draft tokens), within [0, 1]."""
    document = spec_bench_alpha_document(AlphaRun(("bigram",), (0.0,), task="spec-bench:qa,rag", prompts=2))
    assert [(e.category, e.draft) for e in document.estimates] == [("qa", "bigram"), ("rag", "bigram")]
    for estimate in document.estimates:
        assert estimate.alpha_counts == estimate.accepted_tokens / estimate.verified_tokens
        assert 0 <= estimate.alpha_text <= 1 and estimate.text_positions == 2 * SPEC_BENCH_TOKENS
    with pytest.raises(ValueError, match="prompts"):
        AlphaRun(("bigram",), (0.0,), task="spec-bench:qa", prompts=1)


def test_commands_without_spec_bench_refuse_it_in_one_line(capsys):
    """The tree bench does not take Spec-Bench's questions: one line and exit 2, before anything is timed."""
    status, _, err = run(capsys, "bench", "--task", "spec-bench:qa", "--tree", "--budgets", "4")
    assert status == 2 and "greedy table only" in err and len(err.strip().splitlines()) == 1


def test_table_rows_against_every_committed_file():
    """The Spec-Bench table's row format (decoders.bench.rows.TableRow) reads every table row committed under
    results/ (an engine's tables), each vintage's keys with their values. Control: an unknown key is refused."""
    from committed_results import committed_rows, misread

    from decoders.bench.rows import TableRow

    rows = committed_rows("table", frozenset({"category", "draft", "setting"}))
    assert len(rows) >= 20, len(rows)
    assert misread(TableRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        TableRow.from_dict(dict(rows[0], odd=1))


def test_dynamic_tree_rows_against_every_committed_file():
    """The dynamic tree's Spec-Bench row (decoders.bench.rows.DynamicTreeRow) reads every such row committed under
    results/ with its values. Control: an unknown key is refused."""
    from committed_results import committed_rows, misread

    from decoders.bench.rows import DynamicTreeRow

    rows = committed_rows("rows", frozenset({"nodes", "alpha_counts"}))
    assert len(rows) >= 12, len(rows)
    assert misread(DynamicTreeRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        DynamicTreeRow.from_dict(dict(rows[0], odd=1))
