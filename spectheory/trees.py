"""Draft trees: their representation, expected tokens per target call, the optimal tree (docs/theory-trees.md §12).

A tree is a parent array over nodes: node 0 is the last committed token, ``parents[i] < i`` for every other
node, and a node's children are verified in the order of their indices (its first child has rank 1). One
target call scores every node; the accepted nodes form a path from the root, and the call emits them plus
one token drawn at the last of them, so

    E[tokens per call] = 1 + sum over nodes i > 0 of P(node i accepted).

* Rank model (Sequoia): a_j = P(a node's j-th child is the one accepted | the node was accepted), rank
  frequencies with sum_j a_j <= 1 (``spectheory.multidraft`` gives them for each verifier). P(node) is the
  product of a_rank along its path.
* Deterministic candidates with the target-only rule: P(node) is the target's probability of its path.
* The full k-ary tree of depth d under the rank model: level i holds P_k^i in all, P_k = a_1 + ... + a_k, so
  E = (1 - P_k^(d + 1)) / (1 - P_k); the chain (k = 1) gives Eq. 1 at alpha = a_1.

The optimal tree under a node budget n (root included) and a depth cap is Sequoia's dynamic programme over
T(m, l, b), the best value of a subtree of m nodes, l levels and b children at its root:
T(1, l, 0) = 1, T(m, l, 1) = 1 + a_1 T*(m - 1, l - 1), T(m, l, b) = max over 1 <= y < m of
T(y, l, b - 1) + a_b T*(m - y, l - 1), T*(m, l) = max_b T(m, l, b). With costs, the hardware-aware tree
maximises T*(n, l) t_step / (depth t_draft + t_verify(n) + t_iteration) over n and l, one draft call per level.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

import numpy as np

from plumbing.validation import as_int, as_positive_int, as_probability
from spectheory.costs import forecast_speedup, width_priced
from spectheory.optimum import beats, best_choice, first_best

__all__ = [
    "Tree",
    "path_products",
    "expected_tokens_rank",
    "expected_tokens_candidates",
    "expected_tokens_kary",
    "optimal_trees",
    "optimal_tree",
    "best_first_tree",
    "TreeChoice",
    "hardware_optimal_tree",
    "check_rank_acceptance",
]


@dataclass(frozen=True)
class Tree:
    """``parents[0] = -1`` (the root, the last committed token); ``0 <= parents[i] < i`` otherwise."""

    parents: tuple

    def __post_init__(self) -> None:
        parents = tuple(int(parent) for parent in self.parents)
        if not parents or parents[0] != -1:
            raise ValueError(f"parents must start with -1 (the root), got {list(self.parents)[:8]}")
        bad = [i for i, parent in enumerate(parents[1:], start=1) if not 0 <= parent < i]
        if bad:
            raise ValueError(
                f"parents[i] must be in [0, i) for every node i > 0, got parents[{bad[0]}] = {parents[bad[0]]}"
            )
        object.__setattr__(self, "parents", parents)

    @classmethod
    def chain(cls, gamma: int) -> "Tree":
        """gamma draft tokens in a line: today's speculative decoding."""
        return cls((-1,) + tuple(range(as_int("gamma", gamma, low=0))))

    @classmethod
    def kary(cls, k: int, depth: int) -> "Tree":
        """Every node to ``depth`` has k children (breadth first)."""
        k, depth = as_positive_int("k", k), as_int("depth", depth, low=0)
        parents, level = [-1], [0]
        for _ in range(depth):
            nxt = []
            for node in level:
                for _ in range(k):
                    parents.append(node)
                    nxt.append(len(parents) - 1)
            level = nxt
        return cls(tuple(parents))

    @property
    def size(self) -> int:
        """Nodes, the root included: the positions one verify call scores."""
        return len(self.parents)

    @property
    def depths(self) -> tuple:
        out = [0] * self.size
        for i in range(1, self.size):
            out[i] = out[self.parents[i]] + 1
        return tuple(out)

    @property
    def depth(self) -> int:
        return max(self.depths)

    @property
    def ranks(self) -> tuple:
        """Each node's rank among its siblings, from 1 (0 for the root)."""
        seen, out = {}, [0]
        for parent in self.parents[1:]:
            seen[parent] = seen.get(parent, 0) + 1
            out.append(seen[parent])
        return tuple(out)

    def children(self, node: int) -> tuple:
        return tuple(i for i in range(1, self.size) if self.parents[i] == node)

    def path(self, node: int) -> tuple:
        """The nodes from the root's first child down to ``node`` (empty for the root)."""
        out = []
        while node > 0:
            out.append(node)
            node = self.parents[node]
        return tuple(reversed(out))

    def drawing(self) -> str:
        """One line per node, indented by depth: ``node (rank r)``."""
        lines, depths, ranks = [], self.depths, self.ranks

        def visit(node: int) -> None:
            lines.append("  " * depths[node] + ("root" if node == 0 else f"{node} (rank {ranks[node]})"))
            for child in self.children(node):
                visit(child)

        visit(0)
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"parents": list(self.parents), "nodes": self.size, "depth": self.depth}


