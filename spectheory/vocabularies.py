"""A draft with another tokenizer (docs/theory-vocabularies.md §15; Timor et al., ICML 2025): the acceptance of each
cross-vocabulary method as a function of the two laws, and the speed when one draft token is not one target token.

* Token-level intersection (TLI): the draft's law restricted to the pieces both vocabularies hold and renormalised,
  q'(x) = q(x) 1[x shared] / sum_shared q, then speculative sampling against p: beta = sum_x min(p(x), q'(x)).
* String-level exact match (SLEM): the draft's text re-tokenized by the target, each candidate accepted when the
  target's own draw equals it: beta = sum_t r(t) p(t) for a candidate of law r, at most sum_t min(p(t), r(t)) (equal
  when both are one-hot: greedy decoding).
* String-level rejection sampling (SLRS, per character): the laws over the next character, P and Q, marginalised
  over each model's tokenizations: beta = sum_c min(P(c), Q(c)).

With gamma draft tokens per call that the target reads as ``ratio`` x gamma target tokens (the tokenization ratio),
and i.i.d. acceptance alpha per target candidate, the target tokens per call are Eq. 1 at ratio x gamma and the
speedup divides them by gamma c + 1 (Theorem 3.8 with the draft's calls counted in its own tokens).
"""

from __future__ import annotations

import numpy as np

from plumbing.validation import SUM_TOLERANCE, as_cost, as_count, as_distribution, as_real
from spectheory.speedup import expected_tokens

__all__ = [
    "METHODS",
    "intersection_law",
    "intersection_acceptance",
    "exact_match_acceptance",
    "string_acceptance",
    "cross_vocabulary_tokens",
    "cross_vocabulary_speedup",
]

#: The cross-vocabulary methods: string-level exact match, token-level intersection, string-level rejection sampling.
METHODS = ("slem", "tli", "slrs")


def intersection_law(q, shared, target_size: int, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """The draft's law ``q [..., Vd]`` restricted to its shared pieces and renormalised, in the target's vocabulary
    ``[..., target_size]``; ``shared [Vd]`` holds each draft token's target id, or -1 where the target has no such
    piece. Zero where the draft puts no mass on a shared piece (it then proposes nothing)."""
    q = as_distribution("q", q, atol=atol)
    shared = np.asarray(shared, dtype=np.int64)
    if shared.shape != q.shape[-1:] or (shared >= target_size).any() or (shared < -1).any():
        raise ValueError(f"shared must hold one target id (or -1) per draft token, got {shared.tolist()!r}")
    law = np.zeros(q.shape[:-1] + (target_size,))
    kept = shared >= 0
    np.add.at(law, (..., shared[kept]), q[..., kept])  # distinct pieces: one draft token per target id
    total = law.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, law / total, 0.0)


def intersection_acceptance(p, q, shared, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """TLI's beta = sum_x min(p(x), q'(x)) over the target's vocabulary (``p [..., Vt]``), q' = ``intersection_law``."""
    p = as_distribution("p", p, atol=atol)
    return np.minimum(p, intersection_law(q, shared, p.shape[-1], atol=atol)).sum(axis=-1)


def exact_match_acceptance(p, r, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """SLEM's beta = sum_t r(t) p(t): a candidate of law ``r`` accepted when the target's draw from ``p`` equals it."""
    p = as_distribution("p", p, atol=atol)
    r = as_distribution("r", r, atol=atol)
    if p.shape != r.shape:
        raise ValueError(f"p and r must have the same shape, got {p.shape} and {r.shape}")
    return (p * r).sum(axis=-1)


def string_acceptance(p_strings, q_strings, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """SLRS's beta = sum_s min(P(s), Q(s)) over the laws of the next string (one character here), each model's
    summed over its tokenizations."""
    p = as_distribution("p_strings", p_strings, atol=atol)
    q = as_distribution("q_strings", q_strings, atol=atol)
    if p.shape != q.shape:
        raise ValueError(f"p_strings and q_strings must have the same shape, got {p.shape} and {q.shape}")
    return np.minimum(p, q).sum(axis=-1)


def cross_vocabulary_tokens(alpha, gamma, ratio) -> np.ndarray:
    """Target tokens per target call when gamma draft tokens become ``ratio`` x gamma target candidates, each accepted
    with probability alpha until the first rejection: Eq. 1 at ratio x gamma."""
    ratio = as_real("ratio", ratio, low=0.0, low_open=True)
    return expected_tokens(alpha, as_count("gamma", gamma, integer=False) * ratio)


def cross_vocabulary_speedup(alpha, gamma, c, ratio) -> np.ndarray:
    """(1 - alpha^(ratio gamma + 1)) / ((1 - alpha)(gamma c + 1)): Theorem 3.8 with gamma draft calls of cost c that
    propose ratio x gamma target tokens."""
    c = as_cost("c", c)
    return cross_vocabulary_tokens(alpha, gamma, ratio) / (as_count("gamma", gamma, integer=False) * c + 1)
