"""A draft registered from a test file, without editing the package (docs/extending.md, "A draft"): after one
``register_draft``, the commands list it, ``bench`` times it beside the shipped target, and ``audit --exact``
enumerates the speculative decoder's law with it on a tiny target, where the reference passes and a planted bug
fails (the audit sees through the new draft)."""

import json

import pytest
import torch

from cli import main
from decoders.drafts import DRAFT_KINDS, SHIPPED, TINY, DraftKind, open_draft, register_draft
from decoders.models.history import TabularModel


def _random_table(name: str, context):
    """An order-1 table with seeded random logits over the target's vocabulary."""
    return TabularModel.random(torch.Generator().manual_seed(3), context.vocab_size, 1, dtype=context.dtype)


@pytest.fixture
def toy():
    kind = register_draft(DraftKind("toy-table", _random_table, frozenset({SHIPPED, TINY}), "a random order-1 table"))
    yield kind
    del DRAFT_KINDS[kind.name]


def test_registered_draft_is_listed_and_named_in_errors(toy, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "toy-table" in capsys.readouterr().out
    assert main(["audit", "--exact", "--draft", "nope"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "toy-table" in error and "tabular" in error, error
    with pytest.raises(ValueError, match="already registered"):
        register_draft(toy)
    with pytest.raises(ValueError, match=r"draft 'close' is not a draft we build \(transformer, .*toy-table"):
        open_draft("close")  # offered beside the audits' tiny targets only


def test_registered_draft_through_bench_against_the_shipped_target(toy, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--draft",
                "toy-table",
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
                "--out",
                str(out),
            ]
        )
        == 0
    )
    document = json.loads(out.read_text())
    assert document["draft"] == "toy-table" and document["rows"][0]["tokens_per_iteration"] >= 1


def test_registered_draft_through_the_exact_audit_against_a_planted_bug(toy, capsys):
    """The reference decoder with the toy draft is exact (within 1e-9); the residual-from-p bug with the same draft
    is not (its deviation is over 1e-6)."""
    flags = [
        "audit",
        "--exact",
        "--draft",
        "toy-table",
        "--target",
        "tabular",
        "--vocabulary",
        "3",
        "--horizon",
        "3",
        "--json",
    ]
    assert main(flags) == 0
    passed = json.loads(capsys.readouterr().out)
    assert passed["max_abs_difference"] < 1e-9 and "toy-table" in passed["decoder"], passed
    assert main(flags + ["--mutant", "residual-from-p"]) == 1
    assert json.loads(capsys.readouterr().out)["max_abs_difference"] > 1e-6
