"""The tree decoder (docs/theory-trees.md §12) against greedy autoregressive decoding token for token, and its exact
law (every branch of its draws enumerated) against the target's."""

import pytest
import torch

from decoders.audit.exact import autoregressive_law, compare_laws, tree_law, whole_run_law
from decoders.audit.tree_mutants import TREE_MUTANTS, tree_mutant
from decoders.autoregressive import generate_autoregressive
from decoders.models.history import CopyDraft, TabularModel
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import (
    REFERENCE_TREE_STEP,
    DynamicTree,
    TreeConfig,
    breadth_first,
    chain_config,
    generate_tree,
    runs_as_chain,
    tree_acceptance,
)
from spectheory.multidraft import TREE_RULES
from spectheory.trees import Tree, optimal_tree

VOCAB = 24
PROMPTS = [[1, 2, 3], [4], [5, 6, 7, 8, 9], [3, 3]]
SHAPES = {
    "chain": Tree.chain(4),
    "binary": Tree.kary(2, 2),
    "sequoia": optimal_tree((0.6, 0.25, 0.1), 10)[0],
    "depth-first": Tree((-1, 0, 1, 2, 1, 0, 5, 0)),
}


def tiny_gpt(seed, d_model=32, n_layer=2, vocab=VOCAB):
    torch.manual_seed(seed)  # initialisation only
    return TinyGPT(TinyGPTConfig(vocab, d_model=d_model, n_layer=n_layer, n_head=4, max_context=96)).eval()


def test_breadth_first_keeps_the_tree():
    tree = SHAPES["depth-first"]
    ordered = breadth_first(tree)
    assert ordered.parents == (-1, 0, 0, 0, 1, 1, 2, 4)
    assert sorted(ordered.depths) == sorted(tree.depths) and list(ordered.depths) == sorted(ordered.depths)


