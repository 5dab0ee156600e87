"""Draft-length policies for the speculative decoder (docs/theory.md §13): how many tokens to draft, decided row
by row before each iteration (``limit``), after each drafted token (``keep``) and after each iteration
(``update``). A policy sees only the draft's side of the current iteration (its law q at each drafted position
and the token it drew) and the outcomes of past iterations, so the decoder stays exact whatever it decides.

What a policy reads as "the draft's law" is ``seen_law``: q, or at T = 0 the draft's softmax.

Every method takes and returns batched tensors (rows first), so the same object drives the decoder and the replay along
a measured acceptance trace (``decoders.bench.policy_bench``). ``start(batch, device)`` gives a fresh per-row state; a
policy that "persists over calls" (transformers' ``heuristic``) carries its draft length from one ``start`` to the next,
as transformers keeps it in the assistant's generation config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from plumbing.validation import as_int, as_positive_int, as_probability
from spectheory.metrics import HEURISTIC_START

__all__ = [
    "DraftPolicy",
    "HeuristicPolicy",
    "ConfidencePolicy",
    "RocConfidencePolicy",
    "EntropyPolicy",
    "RejectionRiskPolicy",
    "MovingAveragePolicy",
    "BatchSchedulePolicy",
    "POLICIES",
    "make_policy",
    "calibrate_acceptance",
    "acceptance_bin_sums",
    "calibration_from_sums",
    "seen_law",
    "AcceptanceCalibration",
    "roc_threshold",
    "SGLANG_STEPS",
]


def seen_law(logits: torch.Tensor, q: torch.Tensor, greedy: bool) -> torch.Tensor:
    """The law a policy reads at a drafted position ``[..., V]``: the draft's q, or at T = 0 (where q is one-hot)
    the draft's softmax, its confidence, as transformers' assistant scores are at greedy decoding."""
    return torch.softmax(logits.to(q.dtype), dim=-1) if greedy else q


class DraftPolicy:
    """The interface, and the fixed draft length: ``gamma_max`` drafts every iteration."""

    name = "fixed"

    def __init__(self, gamma_max: int) -> None:
        self.gamma_max = as_positive_int("gamma_max", gamma_max)

    def start(self, batch: int, device) -> dict:
        """Per-row state for one decoding call."""
        return {}

    def limit(self, state: dict, batch: int, device) -> torch.Tensor:
        """Most drafts per row this iteration ``[B]`` (0: none), at most ``gamma_max``."""
        return torch.full((batch,), self.gamma_max, dtype=torch.int64, device=device)

    def keep(self, state: dict, position: int, q: torch.Tensor, drafted: torch.Tensor) -> torch.Tensor:
        """After drafting position ``position`` (0-based) from ``q: [B, V]`` with ``drafted: [B]``: whether each row
        drafts another token ``[B]``."""
        return torch.ones(len(drafted), dtype=torch.bool, device=drafted.device)

    def update(self, state: dict, proposed: torch.Tensor, accepted: torch.Tensor) -> None:
        """After an iteration that proposed ``proposed: [B]`` drafts and accepted ``accepted: [B]`` of them."""

    def describe(self) -> str:
        return f"{self.name} (at most {self.gamma_max})"


class HeuristicPolicy(DraftPolicy):
    """transformers' ``num_assistant_tokens_schedule="heuristic"``: +2 after an iteration whose drafts were all
    accepted, else max(1, n - 1); the length persists over calls (``transient``: back to ``start`` each call)."""

    def __init__(self, gamma_max: int = 64, start: int = HEURISTIC_START, transient: bool = False) -> None:
        super().__init__(gamma_max)
        self.initial = as_int("start", start, low=1, high=gamma_max)
        self.transient = transient
        self.name = "heuristic-transient" if transient else "heuristic"
        self._carried: torch.Tensor | None = None

    def start(self, batch, device):
        carried = self._carried
        if self.transient or carried is None or len(carried) != batch:
            carried = torch.full((batch,), self.initial, dtype=torch.int64, device=device)
        return {"length": carried.clone()}

    def limit(self, state, batch, device):
        return state["length"].clamp(max=self.gamma_max)

    def update(self, state, proposed, accepted):
        full = (accepted == proposed) & (proposed > 0)
        state["length"] = torch.where(full, state["length"] + 2, (state["length"] - 1).clamp(min=1))
        self._carried = state["length"]


class ConfidencePolicy(DraftPolicy):
    """Stop after a drafted token whose draft probability q(x) is below ``threshold`` (the token is kept):
    transformers' ``assistant_confidence_threshold`` (0.4, ``num_assistant_tokens`` 20). llama.cpp's
    ``--draft-p-min`` (0.75, ``--draft-max`` 16) tests the draft's top probability, the same at T = 0."""

    def __init__(self, gamma_max: int = 20, threshold: float = 0.4, name: str = "confidence") -> None:
        super().__init__(gamma_max)
        self.threshold = float(as_probability("threshold", threshold))
        self.name = name

    def _threshold(self, state) -> torch.Tensor | float:
        return self.threshold

    def keep(self, state, position, q, drafted):
        return self._confidence(state, q, drafted) >= self._threshold(state)

    def _confidence(self, state, q, drafted) -> torch.Tensor:
        return q.gather(1, drafted[:, None])[:, 0]

    def describe(self):
        return f"{self.name} (q(x) >= {self.threshold:g}, at most {self.gamma_max})"