def check_rank_acceptance(acceptance) -> np.ndarray:
    """a_1..a_k as probabilities whose sum is at most 1 (they are frequencies of disjoint events)."""
    a = np.atleast_1d(as_probability("acceptance", acceptance)).astype(np.float64)
    if a.ndim != 1 or len(a) == 0:
        raise ValueError(f"acceptance must be a non-empty vector a_1..a_k, got shape {a.shape}")
    if a.sum() > 1 + 1e-9:
        raise ValueError(f"acceptance a_1..a_k are rank frequencies and must sum to at most 1, got sum {a.sum():.6g}")
    return a


def path_products(tree: Tree, acceptance) -> np.ndarray:
    """P(node accepted) under the rank model: the product of a_rank along the path (1 at the root); ranks
    beyond len(acceptance) have rate 0. ``[nodes]``"""
    a = check_rank_acceptance(acceptance)
    rates = np.concatenate([[1.0], a, np.zeros(max(tree.ranks) + 1)])
    out = np.ones(tree.size)
    for i, (parent, rank) in enumerate(zip(tree.parents[1:], tree.ranks[1:]), start=1):
        out[i] = out[parent] * rates[rank]
    return out


def expected_tokens_rank(tree: Tree, acceptance) -> float:
    """E[tokens per target call] = sum of ``path_products`` (the root's 1 is the bonus/correction token)."""
    return float(path_products(tree, acceptance).sum())


def expected_tokens_candidates(tree: Tree, tokens, target: Callable[[tuple], np.ndarray]) -> float:
    """E[tokens per call] for deterministic candidates verified by the target-only rule: node i holds token
    ``tokens[i]`` (the root's is ignored), siblings distinct; ``target(path tokens)`` is p after that path
    ``[V]``. P(node) = the product of p(token | the path before it)."""
    if len(tokens) != tree.size:
        raise ValueError(f"tokens must give one token per node ({tree.size}), got {len(tokens)}")
    for node in range(tree.size):
        siblings = [tokens[child] for child in tree.children(node)]
        if len(set(siblings)) < len(siblings):
            raise ValueError(f"the children of node {node} repeat a token: {siblings}")
    probability = np.ones(tree.size)
    for i in range(1, tree.size):
        parent = tree.parents[i]
        before = tuple(tokens[j] for j in tree.path(parent))
        probability[i] = probability[parent] * float(target(before)[tokens[i]])
    return float(probability.sum())


def expected_tokens_kary(p_k, depth) -> np.ndarray:
    """(1 - P_k^(d + 1)) / (1 - P_k), d + 1 at P_k = 1: the full k-ary tree of depth d, P_k = a_1 + ... + a_k."""
    p_k = as_probability("p_k", p_k)
    depth = np.asarray(depth, dtype=np.float64)
    if np.any(depth < 0) or np.any(depth != np.floor(depth)):
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (1 - p_k ** (depth + 1)) / (1 - p_k)
    return np.where(p_k == 1, depth + 1, value)


