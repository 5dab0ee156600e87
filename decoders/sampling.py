"""Logits -> the distribution that is actually sampled: temperature, top-k, top-p, argmax (docs/theory.md §1).

Target and draft both go through ``adjusted_probs`` with the same ``Sampling``, so that the q used in
the accept test is exactly the q the draft token was drawn from. Temperature 0 is the one-hot argmax
distribution, ties going to the lowest token id. The caller's tensor is never modified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from spectheory.validation import as_positive_int

__all__ = ["Sampling", "adjusted_probs", "draw", "check_probs", "proposes", "GREEDY"]


@dataclass(frozen=True)
class Sampling:
    """How logits become a sampling distribution: ``temperature`` >= 0 (0 = argmax), optional ``top_k``
    >= 1 (keep the k largest logits, ties at the k-th kept) and ``top_p`` in (0, 1] (keep the smallest
    set of most likely tokens whose mass reaches top_p), applied in that order."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if self.top_k is not None:
            as_positive_int("top_k", self.top_k)
        if self.top_p is not None and (not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = Sampling(temperature=0.0)


def adjusted_probs(logits: torch.Tensor, sampling: Sampling, *, validate: bool = True) -> torch.Tensor:
    """``logits: [..., V]`` -> probabilities ``[..., V]`` (float32 or wider) under ``sampling``.

    With ``validate`` raises ``ValueError`` on NaN logits or a row of all -inf (one host synchronisation);
    decoders pass ``validate=False`` in their inner loops and call ``check_probs`` once per iteration.
    Limits are taken exactly: +inf logits give the uniform law over the +inf tokens (they count as the
    largest float), and a temperature so small that logits / T overflows gives the uniform law over the
    largest logits (greedy's argmax set). A row of all -inf, like NaN, has no law: NaN probabilities.
    """
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a decoders.sampling.Sampling, got {type(sampling).__name__}")
    wide = torch.promote_types(logits.dtype, torch.float32)
    scores = logits if logits.dtype == wide else logits.to(wide)  # a copy when the dtype changes
    if validate and bool((torch.isnan(scores).any(dim=-1) | torch.isneginf(scores).all(dim=-1)).any()):
        raise ValueError("logits must not contain NaN and each row needs a finite entry")
    if sampling.greedy:
        best, at = scores.max(dim=-1, keepdim=True)  # the first maximum (lowest id wins ties); NaN counts as largest
        # A row with NaN or only -inf has no argmax: NaN probabilities, which check_probs reports as in sampling.
        fill = torch.where(best > float("-inf"), 1.0, float("nan")).to(scores.dtype)
        return torch.zeros_like(scores).scatter_(-1, at, fill)
    # +inf logits count as the largest float: softmax (which subtracts the maximum) shares the law among them.
    scores = scores.clamp(max=torch.finfo(scores.dtype).max)
    if sampling.temperature != 1:
        # Shifted before dividing, so that a tiny temperature tends to the argmax set instead of overflowing.
        scores = (scores - scores.amax(dim=-1, keepdim=True)) / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if sampling.top_p is not None and sampling.top_p < 1:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(ordered, dim=-1) - ordered  # [..., V], mass of the more likely tokens
        drop_sorted = mass_before >= sampling.top_p  # never drops the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def draw(probs: torch.Tensor, sampling: Sampling, randomness) -> torch.Tensor:
    """One token per row of ``probs: [..., V]``, the output of ``adjusted_probs`` under ``sampling`` -> ``[...]``.
    Greedy laws are one-hot: their token is read off, with no draw from ``randomness`` (nothing to draw)."""
    return probs.argmax(dim=-1) if sampling.greedy else randomness.categorical(probs)


def proposes(logits: torch.Tensor) -> torch.Tensor:
    """Where a draft's logits ``[..., V]`` propose a token: not all -inf (all -inf is a draft's "no proposal";
    a NaN row does propose, so that ``adjusted_probs`` reports it rather than it passing as no proposal)."""
    return ~torch.isneginf(logits).all(dim=-1)


def check_probs(*probs: torch.Tensor, models: dict | None = None) -> None:
    """The deferred form of ``adjusted_probs``' validation: NaN anywhere (NaN or all -inf logits) raises.
    Probabilities (and sums of them) are finite or NaN, so one sum each finds a NaN (one host
    synchronisation in all). ``models`` (name -> that model's probabilities) names the culprit in the error."""
    if math.isnan(float(sum(p.sum() for p in probs))):
        culprit = next((name for name, p in (models or {}).items() if math.isnan(float(p.sum()))), None)
        raise ValueError(f"{'the ' + culprit + chr(39) + 's ' if culprit else ''}logits must not contain NaN and each "
                         f"row needs a finite entry")
