"""Multi-draft verification and draft trees with real draws (docs/theory-trees.md §12), vectorised over trials.

``simulate_multidraft`` drafts k candidates per trial (i.i.d. from q, without replacement, or the draft's
top-k) and verifies them with the rule of ``spectheory.multidraft``, drawing every uniform: the emitted
tokens must follow p and the accepted ranks the closed forms. ``simulate_tree_ranks`` walks a tree under
the rank model (which child is accepted, drawn from a_1..a_k), and ``simulate_tree`` verifies a tree with
tokens: at every node it reaches, a trial drafts the node's children from that node's (p, q) and runs the
verifier, stopping at the first node where no candidate is accepted. Each returns the tokens per target
call (accepted nodes + 1) as a mean with its standard error over trials. ``simulate_walk_along`` decodes a text
iteration by iteration, each iteration drawing its accepted count from the law at the position it starts at: the
tokens per call a dynamic tree's forecast (``spectheory.dynamic_trees``) must match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_distribution_pair, as_positive_int
from sims._draws import categorical
from sims._stats import Estimate, as_generator, mean_estimate, ratio_estimate
from sims.documents import BudgetCase, BudgetRow, KaryPoint, TreeBudgets, TreesDocument, VerifierCurves
from spectheory import multidraft
from spectheory.acceptance import excess
from spectheory.multidraft import TREE_RULES, kseq_correction, kseq_rho
from spectheory.trees import Tree, check_rank_acceptance, expected_tokens_rank, optimal_trees

__all__ = [
    "MultiDraftResult",
    "verify_draws",
    "simulate_multidraft",
    "simulate_tree_ranks",
    "simulate_tree",
    "simulate_walk_along",
]


def _normalised(rows: np.ndarray) -> np.ndarray:
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)


def verify_draws(
    rng: np.random.Generator, p: np.ndarray, q: np.ndarray, k: int, verifier: str, trials: int
) -> tuple[np.ndarray, np.ndarray]:
    """``trials`` independent verifications of k candidates at one position: (emitted tokens ``[trials]``,
    accepted rank ``[trials]``, 1..k, 0 where none was accepted and the token is the correction)."""
    V = len(p)
    r = np.broadcast_to(p, (trials, V)).copy()  # [N, V] the residual
    emitted = np.full(trials, -1, dtype=np.int64)
    rank = np.zeros(trials, dtype=np.int64)
    rows = np.arange(trials)
    if verifier == "kseq":
        rho = kseq_rho(p, q, k)
        for j in range(1, k + 1):
            x = categorical(rng, np.broadcast_to(q, (trials, V)))
            hit = (emitted < 0) & (rng.random(trials) * rho * q[x] < p[x])  # U < min(1, p / (rho q))
            emitted[hit], rank[hit] = x[hit], j
        left = emitted < 0
        if left.any():
            emitted[left] = categorical(rng, np.broadcast_to(kseq_correction(p, q, k), (int(left.sum()), V)))
        return emitted, rank
    if verifier == "target-only":
        for j, candidate in enumerate(np.argsort(-q, kind="stable")[:k], start=1):
            live = emitted < 0
            hit = live & (rng.random(trials) * r.sum(axis=1) < r[:, candidate])
            emitted[hit], rank[hit] = candidate, j
            r[live & ~hit, candidate] = 0.0
    else:
        draft = np.broadcast_to(q, (trials, V)).copy()  # [N, V] q_j, renormalised below
        for j in range(1, k + 1):
            live = (emitted < 0) & (draft.sum(axis=1) > 0)
            if not live.any():
                break
            q_j = _normalised(draft)
            x = categorical(rng, np.where(live[:, None], q_j, 1.0))
            hit = live & (rng.random(trials) * q_j[rows, x] < r[rows, x])  # U < min(1, r(x) / q_j(x))
            emitted[hit], rank[hit] = x[hit], j
            missed = live & ~hit
            left = excess(r, q_j)
            r = np.where(missed[:, None] & (left.sum(axis=1, keepdims=True) > 0), _normalised(left), r)
            if verifier == "rrs-without-replacement":
                draft[missed, x[missed]] = 0.0
    left = emitted < 0
    if left.any():
        emitted[left] = categorical(rng, r[left])
    return emitted, rank


@dataclass(frozen=True)
class MultiDraftResult:
    """Counts of the emitted tokens ``[V]`` and of the accepted ranks ``[k + 1]`` (index 0: none accepted), and
    the acceptance probability with its standard error."""

    emitted: np.ndarray
    ranks: np.ndarray
    acceptance: Estimate


def simulate_multidraft(rng: np.random.Generator, p, q, k: int, verifier: str, trials: int) -> MultiDraftResult:
    """``trials`` verifications of k candidates drafted and checked by ``verifier`` (``spectheory.multidraft``)."""
    rng = as_generator(rng)
    p, q = as_distribution_pair(p, q)
    k, trials = as_positive_int("k", k), as_positive_int("trials", trials)
    if verifier not in TREE_RULES:
        raise ValueError(f"verifier must be one of {sorted(TREE_RULES)}, got {verifier!r}")
    emitted, rank = verify_draws(rng, p, q, k, verifier, trials)
    return MultiDraftResult(
        np.bincount(emitted, minlength=len(p)), np.bincount(rank, minlength=k + 1), mean_estimate(rank > 0)
    )


def _child_table(tree: Tree) -> np.ndarray:
    """``[nodes, max children]``: the child of each rank, -1 where there is none."""
    width = max([len(tree.children(node)) for node in range(tree.size)] + [1])
    table = np.full((tree.size, width), -1, dtype=np.int64)
    for node in range(tree.size):
        for rank, child in enumerate(tree.children(node)):
            table[node, rank] = child
    return table


def simulate_tree_ranks(rng: np.random.Generator, tree: Tree, acceptance, trials: int) -> Estimate:
    """Tokens per call under the rank model: from each accepted node, rank j is accepted with a_j (none with
    1 - sum a), and the walk stops where that rank has no child."""
    rng = as_generator(rng)
    a = check_rank_acceptance(acceptance)
    trials = as_positive_int("trials", trials)
    children = _child_table(tree)
    bounds = np.cumsum(a)
    node = np.zeros(trials, dtype=np.int64)
    live = np.ones(trials, dtype=bool)
    for _ in range(tree.depth):
        chosen = np.searchsorted(bounds, rng.random(trials), side="right")  # rank - 1, len(a) for none
        exists = (chosen < len(a)) & (chosen < children.shape[1])
        nxt = np.where(exists, children[node, np.minimum(chosen, children.shape[1] - 1)], -1)
        live &= nxt >= 0
        node = np.where(live, nxt, node)
    return mean_estimate(np.array(tree.depths)[node] + 1)


def simulate_tree(rng: np.random.Generator, tree: Tree, p, q, verifier: str, trials: int) -> Estimate:
    """Tokens per call of ``tree`` with real draws: at each reached node v, its c children are drafted from
    (p[v], q[v]) (``[nodes, V]`` laws after v's path, or one ``[V]`` pair for every node) and verified by
    ``verifier``; the walk moves to the accepted child's node or stops. Tokens = accepted nodes + 1."""
    rng = as_generator(rng)
    p, q = as_distribution_pair(p, q)
    if p.ndim == 1:
        p, q = np.broadcast_to(p, (tree.size, len(p))), np.broadcast_to(q, (tree.size, len(q)))
    if p.shape[0] != tree.size:
        raise ValueError(f"p and q must hold one law per node ({tree.size}), got {p.shape[0]}")
    trials = as_positive_int("trials", trials)
    children = _child_table(tree)
    node = np.zeros(trials, dtype=np.int64)
    live = np.ones(trials, dtype=bool)
    for _ in range(tree.depth):
        for v in np.unique(node[live]):
            count = int((children[v] >= 0).sum())
            here = np.flatnonzero(live & (node == v))
            if count == 0:
                live[here] = False
                continue
            _, rank = verify_draws(rng, p[v], q[v], count, verifier, len(here))
            accepted = rank > 0
            node[here[accepted]] = children[v, rank[accepted] - 1]
            live[here[~accepted]] = False
    return mean_estimate(np.array(tree.depths)[node] + 1)


def simulate_walk_along(rng: np.random.Generator, accepted_laws, trials: int) -> Estimate:
    """Tokens per call of a decoder walking a text of n positions: an iteration starting at position j accepts m
    nodes with probability ``accepted_laws[j, m]`` (``[n, M]``) and emits m + 1 tokens, so the next one starts at
    j + m + 1; each trial walks the whole text (ratio of tokens to iterations over trials, delta method)."""
    rng = as_generator(rng)
    laws = np.asarray(accepted_laws, dtype=np.float64)
    if laws.ndim != 2 or len(laws) < 1 or np.any(laws < 0) or not np.allclose(laws.sum(axis=1), 1.0):
        raise ValueError(f"accepted_laws must be [positions, counts] rows of probabilities, got shape {laws.shape}")
    trials = as_positive_int("trials", trials)
    position, iterations = np.zeros(trials, dtype=np.int64), np.zeros(trials, dtype=np.int64)
    while np.any(live := position < len(laws)):
        accepted = categorical(rng, laws[position[live]])
        position[live] += accepted + 1
        iterations[live] += 1
    return ratio_estimate(np.minimum(position, len(laws)), iterations)


#: The figures' rank acceptance vectors: a strong draft, and a weaker one whose second choices matter more.
TREE_ACCEPTANCE = {"strong": (0.8, 0.1, 0.04, 0.02), "weak": (0.45, 0.2, 0.1, 0.05)}
SIMULATED_TREE_BUDGETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: Dirichlet families of the verifier figure: V tokens, the concentration of p and q, pairs per family.
VERIFIER_FAMILIES = {"Dirichlet(0.5)": 0.5, "Dirichlet(2)": 2.0}
VERIFIER_VOCABULARY, VERIFIER_PAIRS, VERIFIER_KS = 8, 100, (1, 2, 3, 4, 5)


def tree_budget_document(*, seed: int = 0, trials: int = 20_000, progress=None) -> TreeBudgets:
    """Expected tokens per call against the node budget (root included) for the chain, the full k-ary trees
    (k = 2, 3: their own sizes) and Sequoia's optimal tree, per ``TREE_ACCEPTANCE``; the optimal trees also
    simulated under the rank model (mean and standard error)."""

    rng, out = np.random.default_rng(seed), {}
    wrap = progress or (lambda items, **_: items)
    for name, acceptance in wrap(list(TREE_ACCEPTANCE.items()), desc="tree budgets"):
        trees = optimal_trees(acceptance, max(SIMULATED_TREE_BUDGETS))
        rows = []
        for budget in SIMULATED_TREE_BUDGETS:
            tree, value = trees[budget]
            simulated = simulate_tree_ranks(rng, tree, acceptance, trials)
            rows.append(
                BudgetRow(
                    budget=budget,
                    optimal=value,
                    optimal_depth=tree.depth,
                    simulated=simulated.mean,
                    simulated_se=simulated.standard_error,
                    chain=expected_tokens_rank(Tree.chain(budget - 1), acceptance),
                )
            )
        kary = {
            str(k): tuple(
                KaryPoint(nodes=Tree.kary(k, d).size, expected_tokens=expected_tokens_rank(Tree.kary(k, d), acceptance))
                for d in range(7)
                if Tree.kary(k, d).size <= max(SIMULATED_TREE_BUDGETS)
            )
            for k in (2, 3)
        }
        out[name] = BudgetCase(acceptance=list(acceptance), rows=tuple(rows), kary=kary)
    return TreeBudgets(seed=seed, trials=trials, budgets=list(SIMULATED_TREE_BUDGETS), acceptance=out)


def verifier_document(
    *, seed: int = 0, pairs: int = VERIFIER_PAIRS, ks: tuple = VERIFIER_KS, progress=None
) -> VerifierCurves:
    """Acceptance against k for every verifier, the i.i.d. optimum and SpecTr's bound, averaged over random
    pairs of each Dirichlet family (exact values per pair; ``spectheory.multidraft``)."""

    rng, families = np.random.default_rng(seed), {}
    wrap = progress or (lambda items, **_: items)
    for name, concentration in wrap(list(VERIFIER_FAMILIES.items()), desc="verifier families"):
        drawn = [
            (
                rng.dirichlet(np.full(VERIFIER_VOCABULARY, concentration)),
                rng.dirichlet(np.full(VERIFIER_VOCABULARY, concentration)),
            )
            for _ in range(pairs)
        ]
        curves = {key: [] for key in (*multidraft.TREE_RULES, "optimal-iid", "spectr-bound")}
        for k in ks:
            for key in multidraft.TREE_RULES:
                curves[key].append(float(np.mean([multidraft.rank_acceptance(key, p, q, k).sum() for p, q in drawn])))
            curves["optimal-iid"].append(float(np.mean([multidraft.optimal_iid_acceptance(p, q, k) for p, q in drawn])))
            curves["spectr-bound"].append(float(np.mean([multidraft.spectr_upper_bound(p, q, k) for p, q in drawn])))
        families[name] = curves
    return VerifierCurves(seed=seed, vocabulary=VERIFIER_VOCABULARY, pairs=pairs, ks=list(ks), families=families)


def trees_document(*, progress=None) -> TreesDocument:
    """Both figures' results: ``tree_budget_document`` and ``verifier_document``."""
    return TreesDocument(
        budgets=tree_budget_document(progress=progress), verifiers=verifier_document(progress=progress)
    )
