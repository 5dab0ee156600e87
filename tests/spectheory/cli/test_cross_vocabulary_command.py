"""`spectheory bench --cross-vocabulary` on SmolLM2 drafted by the shipped character-level transformer (another
tokenizer): a small run whose document reads back typed, whose greedy tokens equal the target's (ours, and
transformers' assisted generation across tokenizers with --hf), and whose lines give every row and an answer per
temperature."""

import json

import pytest
from command import run

from decoders.bench.rows import CrossVocabularyRow, TransformersRow

pytest.importorskip("transformers")


def test_bench_cross_vocabulary_against_autoregressive(tmp_path, capsys):
    out = tmp_path / "cross.json"
    status, printed, err = run(
        capsys,
        *("bench", "--target", "smollm2", "--draft", "transformer", "--cross-vocabulary", "slem", "tli"),
        *("--gammas", "2", "--temperatures", "0", "--prompts", "1", "--prompt-length", "24", "--max-new-tokens", "6"),
        *("--repeats", "1", "--warmup", "0", "--forecast-prompts", "1", "--hf", "--out", str(out)),
    )
    assert status == 0, err
    document = json.loads(out.read_text())
    rows = [CrossVocabularyRow.from_dict(row) for row in document["rows"]]
    assert [(row.method, row.gamma) for row in rows] == [("slem", 2), ("tli", 2)]
    assert all(row.greedy_equal for row in rows)  # every cross-vocabulary method keeps the target's greedy tokens
    assert all(row.tokens_per_call >= 1 and row.forecast_speedup is not None for row in rows)
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
        *("--repeats", "1", "--warmup", "0", "--forecast-prompts", "1", "--audit-n", "40", "--out", str(out)),
    )
    assert status == 0, err
    document = json.loads((out / "report.json").read_text())
    markdown = (out / "report.md").read_text()
    (row,) = [CrossVocabularyRow.from_dict(row) for row in document["rows"]]
    assert (
        f"| 0 | tli | 2 | {row.alpha:.3f} | {row.candidates_per_draft_token:.2f} | {row.tokens_per_call:.3f} |"
        in markdown
    )
    audit = document["audits"]["tli"]
    assert (
        audit["n"] == 40 and f"| tli | {'PASS' if audit['passed'] else 'FAIL'} | {audit['p_value']:.3g} |" in markdown
    )
    assert "T = 0: " in markdown and (out / "report.html").exists() and "report.md" in printed


def test_report_cross_vocabulary_flags_exit_2(capsys):
    status, _, err = run(capsys, "report", "--cross-vocabulary", "tli", "--task", "rewrite")
    assert status == 2 and err.count("\n") == 1 and "drop --task, --from and --full" in err