@pytest.mark.parametrize("verifier", sorted(TREE_RULES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("batch", (1, 4))
def test_greedy_tree_against_autoregressive(verifier, shape, batch):
    target = tiny_gpt(0)
    reference = generate_autoregressive(
        target, PROMPTS[:batch], max_new_tokens=20, sampling=GREEDY, randomness=seeded(0)
    )
    history_drafts = (TabularModel.random(torch.Generator().manual_seed(2), VOCAB, 1), CopyDraft(VOCAB, max_match=3))
    for draft in (tiny_gpt(1, d_model=16, n_layer=1), *history_drafts, target):
        generation = generate_tree(
            target,
            draft,
            PROMPTS[:batch],
            max_new_tokens=20,
            config=TreeConfig(SHAPES[shape], GREEDY, verifier),
            randomness=seeded(1),
        )
        assert generation.tokens == reference.tokens[:batch], (shape, verifier)
    # the target as its own draft accepts a full path every time, under every verifier (greedy: p = q one-hot)
    stats = tree_acceptance(generation.stats, TreeConfig(SHAPES[shape], GREEDY, verifier).tree)
    assert stats["acceptance_per_depth"] == [1.0] * SHAPES[shape].depth, verifier


class _Calls:
    """A model whose forward passes (``forward``, ``append``, ``forward_tree``) record their widths, and whose
    cache calls (``truncate``, ``commit_path``) as well as forward passes record their names."""

    def __init__(self, model):
        self.model, self.widths, self.names = model, [], []

    def __getattr__(self, name):
        attribute = getattr(self.model, name)
        if name not in ("forward", "append", "forward_tree", "truncate", "commit_path"):
            return attribute

        def call(tokens, *args, **kwargs):
            self.names.append(name)
            if name not in ("truncate", "commit_path"):
                self.widths.append(tokens.shape[1])
            return attribute(tokens, *args, **kwargs)

        return call


@pytest.mark.parametrize("tree", [SHAPES["binary"], SHAPES["chain"], DynamicTree(2, 3, 6)], ids=str)
def test_tree_draft_calls_against_counted_calls(tree):
    """``DecodeStats.draft_calls`` is the draft's forward passes after the prefill, counted on the model: depth per
    iteration for a static tree (the pending tokens, then one per level but the deepest), depth + 1 for a dynamic
    one (its last is the accepted path's append)."""
    draft = _Calls(tiny_gpt(1, d_model=16, n_layer=1))
    generation = generate_tree(
        tiny_gpt(0),
        draft,
        PROMPTS[:1],
        max_new_tokens=12,
        config=TreeConfig(tree, GREEDY, "target-only"),
        randomness=seeded(1),
    )
    prefill_calls = 1  # the prompt but its last token
    assert (
        generation.stats.draft_calls
        == len(draft.widths) - prefill_calls
        == generation.stats.iterations * (tree.depth + isinstance(tree, DynamicTree))
    )


@pytest.mark.parametrize("verifier", sorted(TREE_RULES))
def test_chain_tree_against_chain_decoder(verifier):
    """A chain-shaped tree whose verifier is Algorithm 1 at one child (RRS, RRS without replacement, K-SEQ) is the
    chain decoder (``runs_as_chain``): at T = 1 the same seeded tokens and accepted counts as ``generate_speculative``
    at gamma = depth, causal calls and truncation only, each accepted child's rank 1. Control: the target-only
    verifier at T = 1 is another rule, run as a tree of width 1 (tree attention, other tokens)."""
    target, draft = _Calls(tiny_gpt(0)), _Calls(tiny_gpt(1, d_model=16, n_layer=1))
    sampling = Sampling(1.0)
    tree_run = generate_tree(
        target,
        draft,
        PROMPTS,
        max_new_tokens=12,
        config=TreeConfig(SHAPES["chain"], sampling, verifier),
        randomness=seeded(1),
    )
    chain_run = generate_speculative(
        target.model,
        draft.model,
        PROMPTS,
        max_new_tokens=12,
        config=SpeculativeConfig(SHAPES["chain"].depth, sampling),
        randomness=seeded(1),
    )
    names = set(target.names) | set(draft.names)
    same = (tree_run.tokens, tree_run.stats.accepted_per_iteration) == (
        chain_run.tokens,
        chain_run.stats.accepted_per_iteration,
    )
    config = TreeConfig(SHAPES["chain"], sampling, verifier)
    assert (
        same
        == runs_as_chain(config)
        == (chain_config(config, REFERENCE_TREE_STEP) is not None)
        == (verifier != "target-only")
    )
    assert chain_config(config, tree_mutant(TREE_MUTANTS[0].name).step) is None  # a planted bug runs its own step
    if verifier == "target-only":
        assert {"forward_tree", "commit_path"} <= names, names
    else:
        assert names == {"forward", "append", "truncate"}, names
        assert tree_run.stats.accepted_ranks == tuple(
            tuple((1,) * count for count in rows) for rows in chain_run.stats.accepted_per_iteration
        )


@pytest.mark.parametrize("shape", ["chain", "binary"])
def test_greedy_chain_tree_against_tree_attention(shape):
    """At T = 0 every verifier is greedy matching, so a chain-shaped tree, target-only included, is the chain
    decoder: causal calls and truncation only, never tree attention or a moved cache; a branching tree uses both.
    The tokens are greedy autoregressive decoding's either way."""
    target, draft = _Calls(tiny_gpt(0)), _Calls(tiny_gpt(1, d_model=16, n_layer=1))
    generation = generate_tree(
        target,
        draft,
        PROMPTS,
        max_new_tokens=12,
        config=TreeConfig(SHAPES[shape], GREEDY, "target-only"),
        randomness=seeded(1),
    )
    assert (
        generation.tokens
        == generate_autoregressive(
            target.model, PROMPTS, max_new_tokens=12, sampling=GREEDY, randomness=seeded(0)
        ).tokens
    )
    names = set(target.names) | set(draft.names)
    if shape == "chain":
        assert names == {"forward", "append", "truncate"}, names
    else:
        assert {"forward_tree", "commit_path"} <= names, names


def test_tree_target_calls_against_iterations():
    """The target's first call carries the ragged prompts (one of a single token) as chains under the tree's root:
    one target call per iteration and none for a prefill, the first of the longest prompt but one plus the tree's
    nodes, and the tokens are still greedy autoregressive decoding's."""
    target, tree = _Calls(tiny_gpt(0)), SHAPES["binary"]
    generation = generate_tree(
        target,
        tiny_gpt(1, d_model=16, n_layer=1),
        PROMPTS,
        max_new_tokens=12,
        config=TreeConfig(tree, GREEDY),
        randomness=seeded(1),
    )
    assert (
        generation.tokens
        == generate_autoregressive(
            target.model, PROMPTS, max_new_tokens=12, sampling=GREEDY, randomness=seeded(0)
        ).tokens
    )
    assert target.widths == [4 + tree.size] + [tree.size] * (generation.stats.iterations - 1)


DYNAMIC = {"2x3 to 6": DynamicTree(2, 3, 6), "3x4 to 12": DynamicTree(3, 4, 12), "chain-like": DynamicTree(1, 4, 5)}


@pytest.mark.parametrize("spec", sorted(DYNAMIC))
@pytest.mark.parametrize("batch", (1, 4))
def test_greedy_dynamic_tree_against_autoregressive(spec, batch):
    """EAGLE-2's dynamic trees (each row its own, regrown every iteration) give greedy decoding's tokens with every
    draft; the target as its own draft accepts a whole path of ``depth`` nodes every time."""
    target = tiny_gpt(0)
    reference = generate_autoregressive(
        target, PROMPTS[:batch], max_new_tokens=20, sampling=GREEDY, randomness=seeded(0)
    )
    history_drafts = (TabularModel.random(torch.Generator().manual_seed(2), VOCAB, 1), CopyDraft(VOCAB, max_match=3))
    config = TreeConfig(DYNAMIC[spec], GREEDY)
    for draft in (tiny_gpt(1, d_model=16, n_layer=1), *history_drafts, target):
        generation = generate_tree(
            target, draft, PROMPTS[:batch], max_new_tokens=20, config=config, randomness=seeded(1)
        )
        assert generation.tokens == reference.tokens[:batch], (spec, type(draft).__name__)
    assert set(n for iteration in generation.stats.accepted_per_iteration[:-1] for n in iteration) == {
        config.tree.depth
    }


def test_dynamic_tree_shape_against_eagle2():
    """One row's tree by hand: a unigram draft with q = (0.5, 0.3, 0.2) at every node, branching 2, depth 3,
    budget 6. Depth 1: tokens 0 (log 0.5) and 1 (log 0.3); both expanded: 00 (.25), 01 (.15), 10 (.15), 11
    (.09); the best two, 00 and 01, expanded: 000 (.125), 001 (.075), 010 (.075), 011 (.045). Reranked, the best
    five: 0, 1, 00, 01, 10 (01 and 10 tie: kept in drafting order), numbered depth by depth."""
    from decoders.dynamic_tree import draft_dynamic

    draft = TabularModel(torch.log(torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)), 0)
    state = draft.new_state(1)
    root = draft.forward(torch.tensor([[2]]), state)[:, 0]  # fed the last committed token, as feed_draft does
    tokens, parents, q, scores = draft_dynamic(
        draft, state, root, torch.tensor([2]), DynamicTree(2, 3, 6), Sampling(1.0)
    )
    assert tokens.tolist() == [[2, 0, 1, 0, 1, 0]] and parents.tolist() == [[-1, 0, 0, 1, 1, 2]]
    assert q[0, :5].sum(-1).tolist() == [1.0] * 5 and q[0, 5].abs().sum() == 0  # 10 was not expanded
    assert torch.allclose(scores.exp(), torch.tensor([[1.0, 0.5, 0.3, 0.25, 0.15, 0.15]], dtype=scores.dtype))


@pytest.mark.parametrize("temperature", (1.0, 0.7))
def test_exact_dynamic_tree_law_against_target(temperature):
    """V = 4, the law of the first 3 tokens (prefix programme) and whole runs of 2 tokens (the draft's state
    rebuilt between iterations) equal the target's within 1e-9 with a dynamic tree; EAGLE's own bugs at T = 0.7
    (the bonus from raw logits, the argmax accepted then a token drawn) move it by more than 1e-4."""
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=4).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=4).double(),
    )
    sampling = Sampling(temperature)
    config = TreeConfig(DynamicTree(2, 3, 5), sampling)
    reference = autoregressive_law(target, [1, 2], sampling, 3)
    law, branches = tree_law(target, draft, [1, 2], config, 3, progress=False)
    report = compare_laws(law, reference, method="prefix-dp", horizon=3, branches=branches)
    assert report.max_abs_difference <= 1e-9, report
    law, branches = whole_run_law(
        lambda randomness: generate_tree(
            target, draft, [[1, 2]], max_new_tokens=2, config=config, randomness=randomness
        ).tokens[0],
        progress=False,
    )
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 2), method="whole-run", horizon=2, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, report
    if temperature != 1.0:
        for name in ("tree-bonus-raw-logits", "tree-greedy-at-temperature"):
            law, branches = tree_law(target, draft, [1, 2], config, 3, step=tree_mutant(name).step, progress=False)
            report = compare_laws(law, reference, method="prefix-dp", horizon=3, branches=branches)
            assert report.max_abs_difference > 1e-4, (name, report.max_abs_difference)