class RocConfidencePolicy(ConfidencePolicy):
    """transformers' default assisted generation: the confidence rule with its threshold re-tuned after every
    iteration, per row, from a ROC curve over the drafted tokens seen so far (accepted: 1, the first rejected:
    0, later ones dropped), minimising fpr + 3 fnr, once there are more than 5 tokens of both kinds."""

    def __init__(self, gamma_max: int = 20, threshold: float = 0.4) -> None:
        super().__init__(gamma_max, threshold, name="confidence-roc")

    def start(self, batch, device):
        return {
            "threshold": torch.full((batch,), self.threshold, dtype=torch.float64, device=device),
            "history": [([], []) for _ in range(batch)],
        }

    def _threshold(self, state):
        return state["threshold"]

    def _confidence(self, state, q, drafted):
        confidence = super()._confidence(state, q, drafted)
        state.setdefault("confidences", []).append(confidence)  # this iteration's, for the ROC curve
        return confidence

    def update(self, state, proposed, accepted):
        confidences = torch.stack(state.pop("confidences"), dim=1).tolist() if "confidences" in state else None
        if confidences is None:
            return
        thresholds = state["threshold"].tolist()
        for row, (scores, matches) in enumerate(state["history"]):
            n, m = int(accepted[row]), int(proposed[row])
            matches += [1] * n + ([0] if n < m else [])
            scores += confidences[row][: len(matches) - len(scores)]
            if len(scores) > 5 and 0 in matches and 1 in matches:
                thresholds[row] = roc_threshold(np.array(scores), np.array(matches))
        state["threshold"] = torch.tensor(thresholds, dtype=torch.float64, device=state["threshold"].device)


def roc_threshold(scores: np.ndarray, matches: np.ndarray, false_negative_cost: float = 3.0) -> float:
    """The score threshold minimising fpr + cost x fnr over the ROC curve of ``scores`` against ``matches``
    (positive at score >= threshold; candidates: +inf and every score, highest first; the first best)."""
    candidates = np.concatenate([[np.inf], np.unique(scores)[::-1]])
    positive, negative = scores[matches == 1], scores[matches == 0]
    tpr = (positive[None, :] >= candidates[:, None]).mean(axis=1)
    fpr = (negative[None, :] >= candidates[:, None]).mean(axis=1)
    return float(candidates[int(np.argmin(fpr + false_negative_cost * (1 - tpr)))])


class EntropyPolicy(DraftPolicy):
    """AdaEDL-style: stop when the entropy bound on acceptance, 1 - sqrt(scale x H(q)), falls below ``threshold``
    (H in nats at the drafted position; the token is kept)."""

    name = "entropy"

    def __init__(self, gamma_max: int = 16, threshold: float = 0.4, scale: float = 0.5) -> None:
        super().__init__(gamma_max)
        self.threshold, self.scale = float(as_probability("threshold", threshold)), float(scale)

    def keep(self, state, position, q, drafted):
        entropy = -(q * q.clamp(min=1e-30).log()).sum(dim=-1)
        return 1 - (self.scale * entropy).sqrt() >= self.threshold

    def describe(self):
        return f"entropy (1 - sqrt({self.scale:g} H) >= {self.threshold:g}, at most {self.gamma_max})"


@dataclass(frozen=True)
class AcceptanceCalibration:
    """Predicted acceptance of a drafted token from its draft probability q(x): bin edges over [0, 1] and the
    mean of min(1, p(x) / q(x)) per bin, weighted by q (``calibrate_acceptance``)."""

    edges: tuple
    acceptance: tuple

    def predict(self, confidence: torch.Tensor) -> torch.Tensor:
        edges = torch.tensor(self.edges[1:-1], dtype=confidence.dtype, device=confidence.device)
        table = torch.tensor(self.acceptance, dtype=confidence.dtype, device=confidence.device)
        return table[torch.bucketize(confidence, edges, right=True)]


