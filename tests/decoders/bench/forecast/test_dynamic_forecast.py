"""The dynamic tree's forecast (docs/theory-trees.md §12, ``decoders.bench.forecast.dynamic``) against the tree decoder:
the acceptance it measures per node is what the decoder's walk accepts, at the first iteration and along a whole run."""

import json

import numpy as np
import pytest
import torch
from tree_bench_inputs import VOCAB, held_out, tiny_gpt

from decoders.bench.forecast.dynamic import DynamicPlan, forecast_dynamic, node_acceptance, widest
from decoders.bench.inputs import Pair
from decoders.dynamic_tree import DynamicTree
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.tree import TreeConfig, generate_tree
from spectheory.dynamic_trees import replayed_tokens

TREE = DynamicTree(2, 3, 6)
CONTEXTS = torch.randint(0, VOCAB, (12, 8), generator=torch.Generator().manual_seed(3))


def decode(target, draft, prompts, sampling, tokens, seed=0):
    return generate_tree(
        target, draft, prompts, max_new_tokens=tokens, config=TreeConfig(TREE, sampling), randomness=seeded(seed)
    )


def test_node_acceptance_against_the_decoder_at_greedy():
    """T = 0: the accepted nodes summed per context equal the decoder's first iteration's accepted count, context by
    context (12 contexts, counts 1 to 3)."""
    target, draft = tiny_gpt(0), tiny_gpt(1)
    confidence, acceptance = node_acceptance(target, draft, CONTEXTS, TREE, Sampling(0.0))
    first = decode(target, draft, CONTEXTS, Sampling(0.0), 4).stats.accepted_per_iteration[0]
    assert acceptance.sum(axis=1).tolist() == list(first) and len(set(first)) > 1
    assert set(np.unique(acceptance)) <= {0.0, 1.0} and np.all(confidence <= 0)


def test_node_acceptance_along_a_greedy_run_against_the_decoder():
    """Along the text one prompt's greedy run decoded, the tree grown at each iteration's start accepts what the
    decoder accepted there: replaying the run from the measured acceptance gives its iterations one by one, and
    ``replayed_tokens`` over the acceptance at every position gives its tokens per call."""
    target, draft = tiny_gpt(0), tiny_gpt(1)
    run = decode(target, draft, CONTEXTS[:1], Sampling(0.0), 24)  # accepted 3, 1, 3, 2, 0, 0, 1, 1, 3, 1
    text = torch.tensor([CONTEXTS[0].tolist() + list(run.tokens[0])])
    replayed, position = [], 0
    while position < 24:
        accepted = int(node_acceptance(target, draft, text[:, : 8 + position], TREE, Sampling(0.0))[1].sum())
        replayed.append(accepted)  # the last iteration's too, though only its first tokens are kept
        position += accepted + 1
    assert replayed == [iteration[0] for iteration in run.stats.accepted_per_iteration]
    assert len(set(replayed)) == 4
    everywhere = [
        int(node_acceptance(target, draft, text[:, : 8 + j], TREE, Sampling(0.0))[1].sum()) for j in range(24)
    ]
    assert replayed_tokens([everywhere]) == 24 / len(replayed)


def test_node_acceptance_against_the_decoder_when_sampling():
    """T = 1: at each of two contexts the target's path probabilities summed are the mean accepted count of 600
    first iterations (one seeded batch of 600 rows), within 4 standard errors (false-positive probability about 1e-4
    for both); the draft's own path probabilities (EAGLE-2's confidence as if it were the acceptance), the control,
    are not."""
    target, draft = tiny_gpt(0), tiny_gpt(1)
    confidence, acceptance = node_acceptance(target, draft, CONTEXTS[:2], TREE, Sampling(1.0))
    for row in range(2):
        batch = CONTEXTS[row : row + 1].expand(600, -1)  # 600 rows of one context: independent first iterations
        counts = np.array(decode(target, draft, batch, Sampling(1.0), 2, row).stats.accepted_per_iteration[0])
        error = counts.std(ddof=1) / np.sqrt(len(counts))
        assert abs(counts.mean() - acceptance[row].sum()) < 4 * error, (row, counts.mean(), acceptance[row].sum())
        assert abs(counts.mean() - np.exp(confidence[row]).sum()) > 4 * error, (row, np.exp(confidence[row]).sum())


def test_forecast_document_records_what_it_used():
    """The forecast's section: a calibration over every node of the widest tree at every position, per budget tokens
    per call of at least 1 and at most the tree's depth + 1 (replayed and calibrated), a finite speedup, and the
    seeds, counts and seconds that went into it."""
    plan = DynamicPlan(2, 3, (4, 6), tokens=12, length=8, seed=0, windows=4, repeats=1)
    forecast = forecast_dynamic(Pair(tiny_gpt(0), tiny_gpt(1)), held_out(), plan)
    json.dumps(forecast.as_dict(), allow_nan=False)
    assert sum(forecast.calibration["nodes"]) == 4 * 12 * (widest(2, 3).size - 1)
    assert forecast.used == {
        "windows": 4,
        "contexts": 48,
        "cost_prompts": 2,
        "length": 8,
        "tokens": 12,
        "repeats": 1,
        "seeds": {"windows": 2, "costs": 3},
    }
    for row in forecast.rows:
        assert 1 <= row.forecast_tokens_per_call <= 4 and 1 <= row.calibrated_tokens_per_call <= 4
        assert 0 < row.forecast_speedup < 100
    assert [row.budget for row in forecast.rows] == [4, 6] and forecast.seconds > 0
    assert forecast.recommended_budget == max(forecast.rows, key=lambda row: row.forecast_speedup).budget


def test_forecast_refuses_bad_settings():
    with pytest.raises(ValueError, match="windows must be a positive integer, got 0"):
        forecast_dynamic(Pair(tiny_gpt(0), tiny_gpt(1)), held_out(), DynamicPlan(2, 3, (4,), 12, 8, windows=0))