@pytest.mark.parametrize("verifier", sorted(TREE_RULES))
@pytest.mark.parametrize("temperature", (1.0, 0.7))
def test_exact_tree_law_against_target(verifier, temperature):
    """V = 4: the law of the first 3 tokens, summed over every branch of the decoder's draws iteration by
    iteration (the prefix programme), equals the target's within 1e-9."""
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=4).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=4).double(),
    )
    sampling = Sampling(temperature)
    config = TreeConfig(Tree((-1, 0, 0, 1)), sampling, verifier)
    law, branches = tree_law(target, draft, [1, 2], config, 3, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 3), method="prefix-dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, (verifier, report)


@pytest.mark.parametrize("verifier", sorted(TREE_RULES))
def test_exact_chain_tree_law_against_target(verifier):
    """A chain-shaped tree under every verifier at T = 1 (the chain decoder's law for RRS and K-SEQ, a tree of width
    1 for target-only): the law of the first 3 tokens equals the target's within 1e-9, V = 4."""
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=4).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=4).double(),
    )
    config = TreeConfig(Tree.chain(2), Sampling(1.0), verifier)
    law, branches = tree_law(target, draft, [1, 2], config, 3, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], Sampling(1.0), 3), method="prefix-dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, (verifier, report)


@pytest.mark.parametrize(
    "verifier", [v if v == "rrs" else pytest.param(v, marks=pytest.mark.slow) for v in sorted(TREE_RULES)]
)
def test_exact_tree_whole_runs_against_target(verifier):
    """Whole runs (the commits between iterations covered): V = 3, 2 tokens."""
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=3).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=3).double(),
    )
    config = TreeConfig(Tree((-1, 0, 0)), Sampling(1.0), verifier)
    law, branches = whole_run_law(
        lambda randomness: generate_tree(
            target, draft, [[1, 2]], max_new_tokens=2, config=config, randomness=randomness
        ).tokens[0],
        progress=False,
    )
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], Sampling(1.0), 2), method="whole-run", horizon=2, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, (verifier, report)


