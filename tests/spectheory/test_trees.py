"""Draft trees (docs/theory-trees.md §12): expected tokens against an enumeration of where acceptance stops, the
k-ary closed form against the rank sum, the dynamic programme against brute force over every tree, and the
hardware-aware optimum against Theorem 3.8's optimal gamma on a chain."""

import numpy as np
import pytest

from spectheory import speedup
from spectheory.optimum import TIE_RTOL
from spectheory.trees import (
    Tree,
    best_first_tree,
    expected_tokens_candidates,
    expected_tokens_kary,
    expected_tokens_rank,
    hardware_optimal_tree,
    optimal_tree,
    optimal_trees,
)


def stop_enumeration(tree, acceptance):
    """E[tokens] = sum over nodes v of P(acceptance ends at v) (depth(v) + 1): the walk reaches v with the
    product of a_rank on its path and stops there unless one of v's children is accepted."""
    a = list(acceptance) + [0.0] * tree.size
    total = 0.0
    for v in range(tree.size):
        reach = np.prod([a[tree.ranks[u] - 1] for u in tree.path(v)])
        leave = sum(a[tree.ranks[child] - 1] for child in tree.children(v))
        total += reach * (1 - leave) * (tree.depths[v] + 1)
    return total


def random_tree(rng, nodes):
    return Tree((-1,) + tuple(int(rng.integers(0, i)) for i in range(1, nodes)))


def random_rank_acceptance(rng, k):
    return rng.dirichlet(np.ones(k + 1))[:k]  # sums to below 1


def test_rank_model_against_stop_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(200):
        tree = random_tree(rng, int(rng.integers(1, 14)))
        acceptance = random_rank_acceptance(rng, int(rng.integers(1, 5)))
        assert expected_tokens_rank(tree, acceptance) == pytest.approx(stop_enumeration(tree, acceptance), abs=1e-12)


@pytest.mark.parametrize("k", (1, 2, 3))
@pytest.mark.parametrize("depth", (0, 1, 2, 4))
def test_kary_closed_form_against_rank_sum(k, depth):
    acceptance = (0.5, 0.2, 0.1)[:k]
    assert float(expected_tokens_kary(sum(acceptance), depth)) == pytest.approx(
        expected_tokens_rank(Tree.kary(k, depth), acceptance), abs=1e-12
    )
    assert float(expected_tokens_kary(1.0, depth)) == depth + 1


def test_chain_against_eq_1():
    for alpha in (0.1, 0.5, 0.9):
        for gamma in range(9):
            assert expected_tokens_rank(Tree.chain(gamma), (alpha,)) == pytest.approx(
                float(speedup.expected_tokens(alpha, gamma)), abs=1e-12
            )


def test_candidates_against_enumeration_of_target_draws():
    """Deterministic candidates, target-only rule: P(node) = the target's probability of its path, against
    summing over every sequence of target draws (the rule is equivalent to y ~ p, follow the child y)."""
    rng = np.random.default_rng(1)
    V = 4
    table = {}

    def target(path):
        if path not in table:
            table[path] = rng.dirichlet(np.ones(V))
        return table[path]

    for _ in range(30):
        tree = random_tree(rng, int(rng.integers(1, 10)))
        if any(len(tree.children(node)) > V for node in range(tree.size)):
            continue
        tokens = [0] * tree.size
        for node in range(tree.size):
            for child, token in zip(tree.children(node), rng.permutation(V)):
                tokens[child] = int(token)
        assert expected_tokens_candidates(tree, tokens, target) == pytest.approx(
            _stopped_expectation(tree, tokens, target, V), abs=1e-12
        )


def _stopped_expectation(tree, tokens, target, V):
    """E[accepted + 1] by recursion over the target's draw at each reached node."""

    def visit(node, path, weight):
        total = 0.0
        for y in range(V):
            w = weight * target(path)[y]
            nxt = [child for child in tree.children(node) if tokens[child] == y]
            total += visit(nxt[0], path + (y,), w) if nxt else w * (tree.depths[node] + 1)
        return total

    return visit(0, (), 1.0)


def all_ordered_trees(nodes):
    """Every tree of ``nodes`` nodes (children ordered): each node after the root picks a parent among the
    nodes on the rightmost path, so every ordered tree appears once."""

    def grow(parents, depths):
        if len(parents) == nodes:
            yield Tree(tuple(parents))
            return
        rightmost, node = [], len(parents) - 1
        while node >= 0:
            rightmost.append(node)
            node = parents[node]
        for parent in rightmost:
            yield from grow(parents + [parent], depths + [depths[parent] + 1])

    yield from grow([-1], [0])


