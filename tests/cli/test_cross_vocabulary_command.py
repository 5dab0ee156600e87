"""`spectheory bench --cross-vocabulary` on SmolLM2 drafted by the shipped character-level transformer (another
tokenizer): a small run whose document reads back typed, whose greedy tokens equal the target's (ours, and
transformers' assisted generation across tokenizers with --hf), and whose lines give every row and an answer per
temperature; a same-tokenizer draft (--beside) timed in the same run, and the answers read from typed rows."""

import json

import pytest
from command import run

from decoders.bench.bench_lines import cross_vocabulary_answers
from decoders.bench.documents import CrossVocabularyBench
from decoders.bench.rows import CrossVocabularyRow, TransformersRow

pytest.importorskip("transformers")


def test_bench_cross_vocabulary_against_autoregressive(tmp_path, capsys):
    out = tmp_path / "cross.json"
    status, printed, err = run(
        capsys,
        *("bench", "--target", "smollm2", "--draft", "transformer", "--cross-vocabulary", "slem", "tli"),
        *("--gammas", "2", "--temperatures", "0", "--prompts", "1", "--prompt-length", "24", "--max-new-tokens", "6"),
        *("--repeats", "1", "--warmup", "0", "--forecast-prompts", "1", "--hf", "--beside", "copy"),
        *("--out", str(out)),
    )
    assert status == 0, err
    document = json.loads(out.read_text())
    rows = [CrossVocabularyRow.from_dict(row) for row in document["rows"]]
    assert [(row.method, row.gamma, row.draft) for row in rows] == [("slem", 2, None), ("tli", 2, None)]
    (copy,) = [CrossVocabularyRow.from_dict(row) for row in document["beside_rows"]]  # our chain with prompt lookup
    assert (copy.method, copy.draft, copy.gamma, copy.greedy_equal) == ("speculative", "copy", 2, True)
    assert document["beside"] == ["copy"] and document["forecast"]["0"]["by_setting"]["beside copy 2"]["c"] >= 0
    assert "T = 0, with the target's own tokenizer: " in printed and printed.count("  copy  ") == 1
    assert all(row.greedy_equal for row in rows)  # every cross-vocabulary method keeps the target's greedy tokens
    assert all(row.tokens_per_call >= 1 for row in rows)
    forecast = document["forecast"]["0"]  # priced by the target's calls at every width the runs verified
    assert len(forecast["t_verify"]) == max(int(k) for one in forecast["by_setting"].values() for k in one["widths"])
    if forecast["checks"]["passed"]:
        assert all(row.forecast_speedup is not None for row in rows) and not forecast["withheld"]
    else:  # this machine's load moved while the widths were timed: withheld, with the line
        assert all(row.forecast_speedup is None for row in rows) and f"T = 0: {forecast['withheld']}" in printed
    assert document["vocabularies"] == {"target": 49152, "draft": 98} and document["settings"]["batch_size"] == 1
    assert document["autoregressive"]["0"]["tokens_per_second"] > 0 and "tokens/s" in printed
    assert "T = 0: " in printed and printed.count("  slem  ") == 1
    hf = [TransformersRow.from_dict(row) for row in document["hf"]]  # its generate, then its assisted generation
    assert [row.gamma for row in hf] == [None, 2] and all(row.greedy_equal for row in hf)


