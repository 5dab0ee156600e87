"""Several draft tokens at one position: exact acceptance of the multi-draft verifiers (docs/theory-trees.md §12).

k candidates for the next token are verified against the target's p so that the emitted token follows p
exactly. Each function below takes one pair ``p, q: [V]`` (sampling settings folded in) and k, and returns
the rank frequencies a_1..a_k: a_j = P(the j-th candidate is the one accepted), so that their sum is the
probability that some candidate is accepted and they are the rank model's acceptance vector of
``spectheory.trees`` for a node whose k children are drafted this way.

* ``rrs``: recursive rejection sampling with i.i.d. drafts (SpecInfer). Test x_i ~ q against the residual r
  (r = p at first) with min(1, r(x_i) / q(x_i)); after a rejection r <- norm((r - q)+). The residual does not
  depend on which token was rejected, so a_j follows from one recursion.
* ``rrs_without_replacement``: the i-th draft is drawn from q with the earlier drafts removed (renormalised)
  and tested, and the residual updated, against that q_i (Sequoia; Jeon et al. 2024). q_i depends on the
  drafts, so a_j is a sum over the ordered draws, enumerated (small V and k only).
* ``kseq``: SpecTr's K-SEQ: draft i is accepted with min(1, p / (rho q)) independently, the first accepted
  is emitted, and otherwise a correction from (p - c a) / (1 - beta)^k, a = min(q, p / rho), beta = sum a,
  c = (1 - (1 - beta)^k) / beta. The correction is a distribution when c <= rho; rho is the smallest such
  value in [1, k], found by bisection. a_j = (1 - beta)^(j - 1) beta.
* ``top_k``: the draft's k most likely tokens as deterministic candidates, checked with the target-only rule
  (accept candidate c with r(c) / sum r, else zero r(c)): equivalent to drawing y ~ p and accepting the
  candidate equal to y, so a_j = p(j-th candidate).

``optimal_iid_acceptance`` is the best any verifier can do with k i.i.d. drafts from q, 1 - max over token
sets H of (q(H)^k - p(H)) (Hu et al. 2025), enumerated over the 2^V sets; ``spectr_upper_bound`` is SpecTr's
sum_x min(p(x), 1 - (1 - q(x))^k).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

from plumbing.validation import as_distribution_pair, as_positive_int
from spectheory.acceptance import excess

__all__ = [
    "TREE_RULES",
    "rank_acceptance",
    "rrs",
    "rrs_without_replacement",
    "kseq",
    "kseq_rho",
    "kseq_scale",
    "kseq_correction",
    "top_k",
    "optimal_iid_acceptance",
    "spectr_upper_bound",
    "residual",
]

#: Largest V for the enumerations (2^V token sets; ordered draws without replacement), and most ordered draws.
ENUMERATION_VOCABULARY = 16
ENUMERATION_DRAWS = 200_000


def _pair(p, q) -> tuple[np.ndarray, np.ndarray]:
    p, q = as_distribution_pair(p, q)
    if p.ndim != 1:
        raise ValueError(f"p and q must be single distributions [V], got shape {p.shape}")
    return p, q


def residual(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm((r - q)+), the law after a rejection; r itself where (r - q)+ has no mass (then q >= r everywhere,
    so q = r and every test accepts)."""
    left = excess(r, q)
    total = left.sum()
    return left / total if total > 0 else r


def rrs(p, q, k: int) -> np.ndarray:
    """Rank frequencies ``[k]`` of recursive rejection sampling with k i.i.d. drafts from q."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    r, reach, out = p, 1.0, np.zeros(k)
    for j in range(k):
        accept = np.minimum(r, q).sum()  # sum_x q(x) min(1, r(x) / q(x))
        out[j] = reach * accept
        reach *= 1.0 - accept
        r = residual(r, q)
    return out


def rrs_without_replacement(p, q, k: int) -> np.ndarray:
    """Rank frequencies ``[k]`` of recursive rejection sampling with drafts drawn from q without replacement,
    by enumeration over the ordered draws (V <= ``ENUMERATION_VOCABULARY``). When the drafts exhaust q's
    support, the remaining ranks get nothing."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    _check_enumerable(len(p))
    draws = math.perm(len(p), min(k, len(p)))
    if draws > ENUMERATION_DRAWS:
        raise ValueError(f"enumerating {draws} ordered draws of k = {k} from V = {len(p)} exceeds {ENUMERATION_DRAWS}")
    out = np.zeros(k)

    def visit(r: np.ndarray, removed: tuple, reach: float) -> None:
        j = len(removed)
        mass = 1.0 - q[list(removed)].sum() if removed else 1.0
        if j == k or reach == 0.0 or mass <= 0.0:
            return
        q_j = q.copy()
        q_j[list(removed)] = 0.0
        q_j /= mass
        out[j] += reach * np.minimum(r, q_j).sum()
        after = residual(r, q_j)
        for x in np.flatnonzero(q_j > 0):
            rejected = max(q_j[x] - r[x], 0.0)  # P(draw x and reject it)
            if rejected > 0:
                visit(after, removed + (int(x),), reach * rejected)

    visit(p, (), 1.0)
    return out