def test_exact_tree_law_negative_control():
    """The comparison can fail: the decoder at T = 1 held against the target's law at T = 0.7."""
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=4).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=4).double(),
    )
    law, branches = tree_law(
        target, draft, [1, 2], TreeConfig(Tree((-1, 0, 0, 1)), Sampling(1.0), "rrs"), 3, progress=False
    )
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], Sampling(0.7), 3), method="prefix-dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference > 1e-3


@pytest.mark.parametrize("name", [m.name for m in TREE_MUTANTS])
def test_tree_mutants_fail_the_exact_audit(name):
    """Every planted tree bug (each names the engine that shipped it) moves the law by more than 1e-4 under the
    verifier and sampling where it shows, while the reference step passes there."""
    planted = tree_mutant(name)
    target, draft = (
        tiny_gpt(0, d_model=8, n_layer=1, vocab=4).double(),
        tiny_gpt(5, d_model=8, n_layer=1, vocab=4).double(),
    )
    config = TreeConfig(Tree((-1, 0, 0, 0, 1)), planted.shows_with, planted.verifier)
    reference = autoregressive_law(target, [1, 2], planted.shows_with, 2)
    for step, wrong in ((planted.step, True), (REFERENCE_TREE_STEP, False)):
        law, branches = tree_law(target, draft, [1, 2], config, 2, step=step, progress=False)
        report = compare_laws(law, reference, method="prefix-dp", horizon=2, branches=branches)
        assert (report.max_abs_difference > 1e-4) == wrong, (name, planted.engine, report.max_abs_difference)


def test_flat_positions_break_greedy_equality():
    """The flat-position bug changes greedy output too (the issue: greedy equality must catch it), on the shipped
    pair, whose trained position embeddings matter."""
    from decoders import zoo
    from decoders.bench.prompts import text_windows
    from decoders.models.corpus import load_corpus

    target, draft = zoo.load_pair("transformer")
    prompts = text_windows(load_corpus().held_out, 2, 32, seed=3)
    reference = generate_autoregressive(target, prompts, max_new_tokens=24, sampling=GREEDY, randomness=seeded(0))
    config = TreeConfig(Tree.kary(3, 2), GREEDY, "target-only")
    planted = generate_tree(
        target,
        draft,
        prompts,
        max_new_tokens=24,
        config=config,
        randomness=seeded(1),
        step=tree_mutant("tree-flat-positions").step,
    )
    correct = generate_tree(target, draft, prompts, max_new_tokens=24, config=config, randomness=seeded(1))
    assert correct.tokens == reference.tokens and planted.tokens != reference.tokens
