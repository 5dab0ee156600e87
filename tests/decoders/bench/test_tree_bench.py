"""The tree-against-chain bench (docs/theory-trees.md §12) against direct counts and against the rank model where it is
exact: the target as its own draft accepts every node of a chain."""

import json

import numpy as np
import pytest
import torch
from tree_bench_inputs import VOCAB, small_tree_document, tiny_gpt

from decoders.bench.documents import TreeBench
from decoders.bench.tree_bench import rank_frequencies, tree_lines
from decoders.models.history import TabularModel


def test_rank_frequencies_against_direct_count():
    target, draft = tiny_gpt(0), TabularModel.random(torch.Generator().manual_seed(2), VOCAB, 1)
    windows = torch.randint(0, VOCAB, (3, 10), generator=torch.Generator().manual_seed(3))
    expected, positions = np.zeros(4), 0
    with torch.no_grad():
        for row in windows.tolist():
            for end in range(4, 10):  # contexts of 4 .. 9 tokens predict positions 4 .. 9
                greedy = int(target.forward(torch.tensor([row[:end]]), target.new_state(1, 16))[0, -1].argmax())
                order = torch.sort(
                    draft.forward(torch.tensor([row[:end]]), draft.new_state(1))[0, -1], descending=True, stable=True
                ).indices.tolist()
                if order.index(greedy) < 4:
                    expected[order.index(greedy)] += 1
                positions += 1
    measured = rank_frequencies(target, draft, windows, skip=4, ranks=4)
    np.testing.assert_allclose(measured, expected / positions)


def test_tree_bench_target_as_draft_against_rank_model():
    """With the target as its own draft a_1 = 1: the chain of n - 1 drafts emits n tokens per call, as predicted."""
    document = small_tree_document(draft=tiny_gpt(0), budgets=(4,)).as_dict()
    assert document["rank_frequencies"]["decoding"][0] == 1.0
    chain = next(row for row in document["rows"] if row["kind"] == "chain")
    assert chain["tokens_per_call"] == chain["predicted_tokens_per_call"] == 4.0
    assert (chain["mean_acceptance_length"], chain["acceptance_rate"]) == (4.0, 1.0)  # the engines' names
    tree = next(row for row in document["rows"] if row["kind"] == "tree")  # every node a draft token of its round
    assert tree["acceptance_rate"] == pytest.approx((tree["tokens_per_call"] - 1) / (tree["tree"]["nodes"] - 1))


def test_tree_bench_document_and_lines():
    bench = small_tree_document()
    document = json.loads(json.dumps(bench.as_dict(), allow_nan=False))
    assert TreeBench.from_dict(document).as_dict() == document  # the JSON edge and back
    assert [(row["kind"], row["budget"]) for row in document["rows"]] == [
        ("chain", 4),
        ("tree", 4),
        ("chain", 8),
        ("tree", 8),
    ]
    for row in document["rows"]:  # at T = 0 the replay along the greedy text is exact
        assert row["tree"]["nodes"] <= row["budget"] and 0 < row["tokens_over_predicted"] < 3
        assert row["iterations"] == row["replayed_iterations"], row
        assert row["speedup_spread"][0] <= row["speedup"] <= row["speedup_spread"][2]
    assert [call["width"] for call in document["tree_calls"]] == [
        row["tree"]["nodes"] for row in document["rows"] if row["kind"] == "tree"
    ]
    lines = tree_lines(bench)
    assert lines[-1].startswith("recommended: ") and len(lines) == 3 + 4 + 2 + 1


def test_replayed_iterations_against_a_walk_by_hand():
    """Greedy ranks along a text, walked by hand. The chain of 2 along ranks 1 1 0 1 2 1: iterations accept 2
    (positions 0 and 1; position 2's token comes from the target), 1 (position 3; rank 2 is no chain child) and 1
    (position 5, the text's end): 3. The root with two leaves along 2 2 3 1: rank 2 accepted (position 1 from the
    target), nothing (rank 3 is no child), rank 1: 3. Control: no rank ever accepted, one iteration a token."""
    from decoders.bench.tree_bench import replayed_iterations
    from spectheory.trees import Tree

    assert replayed_iterations(Tree.chain(2), [1, 1, 0, 1, 2, 1]) == 3
    assert replayed_iterations(Tree.kary(2, 1), [2, 2, 3, 1]) == 3
    assert replayed_iterations(Tree.chain(2), [0, 0, 0]) == 3


def test_tree_bench_dynamic_trees_against_the_target_as_draft():
    """EAGLE-2's dynamic trees beside chain and tree: with the target as its own draft every call accepts a whole
    path of ``depth`` nodes (depth + 1 tokens); the rank model predicts no dynamic tree, so those fields are empty
    and the lines print a dash."""
    from decoders.bench.tree_bench import check_dynamic

    bench = small_tree_document(draft=tiny_gpt(0), budgets=(4,), dynamic=check_dynamic("2:3", (4,)))
    document = json.loads(json.dumps(bench.as_dict(), allow_nan=False))
    dynamic = document["rows"][-1]
    assert (dynamic["kind"], dynamic["tree"]) == ("dynamic", {"dynamic": True, "branching": 2, "nodes": 4, "depth": 3})
    assert dynamic["tokens_per_call"] == 4.0 and dynamic["calibrated_speedup"] is None
    forecast = document["dynamic_forecast"]  # made before the sweep, on other windows, where the target's own
    # second choice at depth 1 can outrank its greedy node at depth 3 and 3 kept nodes then hold 2 of the path
    assert dynamic["forecast_tokens_per_call"] == forecast["rows"][0]["forecast_tokens_per_call"]
    assert dynamic["calibrated_tokens_per_call"] == forecast["rows"][0]["calibrated_tokens_per_call"]
    assert 0.85 < dynamic["tokens_forecast_over_measured"] <= 1.0 and dynamic["forecast_over_measured"] > 0
    assert document["rows"][0]["forecast_speedup"] is None  # the chain's row
    assert tree_lines(bench)[6].startswith(f"dynamic 4: forecast {dynamic['forecast_tokens_per_call']:.3f} tokens/call")
    assert tree_lines(bench)[5].split()[:7] == ["4", "dynamic", "3", "4.000", str(dynamic["iterations"]), "(-)", "-"]
    with pytest.raises(ValueError, match="dynamic must be K:D .* budget must be an integer in \\[2, 3\\], got 4"):
        check_dynamic("1:2", (4,))


def test_tree_bench_refuses_bad_budgets():
    with pytest.raises(ValueError, match="budget must be an integer in \\[2, 256\\], got 1"):
        small_tree_document(budgets=(4, 1))


def test_tree_rows_against_every_committed_file():
    """The tree bench's row format (decoders.bench.rows.TreeRow) reads every tree-against-chain row committed under
    results/ (rows with a kind and a budget), each vintage's keys with their values. Control: an unknown key is
    refused."""
    from committed_results import committed_rows, misread

    from decoders.bench.rows import TreeRow

    rows = committed_rows("rows", frozenset({"kind", "budget", "tokens_per_call"}))
    assert len(rows) >= 50, len(rows)
    assert misread(TreeRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        TreeRow.from_dict(dict(rows[0], odd=1))