def test_report_cross_vocabulary_against_its_json(tmp_path, capsys):
    """`report --cross-vocabulary`: report.md carries every row of the report.json it was built from, the answer and
    the audit's verdict."""
    out = tmp_path / "report"
    status, printed, err = run(
        capsys,
        *("report", "--target", "smollm2", "--draft", "transformer", "--cross-vocabulary", "tli"),
        *("--gammas", "2", "--temperatures", "0", "--prompts", "1", "--prompt-length", "24", "--max-new-tokens", "6"),
        *("--repeats", "1", "--warmup", "0", "--forecast-prompts", "1", "--audit-n", "40", "--beside", "copy"),
        *("--out", str(out)),
    )
    assert status == 0, err
    document = json.loads((out / "report.json").read_text())
    markdown = (out / "report.md").read_text()
    (row,) = [CrossVocabularyRow.from_dict(row) for row in document["rows"]]
    assert (
        f"| 0 | tli | 2 | {row.alpha:.3f} | {row.candidates_per_draft_token:.2f} | {row.tokens_per_call:.3f} |"
        in markdown
    )
    (copy,) = [CrossVocabularyRow.from_dict(row) for row in document["beside_rows"]]
    assert f"| 0 | copy | 2 | {copy.alpha:.3f} | {copy.candidates_per_draft_token:.2f} |" in markdown
    typed = CrossVocabularyBench.from_dict({k: v for k, v in document.items() if k not in ("command", "provenance")})
    assert typed.audits["tli"].decoder and json.loads(json.dumps(typed.as_dict())) == {
        k: v for k, v in document.items() if k not in ("command", "provenance")
    }  # the report.json reads back typed, whole
    audit = document["audits"]["tli"]
    assert (
        audit["n"] == 40 and f"| tli | {'PASS' if audit['passed'] else 'FAIL'} | {audit['p_value']:.3g} |" in markdown
    )
    assert "T = 0: " in markdown and (out / "report.html").exists() and "report.md" in printed


@pytest.mark.parametrize(
    "arguments, message",
    [
        (("report", "--cross-vocabulary", "tli", "--task", "rewrite"), "drop --task, --from and --full"),
        (("bench", "--beside", "copy"), "--beside copy times same-tokenizer drafts"),
        (("report", "--beside", "ngram"), "add --cross-vocabulary"),
        (("bench", "--cross-vocabulary", "tli", "--beside", "copy", "ngram", "copy"), "copy named more than once"),
        (
            ("bench", "--target", "smollm2", "--draft", "transformer", "--cross-vocabulary", "tli"),
            "beside 'distilled': it reads another tokenizer",
        ),
    ],
)
def test_cross_vocabulary_flags_exit_2(capsys, arguments, message):
    extra = ("--beside", "distilled") if "transformer" in arguments else ()
    status, _, err = run(capsys, *arguments, *extra)
    assert status == 2 and err.count("\n") == 1 and message in err, err


def _row(speedup: float, low: float, **fields) -> CrossVocabularyRow:
    counts = dict(target_calls=1, draft_calls=1, tokens_per_call=1.0, alpha=0.5, candidates_per_draft_token=1.0)
    return CrossVocabularyRow(
        temperature=0.0, gamma=2, seconds=1.0, seconds_spread=[1.0] * 3, speedup=speedup,
        speedup_spread=[low, speedup, speedup + 0.1], **counts, **fields,
    )  # fmt: skip


@pytest.mark.parametrize(
    "copy_low, ngram_low, expected",
    [
        (1.2, 1.05, "use copy at gamma 2, 1.500x (1.20-1.60 over repeats), 1.67x the draft with another tokenizer's"),
        (0.9, 1.05, "use ngram at gamma 2, 1.100x (1.05-1.20 over repeats)"),
        (0.9, 0.95, "no draft pays either: the best, copy at gamma 2, 1.500x (0.90-1.60 over repeats)"),
    ],
)
def test_cross_vocabulary_answers_against_the_rows(copy_low, ngram_low, expected):
    """The answer per temperature: the draft with another tokenizer's first (every repeat at or under 1x here: do not
    speculate with it), then the same-tokenizer drafts': the fastest whose every repeat measured above 1x, and where
    none did (the third case, whose fastest median is 1.5x), none."""
    crossed = [_row(0.9, 0.8, method="slem"), _row(0.8, 0.7, method="tli")]
    beside = [
        _row(1.5, copy_low, method="speculative", draft="copy"),
        _row(1.1, ngram_low, method="speculative", draft="ngram"),
    ]
    answers = cross_vocabulary_answers(crossed, beside)
    assert answers[0].startswith("T = 0: do not speculate with this draft: the best, slem at gamma 2, measured 0.900x")
    assert answers[1].startswith(f"T = 0, with the target's own tokenizer: {expected}"), answers[1]
    assert cross_vocabulary_answers(crossed) == answers[:1]
