"""Spec-Bench's questions (measure/spec_bench.py) against the file's own counts, and its bench on the shipped
tiny pair against greedy autoregressive decoding, prompt by prompt; never timings."""

import collections
import json

import pytest
import torch

from measure.bench import BenchSettings, bench_pair
from measure.runs import spec_bench_document
from measure.spec_bench import (CATEGORIES, LABELS, QUESTIONS, PromptRows, select_questions, spec_bench_categories,
                                spec_bench_prompts)
from measure.spec_bench_table import category_rows, spec_bench_lines
from command import run

#: Spec-Bench's question file as its README describes it: MT-bench's 8 sub-categories of 10, then 80 of each.
FILE_COUNTS = {"writing": 10, "roleplay": 10, "reasoning": 10, "math": 10, "coding": 10, "extraction": 10,
               "stem": 10, "humanities": 10, "translation": 80, "summarization": 80, "qa": 80, "math_reasoning": 80,
               "rag": 80}


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
    whole = spec_bench_prompts(None, "rag", 1, 0, 10 ** 6)[0]
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
    prompt = spec_bench_prompts(_ChatTokenizer(), "mt_bench", 1, 0, 10 ** 6)[0]
    assert "".join(map(chr, prompt.tokens)) == f"<user>{question['turns'][0]}<assistant>"


def test_prompt_rows_against_tensors():
    rows = PromptRows([[1, 2, 3], [4, 5]])
    assert rows[0].tolist() == [1, 2, 3] and rows[1:2].tolist() == [[4, 5]] and rows[1:2].shape == (1, 2)
    assert isinstance(rows[0:2], PromptRows) and rows.tolist() == [[1, 2, 3], [4, 5]]
    assert rows.to("cpu").device == torch.device("cpu") and len(rows) == 2


SETTINGS = BenchSettings(gammas=(2,), temperatures=(0.0,), prompts=1, max_new_tokens=8, repeats=1, warmup=0,
                         batch_sizes=(), call_steps=2)


def test_spec_bench_bench_against_autoregressive():
    """Two categories of the shipped pair: every T = 0 row's tokens equal greedy autoregressive decoding's, prompt
    by prompt; the table has one line per category."""
    document = spec_bench_document("bigram", SETTINGS, "spec-bench:qa,rag", progress=False)
    assert list(document["categories"]) == ["qa", "rag"]
    for measured in document["categories"].values():
        assert [row["greedy_equal"] for row in measured["rows"]] == [[True]]
    rows = category_rows(document)
    assert [row["label"] for row in rows] == [LABELS["qa"], LABELS["rag"]] and all(row["greedy_equal"] for row in rows)
    assert rows[1]["cut"] == 1  # a RAG question does not fit the shipped target's 256 characters
    lines = spec_bench_lines(document)
    assert sum(LABELS[c] in line for line in lines for c in ("qa", "rag")) == 2 and "lost their front" in lines[-1]


def test_greedy_check_catches_a_wrong_reference():
    """Negative control: a reference that differs in its last token marks the prompt unequal."""
    from decoders.models.zoo import load_pair

    target, draft = load_pair("bigram")
    rows = PromptRows([[5, 6, 7, 8]])
    report = bench_pair(target, draft, rows, SETTINGS, greedy=[(0,) * 8], progress=False)
    assert report.rows[0]["greedy_equal"] == [False]


def test_commands_without_spec_bench_refuse_it_in_one_line(capsys):
    """The tree bench does not take Spec-Bench's questions yet: one line and exit 2, before anything is timed."""
    status, _, err = run(capsys, "bench", "--task", "spec-bench:qa", "--tree", "--budgets", "4")
    assert status == 2 and "only the plain bench" in err and len(err.strip().splitlines()) == 1