def acceptance_bin_sums(
    p: torch.Tensor, q: torch.Tensor, seen: torch.Tensor | None = None, bins: int = 20
) -> torch.Tensor:
    """Per bin of the probability the policy reads, ``seen(x)`` (default q; ``seen_law``), over every token x of the
    adjusted laws ``p, q: [N, V]``: the draw mass q(x) and the accepted mass q(x) min(1, p(x) / q(x)) -> ``[2, bins]``
    (sums of batches add up)."""
    as_positive_int("bins", bins)
    seen = q if seen is None else seen
    ratio = torch.where(q > 0, (p / q.clamp(min=1e-30)).clamp(max=1.0), 0.0)
    inner = torch.linspace(0.0, 1.0, bins + 1, dtype=seen.dtype, device=seen.device)[1:-1]
    index = torch.bucketize(seen, inner, right=True).flatten().cpu()
    sums = torch.zeros(2, bins, dtype=torch.float64)
    sums[0].index_add_(0, index, q.flatten().double().cpu())
    sums[1].index_add_(0, index, (q * ratio).flatten().double().cpu())
    return sums


def calibration_from_sums(sums: torch.Tensor) -> AcceptanceCalibration:
    """The acceptance predictor from ``acceptance_bin_sums``: accepted over drawn mass per bin; empty bins borrow
    the nearest filled one's value."""
    mass, accepted = sums
    bins = len(mass)
    filled = (mass > 1e-12).nonzero()[:, 0].numpy()
    if not len(filled):
        raise ValueError("the acceptance calibration needs text where the draft proposes something")
    values = np.interp(np.arange(bins), filled, (accepted[filled] / mass[filled]).numpy())
    return AcceptanceCalibration(tuple(np.linspace(0.0, 1.0, bins + 1).tolist()), tuple(values.tolist()))


def calibrate_acceptance(
    p: torch.Tensor, q: torch.Tensor, seen: torch.Tensor | None = None, bins: int = 20
) -> AcceptanceCalibration:
    """The acceptance predictor from adjusted laws ``p, q: [N, V]`` along held-out text: per bin of ``seen(x)``,
    the q-weighted mean of min(1, p(x) / q(x)) over the tokens x (``acceptance_bin_sums``)."""
    return calibration_from_sums(acceptance_bin_sums(p, q, seen, bins))


class RejectionRiskPolicy(DraftPolicy):
    """SpecDec++-style: stop once the predicted probability that some drafted token of this iteration is rejected,
    1 - prod predicted acceptance, exceeds ``threshold``; acceptance predicted from q(x) by a calibration fitted
    along held-out text (no training of the draft)."""

    name = "rejection-risk"

    def __init__(self, calibration: AcceptanceCalibration, gamma_max: int = 16, threshold: float = 0.7) -> None:
        super().__init__(gamma_max)
        self.calibration, self.threshold = calibration, float(as_probability("threshold", threshold))

    def keep(self, state, position, q, drafted):
        if position == 0:
            state["survival"] = torch.ones(len(drafted), dtype=torch.float64, device=drafted.device)
        predicted = self.calibration.predict(q.gather(1, drafted[:, None])[:, 0].double())
        state["survival"] = state["survival"] * predicted
        return 1 - state["survival"] <= self.threshold

    def describe(self):
        return f"rejection-risk (P(any rejection) <= {self.threshold:g}, at most {self.gamma_max})"


#: SGLang-style candidate draft steps by batch size (a batch uses the entry of the largest size <= its own).
SGLANG_STEPS = {1: (1, 3, 5, 7), 8: (0, 1, 3), 32: (0, 1), 64: (0,)}


