"""The multi-draft and tree simulators (real draws) against the closed forms of docs/theory-trees.md §12.

Acceptance and tokens per call must sit within 4 standard errors of theory (a correct simulator leaves the
band with probability about 6.3e-5 per comparison); emitted tokens must follow p by chi-square at level
1e-4. The negative control: a verifier that skips the residual update fails the chi-square test.
"""

import numpy as np
import pytest
from sim_checks import CHI_SQUARE_LEVEL, assert_within_band, chi_square_p_value

from sims._stats import mean_estimate
from sims.trees import simulate_multidraft, simulate_tree, simulate_tree_ranks, verify_draws
from spectheory import multidraft
from spectheory.trees import Tree, expected_tokens_candidates, expected_tokens_rank

PAIRS = {
    "docs": (np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])),
    "sparse": (np.array([0.0, 0.6, 0.1, 0.3, 0.0]), np.array([0.4, 0.1, 0.0, 0.2, 0.3])),
    "close": (np.array([0.25, 0.25, 0.3, 0.2]), np.array([0.3, 0.2, 0.25, 0.25])),
}


@pytest.mark.parametrize("verifier", sorted(multidraft.TREE_RULES))
@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("k", (1, 2, 3))
def test_multidraft_against_theory(verifier, pair, k):
    p, q = PAIRS[pair]
    result = simulate_multidraft(np.random.default_rng(k), p, q, k, verifier, 40_000)
    ranks = multidraft.rank_acceptance(verifier, p, q, k)
    assert_within_band(result.acceptance, ranks.sum(), verifier=verifier, pair=pair, k=k)
    for j in range(1, k + 1):
        share = mean_estimate(np.repeat([1.0, 0.0], [result.ranks[j], result.ranks.sum() - result.ranks[j]]))
        assert_within_band(share, ranks[j - 1], verifier=verifier, pair=pair, k=k, rank=j)
    assert chi_square_p_value(result.emitted, p) > CHI_SQUARE_LEVEL


def test_multidraft_without_residual_update_fails_chi_square():
    """Negative control: RRS that keeps testing against p after a rejection (no residual) emits too much of
    the tokens q drafts often, and the chi-square test sees it."""
    p, q = PAIRS["docs"]
    rng = np.random.default_rng(0)
    trials, emitted = 40_000, []
    for _ in range(trials // 1000):
        x = rng.choice(3, size=(1000, 2), p=q)
        u = rng.random((1000, 2))
        first = u[:, 0] < p[x[:, 0]] / q[x[:, 0]]
        second = ~first & (u[:, 1] < p[x[:, 1]] / q[x[:, 1]])  # wrong: p, not the residual
        residual = np.maximum(p - q, 0) / np.maximum(p - q, 0).sum()
        rest = rng.choice(3, size=1000, p=residual)
        emitted.append(np.where(first, x[:, 0], np.where(second, x[:, 1], rest)))
    counts = np.bincount(np.concatenate(emitted), minlength=3)
    assert chi_square_p_value(counts, p) < CHI_SQUARE_LEVEL
    correct, _ = verify_draws(rng, p, q, 2, "rrs", trials)
    assert chi_square_p_value(np.bincount(correct, minlength=3), p) > CHI_SQUARE_LEVEL


def test_tree_ranks_against_theory():
    rng = np.random.default_rng(7)
    for trial in range(10):
        tree = Tree((-1,) + tuple(int(rng.integers(0, i)) for i in range(1, int(rng.integers(2, 16)))))
        acceptance = rng.dirichlet(np.ones(4))[:3]
        estimate = simulate_tree_ranks(np.random.default_rng(trial), tree, acceptance, 40_000)
        assert_within_band(estimate, expected_tokens_rank(tree, acceptance), tree=tree.parents)


@pytest.mark.parametrize("verifier", ("rrs", "rrs-without-replacement", "target-only"))
def test_tree_with_draws_against_rank_model(verifier):
    """Children drafted and verified at every reached node, one (p, q) for all nodes: the rank model at the
    verifier's rank frequencies (which do not depend on how many siblings follow)."""
    p, q = PAIRS["sparse"]
    for seed, tree in enumerate((Tree.kary(2, 3), Tree((-1, 0, 0, 0, 1, 1, 2, 4, 7)), Tree.chain(5))):
        acceptance = multidraft.rank_acceptance(verifier, p, q, 3)
        estimate = simulate_tree(np.random.default_rng(seed), tree, p, q, verifier, 30_000)
        assert_within_band(estimate, expected_tokens_rank(tree, acceptance), verifier=verifier, tree=tree.parents)


def test_kary_tree_with_kseq_against_rank_model():
    p, q = PAIRS["close"]
    for k in (2, 3):
        estimate = simulate_tree(np.random.default_rng(k), Tree.kary(k, 2), p, q, "kseq", 30_000)
        assert_within_band(estimate, expected_tokens_rank(Tree.kary(k, 2), multidraft.kseq(p, q, k)), k=k)


def test_candidates_with_context_laws_against_path_probability():
    """Target-only with a law per node (the target after the node's path): tokens per call against the
    closed form P(node) = p(path), the candidates being each node's top draft tokens."""
    rng = np.random.default_rng(11)
    V = 5
    tree = Tree((-1, 0, 0, 0, 1, 1, 2, 4))
    p, q = rng.dirichlet(np.ones(V), size=tree.size), rng.dirichlet(np.ones(V), size=tree.size)
    tokens = [0] * tree.size
    laws = {(): p[0]}
    for node in range(tree.size):
        order = np.argsort(-q[node], kind="stable")
        for child, token in zip(tree.children(node), order):
            tokens[child] = int(token)
    for node in range(1, tree.size):
        laws[tuple(tokens[i] for i in tree.path(node))] = p[node]
    estimate = simulate_tree(rng, tree, p, q, "target-only", 40_000)
    assert_within_band(estimate, expected_tokens_candidates(tree, tokens, lambda path: laws[path]))