@dataclass(frozen=True)
class _Programme:
    """Sequoia's table for one acceptance vector: best[l][m] = T*(m, l) (-inf where impossible) with the
    choices that rebuild each tree."""

    acceptance: np.ndarray
    best: np.ndarray  # [levels + 1, nodes + 1]
    children: np.ndarray  # [levels + 1, nodes + 1] the b of T*
    splits: np.ndarray  # [levels + 1, k + 1, nodes + 1] the y of T(m, l, b)

    def tree(self, nodes: int, levels: int) -> Tree:
        parents = [-1]

        def build(parent: int, m: int, l: int) -> None:
            b, sizes = int(self.children[l, m]), []
            if b == 0:
                return
            for rank in range(b, 1, -1):  # peel the last child's subtree off, rank by rank
                y = int(self.splits[l, rank, m])
                sizes.append(m - y)
                m = y
            sizes.append(m - 1)  # the first child's subtree
            for size in reversed(sizes):
                parents.append(parent)
                build(len(parents) - 1, size, l - 1)

        build(0, nodes, levels)
        return Tree(tuple(parents))


def _programme(acceptance, nodes: int, levels: int) -> _Programme:
    """Fill Sequoia's table up to ``nodes`` nodes and ``levels`` levels (depth cap + 1), vectorised over the
    split y: each T(., l, b) is a max-plus convolution of T(., l, b - 1) with a_b T*(., l - 1)."""
    a = check_rank_acceptance(acceptance)
    k = len(a)
    best = np.full((levels + 1, nodes + 1), -np.inf)
    children = np.zeros((levels + 1, nodes + 1), dtype=np.int64)
    splits = np.zeros((levels + 1, k + 1, nodes + 1), dtype=np.int64)
    best[1:, 1] = 1.0
    m = np.arange(nodes + 1)
    y = np.arange(nodes + 1)
    valid = (y[None, :] >= 1) & (y[None, :] < m[:, None])  # [m, y]
    for l in range(2, levels + 1):
        below = best[l - 1]
        current = np.full(nodes + 1, -np.inf)
        current[1] = 1.0  # b = 0: the root alone
        best[l, 1] = 1.0
        for b in range(1, k + 1):
            subtree = np.where(np.isfinite(below), a[b - 1] * np.where(np.isfinite(below), below, 0.0), -np.inf)
            if b == 1:
                value = np.full(nodes + 1, -np.inf)
                value[2:] = 1.0 + subtree[1:nodes]
                choice = np.zeros(nodes + 1, dtype=np.int64)
            else:
                rest = m[:, None] - y[None, :]
                table = np.where(valid, current[None, :] + subtree[np.clip(rest, 0, nodes)], -np.inf)
                choice = np.argmax(table, axis=1)
                value = table[m, choice]
            splits[l, b] = choice
            better = value > best[l] + 1e-15
            best[l] = np.where(better, value, best[l])
            children[l] = np.where(better, b, children[l])
            current = value
    return _Programme(a, best, children, splits)


def _levels(nodes: int, depth: int | None) -> int:
    """Levels of the programme (root included) for a budget and a depth cap (None: no cap)."""
    nodes = as_positive_int("nodes", nodes)
    depth = nodes - 1 if depth is None else as_int("depth", depth, low=0)
    return min(depth, nodes - 1) + 1


def optimal_trees(acceptance, nodes: int, depth: int | None = None) -> dict:
    """{n: (tree, expected tokens)} for every budget n = 1..nodes (root included) under the depth cap
    (None: nodes - 1, no cap): Sequoia's dynamic programme under the rank model."""
    levels = _levels(nodes, depth)
    programme = _programme(acceptance, nodes, levels)
    out = {}
    for n in range(1, nodes + 1):  # exactly n nodes may be impossible (too few ranks under the cap): at most n
        m = first_best(programme.best[levels, 1 : n + 1]) + 1
        out[n] = (programme.tree(m, levels), float(programme.best[levels, m]))
    return out