class MovingAveragePolicy(DraftPolicy):
    """SGLang-style: an exponential moving average (weight 0.2) of accepted drafts per iteration, per row; after 10
    warm-up iterations the step is re-decided every 5: down while the average <= the next lower step - 0.75, up
    while it > the current step - 0.5, among the candidate steps of the batch size."""

    name = "moving-average"

    def __init__(
        self,
        steps: dict = None,
        weight: float = 0.2,
        warmup: int = 10,
        interval: int = 5,
        batch_size: int | None = None,
    ) -> None:
        self.steps = {int(k): tuple(v) for k, v in (steps or SGLANG_STEPS).items()}
        self.batch_size = batch_size  # the decoding batch size, where it is not the rows (the exact audit's branches)
        super().__init__(max(max(v) for v in self.steps.values()) or 1)
        self.weight, self.warmup, self.interval = weight, warmup, interval

    def _candidates(self, batch: int) -> tuple:
        batch = self.batch_size or batch
        return self.steps[max([k for k in self.steps if k <= batch] or [min(self.steps)])]

    def start(self, batch, device):
        candidates = self._candidates(batch)
        middle = candidates[len(candidates) // 2]
        return {
            "index": torch.full((batch,), candidates.index(middle), dtype=torch.int64, device=device),
            "average": torch.full((batch,), float(middle), dtype=torch.float64, device=device),
            "iterations": 0,
        }

    def limit(self, state, batch, device):
        candidates = torch.tensor(self._candidates(batch), device=device)
        return candidates[state["index"]]

    def update(self, state, proposed, accepted):
        state["average"] = (1 - self.weight) * state["average"] + self.weight * accepted.double()
        state["iterations"] += 1
        if state["iterations"] < self.warmup or (state["iterations"] - self.warmup) % self.interval:
            return
        candidates = torch.tensor(self._candidates(len(accepted)), dtype=torch.float64, device=accepted.device)
        index = state["index"]
        for _ in range(len(candidates)):  # step down while below the lower step's bar, up while above
            lower = candidates[(index - 1).clamp(min=0)]
            down = (index > 0) & (state["average"] <= lower - 0.75)
            up = ~down & (index < len(candidates) - 1) & (state["average"] > candidates[index] - 0.5)
            index = index - down.long() + up.long()
        state["index"] = index

    def describe(self):
        return f"moving-average (steps {self.steps})"


#: The batch-schedule policy's default: batch size -> draft length.
BATCH_SCHEDULE = {1: 4, 8: 2, 32: 1}


class BatchSchedulePolicy(DraftPolicy):
    """vLLM's ``num_speculative_tokens_per_batch_size`` / TensorRT-LLM's ``draft_len_schedule``: the draft length
    is a function of the batch size (the entry of the largest size <= the batch; default {1: 4, 8: 2, 32: 1})."""

    name = "batch-schedule"

    def __init__(self, schedule: dict | None = None, batch_size: int | None = None) -> None:
        self.schedule = {int(k): int(v) for k, v in (schedule or BATCH_SCHEDULE).items()}
        self.batch_size = batch_size  # the decoding batch size, where it is not the rows (the exact audit's branches)
        super().__init__(max(max(self.schedule.values()), 1))

    def limit(self, state, batch, device):
        size = max([k for k in self.schedule if k <= (self.batch_size or batch)] or [min(self.schedule)])
        return torch.full((batch,), self.schedule[size], dtype=torch.int64, device=device)

    def describe(self):
        return f"batch-schedule ({self.schedule})"


#: Policy names and their defaults (transformers' assisted generation, llama.cpp, SGLang, vLLM, the papers).
POLICIES = (
    "fixed",
    "heuristic",
    "heuristic-transient",
    "confidence",
    "confidence-roc",
    "draft-p-min",
    "entropy",
    "rejection-risk",
    "moving-average",
    "batch-schedule",
)


def make_policy(
    name: str,
    *,
    gamma: int = 4,
    cap: int | None = None,
    calibration: AcceptanceCalibration | None = None,
    batch_size: int | None = None,
) -> DraftPolicy:
    """A fresh policy called ``name`` with its documented defaults; ``gamma`` is the fixed policy's length, ``cap``
    (optional) lowers every policy's most drafts per iteration (the audits' tiny models); ``rejection-risk`` needs
    ``calibration``; ``batch_size`` fixes the batch size the batch-dependent rules read (the exact audit batches
    its branches as rows)."""
    if cap is not None:
        as_positive_int("cap", cap)

    def most(default):
        return default if cap is None else min(default, cap)

    if name == "fixed":
        return DraftPolicy(gamma)
    if name in ("heuristic", "heuristic-transient"):
        return HeuristicPolicy(most(64), start=most(HEURISTIC_START), transient=name == "heuristic-transient")
    if name == "confidence":
        return ConfidencePolicy(most(20))
    if name == "confidence-roc":
        return RocConfidencePolicy(most(20))
    if name == "draft-p-min":
        return ConfidencePolicy(most(16), 0.75, name="draft-p-min")
    if name == "entropy":
        return EntropyPolicy(most(16))
    if name == "rejection-risk":
        if calibration is None:
            raise ValueError("the rejection-risk policy needs an acceptance calibration (calibrate_acceptance)")
        return RejectionRiskPolicy(calibration, most(16))
    if name == "moving-average":
        steps = {size: tuple(min(step, most(step)) for step in candidates) for size, candidates in SGLANG_STEPS.items()}
        return MovingAveragePolicy(steps, batch_size=batch_size)
    if name == "batch-schedule":
        return BatchSchedulePolicy({size: most(length) for size, length in BATCH_SCHEDULE.items()}, batch_size)
    raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