def test_ordered_tree_count_against_catalan():
    assert [sum(1 for _ in all_ordered_trees(n)) for n in range(1, 8)] == [1, 1, 2, 5, 14, 42, 132]


def test_programme_against_brute_force_over_every_tree():
    """Sequoia's programme equals the best of every ordered tree of up to 8 nodes (root included) under
    random rank acceptance, monotone or not, with and without a depth cap."""
    rng = np.random.default_rng(2)
    trees = {n: list(all_ordered_trees(n)) for n in range(1, 9)}
    for _trial in range(12):
        acceptance = random_rank_acceptance(rng, int(rng.integers(1, 5)))
        for cap in (None, 1, 2, 3):
            found = optimal_trees(acceptance, 8, cap)
            for n in range(1, 9):
                allowed = [t for m in range(1, n + 1) for t in trees[m] if cap is None or t.depth <= cap]
                brute = max(expected_tokens_rank(t, acceptance) for t in allowed)
                tree, value = found[n]
                assert value == pytest.approx(brute, abs=1e-12), (acceptance, cap, n)
                assert expected_tokens_rank(tree, acceptance) == pytest.approx(value, abs=1e-12)
                assert tree.size <= n and (cap is None or tree.depth <= cap)


def test_best_first_against_programme_for_decreasing_acceptance():
    rng = np.random.default_rng(4)
    for _ in range(30):
        acceptance = np.sort(random_rank_acceptance(rng, int(rng.integers(1, 6))))[::-1]
        for nodes in (1, 2, 5, 16, 40):
            tree, value = best_first_tree(acceptance, nodes)
            assert tree.size == nodes  # the programme's optimum may stop short of the budget by a tie (TIE_RTOL)
            assert value == pytest.approx(optimal_tree(acceptance, nodes)[1], rel=TIE_RTOL, abs=1e-12)


def test_hardware_optimum_on_a_chain_against_theorem_3_8():
    """One child per node, t_draft = c t_step and t_verify = t_step: the best budget is Theorem 3.8's optimal
    gamma plus one, with its speedup."""
    for alpha, c in ((0.8, 0.05), (0.6, 0.2), (0.9, 0.01), (0.3, 0.5)):
        best, per_budget = hardware_optimal_tree((alpha,), t_step=1.0, t_draft=c, t_verify=[1.0] * 40)
        gamma = int(speedup.optimal_gamma(alpha, c, 39))
        assert best.tree.size - 1 == gamma
        assert best.speedup == pytest.approx(max(1.0, float(speedup.walltime_improvement(alpha, gamma, c))), rel=1e-12)


def test_hardware_optimum_against_its_budgets():
    """The best choice is the fastest of the per-budget choices; a verify cost growing with the nodes
    shrinks the tree."""
    acceptance = (0.6, 0.2, 0.1)
    flat, _ = hardware_optimal_tree(acceptance, t_step=1.0, t_draft=0.02, t_verify=[1.0] * 32)
    steep, budgets = hardware_optimal_tree(
        acceptance, t_step=1.0, t_draft=0.02, t_verify=[1.0 + 0.05 * k for k in range(32)]
    )
    assert steep.speedup == max(choice.speedup for choice in budgets.values())
    assert steep.tree.size < flat.tree.size and steep.speedup < flat.speedup


def test_tree_errors():
    with pytest.raises(ValueError, match=r"parents\[i\] must be in \[0, i\)"):
        Tree((-1, 0, 3))
    with pytest.raises(ValueError, match="parents must start with -1"):
        Tree((0, 0))
    with pytest.raises(ValueError, match="must sum to at most 1"):
        expected_tokens_rank(Tree.chain(2), (0.7, 0.5))
    with pytest.raises(ValueError, match="repeat a token"):
        expected_tokens_candidates(Tree((-1, 0, 0)), [0, 1, 1], lambda path: np.full(2, 0.5))
    with pytest.raises(ValueError, match="t_verify must cover k = 1..nodes = 8"):
        hardware_optimal_tree((0.5,), t_step=1.0, t_draft=0.1, t_verify=[1.0] * 4, nodes=8)