def optimal_tree(acceptance, nodes: int, depth: int | None = None) -> tuple[Tree, float]:
    """The tree of at most ``nodes`` nodes (root included) and depth at most ``depth`` with the largest
    expected tokens per call under the rank model, and that value."""
    return optimal_trees(acceptance, nodes, depth)[as_positive_int("nodes", nodes)]


def best_first_tree(acceptance, nodes: int) -> tuple[Tree, float]:
    """The ``nodes`` nodes of largest path product, grown best first (each new node is the first child of a
    node or the next sibling of one): optimal without a depth cap when a_1 >= a_2 >= ... (docs/theory-trees.md §12)."""
    a = check_rank_acceptance(acceptance)
    nodes = as_positive_int("nodes", nodes)
    parents, products = [-1], [1.0]
    frontier = [(-a[0], 0, 0, 1)]  # (-product, tie-break, parent, rank)
    counter = 1
    while len(parents) < nodes and frontier:
        negative, _, parent, rank = heapq.heappop(frontier)
        parents.append(parent)
        products.append(-negative)
        node = len(parents) - 1
        heapq.heappush(frontier, (negative * a[0], counter, node, 1))
        if rank < len(a):
            heapq.heappush(frontier, (-products[parent] * a[rank], counter + 1, parent, rank + 1))
        counter += 2
    return Tree(tuple(parents)), float(sum(products))


@dataclass(frozen=True)
class TreeChoice:
    """The best tree under costs: its expected tokens per call, seconds per call and speedup."""

    tree: Tree
    expected_tokens: float
    seconds_per_call: float
    speedup: float

    def as_dict(self) -> dict:
        return {
            "tree": self.tree.as_dict(),
            "expected_tokens": self.expected_tokens,
            "seconds_per_call": self.seconds_per_call,
            "speedup": self.speedup,
        }


def hardware_optimal_tree(
    acceptance,
    *,
    t_step: float,
    t_draft: float,
    t_verify,
    t_iteration: float = 0.0,
    nodes: int | None = None,
    depth: int | None = None,
) -> tuple[TreeChoice, dict]:
    """The tree maximising T*(n, l) t_step / (depth t_draft + t_verify(n) + t_iteration) over budgets n up to
    ``nodes`` (default len(t_verify)) and depth caps up to ``depth``: (the best choice, {n: best choice at
    n}). n = 1 is autoregressive decoding, speedup 1."""
    t_verify = np.asarray(t_verify, dtype=np.float64)
    if t_verify.ndim != 1 or len(t_verify) < 1 or not np.all(np.isfinite(t_verify)) or np.any(t_verify <= 0):
        raise ValueError("t_verify must be positive seconds for k = 1, 2, ... positions")
    for name, value in (("t_step", t_step), ("t_draft", t_draft), ("t_iteration", t_iteration)):
        if not np.isfinite(value) or value < 0 or (name == "t_step" and value == 0):
            raise ValueError(
                f"{name} must be {'positive' if name == 't_step' else 'non-negative'} seconds, got {value!r}"
            )
    nodes = len(t_verify) if nodes is None else as_positive_int("nodes", nodes)
    if nodes > len(t_verify):
        raise ValueError(f"t_verify must cover k = 1..nodes = {nodes} positions, got {len(t_verify)} values")
    levels = _levels(nodes, depth)
    programme = _programme(acceptance, nodes, levels)
    per_budget = {1: TreeChoice(Tree((-1,)), 1.0, t_step, 1.0)}
    for l in range(2, levels + 1):
        for n in range(2, nodes + 1):
            if not np.isfinite(programme.best[l, n]):
                continue
            tree, value = programme.tree(n, l), float(programme.best[l, n])
            other = tree.depth * t_draft + t_iteration
            speedup = forecast_speedup(value, t_step, width_priced(t_verify, {n: 1.0}), other)
            choice = TreeChoice(tree, value, float(t_verify[n - 1] + other), speedup)
            if n not in per_budget or beats(choice.speedup, per_budget[n].speedup):
                per_budget[n] = choice
    best = best_choice(per_budget.values(), lambda choice: choice.speedup, lambda choice: choice.tree.size)
    return best, per_budget