def kseq_rho(p, q, k: int, *, tolerance: float = 1e-13) -> float:
    """SpecTr's rho: the smallest rho in [1, k] with c(rho) = (1 - (1 - beta)^k) / beta <= rho, where
    beta(rho) = sum_x min(q(x), p(x) / rho), by bisection (c(rho) - rho is positive below it)."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)

    def gap(rho: float) -> float:
        return kseq_scale(np.minimum(q, p / rho).sum(), k) - rho

    if np.minimum(q, p).sum() == 0:  # disjoint supports: nothing is ever accepted, the correction is p
        return 1.0

    low, high = 1.0, float(k)
    if gap(low) <= 0:
        return low
    while high - low > tolerance:
        middle = (low + high) / 2
        low, high = (middle, high) if gap(middle) > 0 else (low, middle)
    return high


def kseq_scale(beta: float, k: int) -> float:
    """SpecTr's c = (1 - (1 - beta)^k) / beta, the chance that one of k drafts is accepted over beta (k as beta ->
    0)."""
    return (1.0 - (1.0 - beta) ** k) / beta if beta > 0 else float(k)


def kseq_correction(p, q, k: int) -> np.ndarray:
    """K-SEQ's law after k rejections, unnormalised: (p - c a)+ with a = min(q, p / rho); p where beta = 0."""
    p, q = _pair(p, q)
    a = np.minimum(q, p / kseq_rho(p, q, k))
    beta = a.sum()
    return p if beta == 0 else excess(p, kseq_scale(beta, k) * a)


def kseq(p, q, k: int) -> np.ndarray:
    """Rank frequencies ``[k]`` of K-SEQ: (1 - beta)^(j - 1) beta at SpecTr's rho."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    beta = np.minimum(q, p / kseq_rho(p, q, k)).sum()
    return beta * (1.0 - beta) ** np.arange(k)


def top_k(p, q, k: int) -> np.ndarray:
    """Rank frequencies ``[k]`` of the draft's top-k tokens (ties broken by token id) under the target-only
    rule: p of each candidate (0 for ranks beyond V)."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    order = np.argsort(-q, kind="stable")[:k]
    return np.concatenate([p[order], np.zeros(k - len(order))])


#: name -> rank frequencies ``(p, q, k) -> [k]``.
TREE_RULES = {"rrs": rrs, "rrs-without-replacement": rrs_without_replacement, "kseq": kseq, "target-only": top_k}


def rank_acceptance(verifier: str, p, q, k: int) -> np.ndarray:
    """The rank frequencies of ``verifier`` (a name of ``TREE_RULES``)."""
    if verifier not in TREE_RULES:
        raise ValueError(f"verifier must be one of {sorted(TREE_RULES)}, got {verifier!r}")
    return TREE_RULES[verifier](p, q, k)


def _check_enumerable(vocabulary: int) -> None:
    if vocabulary > ENUMERATION_VOCABULARY:
        raise ValueError(f"enumeration needs V <= {ENUMERATION_VOCABULARY}, got V = {vocabulary}")


def optimal_iid_acceptance(p, q, k: int) -> float:
    """alpha* = 1 - max over token sets H of (q(H)^k - p(H)): the best acceptance of any verifier with k i.i.d.
    drafts from q (the empty set gives 0, so alpha* <= 1), enumerated over the 2^V sets."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    _check_enumerable(len(p))
    members = _subsets(len(p))  # [2^V, V] bool
    return float(1.0 - np.max((members @ q) ** k - members @ p))


@lru_cache(maxsize=None)
def _subsets(vocabulary: int) -> np.ndarray:
    return np.array(list(itertools.product((0.0, 1.0), repeat=vocabulary)))


def spectr_upper_bound(p, q, k: int) -> float:
    """sum_x min(p(x), 1 - (1 - q(x))^k): no verifier with k i.i.d. drafts accepts more (SpecTr)."""
    p, q = _pair(p, q)
    k = as_positive_int("k", k)
    return float(np.minimum(p, 1.0 - (1.0 - q) ** k).sum())
