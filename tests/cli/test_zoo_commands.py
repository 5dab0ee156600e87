"""``spectheory train``, ``alpha``, ``bench`` and ``audit --target shipped`` on the shipped models: they write
what they say, and bad input is one line."""

import json

import pytest
import torch

from cli import main
from decoders import zoo
from spectheory.recommendation import from_sweep


def test_train_ngrams_reproduces_the_shipped_tables(tmp_path, capsys):
    assert main(["train", "ngrams", "--work", str(tmp_path / "work"), "--zoo", str(tmp_path)]) == 0
    assert "bigram:" in capsys.readouterr().out
    for name in ("unigram", "bigram"):
        assert torch.equal(zoo.load_draft(name, zoo=tmp_path).table, zoo.load_draft(name).table)


def test_alpha_cli_writes_json_and_markdown(tmp_path, capsys):
    out, table = tmp_path / "alpha.json", tmp_path / "alpha.md"
    status = main(
        [
            "alpha",
            "--drafts",
            "bigram",
            "random",
            "--temperatures",
            "0",
            "--windows",
            "2",
            "--prompts",
            "2",
            "--out",
            str(out),
            "--markdown",
            str(table),
        ]
    )
    assert status == 0
    document = json.loads(out.read_text())
    assert [e["draft"] for e in document["estimates"]] == ["bigram", "random"]
    assert document["command"].startswith("spectheory alpha")
    assert table.read_text() == capsys.readouterr().out
    assert document["estimates"][0]["alpha_text"] > document["estimates"][1]["alpha_text"]  # bigram beats uniform
    bigram = document["estimates"][0]  # and in the engines' words (docs/metrics.md)
    assert len(bigram["per_position_acceptance_rate"]) == bigram["gamma"]
    assert bigram["mean_acceptance_length"] == pytest.approx(1 + sum(bigram["per_position_acceptance_rate"]))
    assert 0 < bigram["acceptance_rate"] <= bigram["per_position_acceptance_rate"][0]


def test_bench_cli_writes_its_settings(tmp_path, capsys):
    out = tmp_path / "bench.json"
    status = main(
        [
            "bench",
            "--gammas",
            "2",
            "--temperatures",
            "0",
            "--prompts",
            "1",
            "--max-new-tokens",
            "8",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--batch-sizes",
            "1",
            "2",
            "--batch-gammas",
            "2",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0 and "best gamma 2" in printed
    document = json.loads(out.read_text())
    chosen = document["recommendations"]["0.0"]  # docs/measuring.md, "The recommendation": the rule's line printed
    assert (
        chosen == from_sweep(document["rows"], None).as_dict()
        and f"T = 0: recommended: {chosen['answer']} (rule: {chosen['rule']};" in printed
    )
    assert document["settings"]["gammas"] == [2] and document["settings"]["repeats"] == 1
    assert document["settings"]["batch_sizes"] == [1, 2] and len(document["batches"]["rows"]) == 2
    assert document["environment"]["device"] == "cpu" and document["draft"] == "transformer"
    assert document["padded_widths"] == {}  # TinyGPT calls are never padded (docs/theory.md §11)
    assert document["rows"][0]["tokens_per_iteration"] >= 1 and document["command"].startswith("spectheory bench")


def test_audit_cli_passes_on_the_shipped_pair(capsys):
    """A small statistical audit of the shipped pair at T = 1 (false-positive probability 0.01)."""
    status = main(["audit", "--target", "shipped", "--n", "1000", "--horizon", "3", "--seed", "1"])
    out = capsys.readouterr().out
    assert status == 0 and "PASS" in out and "draft transformer" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["audit", "--target", "shipped", "--exact"], "--exact enumerates tiny models only"),
        (["audit", "--prompt-text", "x"], "--prompt-text goes with --target shipped"),
        (["audit", "--target", "shipped", "--draft", "nope"], "draft must be one of"),
        (["bench", "--draft", "bigram", "--hf"], "--hf needs a transformer target"),
        (["bench", "--repeats", "0"], "repeats must be an integer in [1, 100], got 0"),
        (["alpha", "--windows", "0"], "windows must be an integer in [2, 10000], got 0"),
        (["alpha", "--windows", "1"], "windows must be an integer in [2, 10000], got 1"),  # used to write NaN
        (["train", "nope"], "invalid choice"),
        (["alpha", "--device", "foo"], "'foo' is not a torch device"),  # used to be a 20-line traceback
        (["bench", "--device", "cuda:99"], "'cuda:99': this machine has"),
    ],
)
def test_zoo_cli_bad_arguments_exit_2_with_one_line(capsys, argv, fragment):
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert fragment in error and error.count("\n") == 1


def test_train_order_against_the_dependencies():
    """Every model comes after what it needs: distilled after target and transformer, heads after target."""
    order = zoo.training_order(["all"])
    assert order.index("distilled") > max(order.index("target"), order.index("transformer"))
    assert order.index("heads") > order.index("target") and zoo.training_order(["heads", "ngrams"]) == [
        "ngrams",
        "heads",
    ]
