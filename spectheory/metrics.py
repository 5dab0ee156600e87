"""The engines' acceptance numbers in one vocabulary, and alpha from them (docs/metrics.md).

Names used in every JSON this toolkit writes, for a run of ``drafts`` verification rounds of k draft tokens:

* ``acceptance_rate``: accepted draft tokens / drafted tokens (vLLM's "Avg Draft acceptance rate", SGLang's
  ``spec_accept_rate``, llama.cpp's ``draft_n_accepted / draft_n``);
* ``mean_acceptance_length``: tokens per verification round, the bonus or correction token included:
  1 + accepted / drafts (vLLM's "Mean acceptance length", EAGLE's tau, SGLang's ``spec_accept_length``);
* ``per_position_acceptance_rate[i]``: the fraction of rounds whose first i + 1 draft tokens were all accepted
  (unconditional: vLLM's ``num_accepted_tokens_per_pos / num_drafts``);
* ``conditional_acceptance_rate[i]``: the fraction of rounds that reached position i and accepted it
  (EAGLE's "n-alpha"): ``per_position[i] / per_position[i - 1]``;
* ``alpha``: Leviathan et al.'s mean acceptance, the conditional rate if it is the same at every position.

The conversions are exact identities of the counts; alpha is an estimate, with its standard error.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from spectheory.speedup import alpha_from_tokens_per_iteration, expected_tokens

__all__ = [
    "DEFINITIONS",
    "EngineCounts",
    "AlphaEstimate",
    "per_position_from_conditional",
    "conditional_from_per_position",
    "mean_acceptance_length_from_per_position",
    "estimate_alpha",
    "check_counts",
    "HEURISTIC_START",
]

#: transformers' default ``num_assistant_tokens`` (5.24), where its heuristic schedule of the draft length starts: the
#: decoders' heuristic policy (``decoders.policies``) and its simulation (``sims.policies``) start there.
HEURISTIC_START = 20

#: name -> definition: the table printed by ``spectheory gamma --help`` and written in docs/metrics.md.
DEFINITIONS = {
    "acceptance_rate": "accepted draft tokens / drafted tokens",
    "mean_acceptance_length": "tokens per verification round, bonus included: 1 + accepted / rounds",
    "per_position_acceptance_rate": "position i: rounds whose first i + 1 drafts were all accepted / rounds "
    "(unconditional)",
    "conditional_acceptance_rate": "position i: rounds that accepted position i / rounds that reached it",
    "alpha": "the conditional rate if it is one number for every position (Leviathan et al.)",
}


@dataclass(frozen=True)
class EngineCounts:
    """Counters of a speculative run as an engine reports them: verification rounds with a draft, drafted
    and accepted tokens, and (vLLM only) per position the rounds whose first i + 1 drafts were accepted."""

    engine: str
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_counts(self)

    @property
    def draft_length(self) -> float:
        """Mean draft tokens per round (the engine's k when every round drafts k)."""
        return self.draft_tokens / self.drafts

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.accepted_tokens / self.drafts

    @property
    def per_position_acceptance_rate(self) -> tuple[float, ...]:
        return tuple(a / self.drafts for a in self.accepted_per_position)

    @property
    def conditional_acceptance_rate(self) -> tuple[float, ...]:
        return conditional_from_per_position(self.per_position_acceptance_rate)

    def as_dict(self) -> dict:
        return dict(
            asdict(self),
            draft_length=self.draft_length,
            acceptance_rate=self.acceptance_rate,
            mean_acceptance_length=self.mean_acceptance_length,
            per_position_acceptance_rate=list(self.per_position_acceptance_rate),
            conditional_acceptance_rate=list(self.conditional_acceptance_rate),
        )


def check_counts(counts: EngineCounts) -> None:
    """Counters that cannot come from one run: a ValueError naming them."""
    named = {"drafts": counts.drafts, "draft_tokens": counts.draft_tokens, "accepted_tokens": counts.accepted_tokens}
    for name, value in named.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{counts.engine} counter {name} must be a finite count >= 0, got {value!r}")
    if counts.drafts <= 0 or counts.draft_tokens <= 0:  # rounds may draft nothing (llama.cpp, a copy draft)
        raise ValueError(
            f"{counts.engine} counters show no drafts (drafts {counts.drafts:g}, draft tokens "
            f"{counts.draft_tokens:g}): nothing to measure"
        )
    if counts.accepted_tokens > counts.draft_tokens:
        raise ValueError(
            f"{counts.engine} counters contradict each other: accepted tokens "
            f"{counts.accepted_tokens:g} > drafted tokens {counts.draft_tokens:g}"
        )
    positions = counts.accepted_per_position
    if not positions:
        return
    if any(not math.isfinite(a) or a < 0 for a in positions):
        raise ValueError(f"{counts.engine} per-position counters must be finite counts >= 0, got {list(positions)}")
    previous = counts.drafts
    for i, a in enumerate(positions):
        if a > previous:
            raise ValueError(
                f"{counts.engine} counters contradict each other: position {i} accepted {a:g} > "
                f"{'drafts' if i == 0 else f'position {i - 1} accepted'} {previous:g} (an "
                f"unconditional per-position count cannot grow with position)"
            )
        previous = a
    if not math.isclose(sum(positions), counts.accepted_tokens, rel_tol=1e-9, abs_tol=0.5):
        raise ValueError(
            f"{counts.engine} counters contradict each other: per-position accepted counts sum to "
            f"{sum(positions):g}, accepted tokens is {counts.accepted_tokens:g}"
        )


def per_position_from_conditional(conditional) -> tuple[float, ...]:
    """Unconditional per-position rates from conditional ones: their running products."""
    return tuple(float(x) for x in np.cumprod(np.asarray(conditional, dtype=float)))


def conditional_from_per_position(per_position) -> tuple[float, ...]:
    """Conditional rates from unconditional ones: each over the one before (1 before position 0; 0 after a
    position no round reached)."""
    rates = np.asarray(per_position, dtype=float)
    before = np.concatenate([[1.0], rates[:-1]])
    return tuple(float(x) for x in np.divide(rates, before, out=np.zeros_like(rates), where=before > 0))


def mean_acceptance_length_from_per_position(per_position) -> float:
    """Tokens per round, bonus included: 1 + the sum of the unconditional per-position rates."""
    return 1.0 + float(np.sum(per_position))


@dataclass(frozen=True)
class AlphaEstimate:
    """alpha with its standard error, the draft length k it assumes and how it was found."""

    alpha: float
    standard_error: float
    gamma: int
    method: str


def estimate_alpha(counts: EngineCounts, gamma: int | None = None) -> AlphaEstimate:
    """alpha from an engine's counters (docs/metrics.md). With per-position counts: the maximum-likelihood
    estimate sum_i A_i / sum_i A_(i-1) (A_(-1) = rounds), each position a Bernoulli trial reached A_(i-1)
    times. Without: the alpha for which Eq. 1 gives the mean acceptance length at k = ``gamma`` (default:
    the mean draft length rounded), its error by the delta method from the truncated geometric's variance."""
    positions = counts.accepted_per_position
    if positions and gamma is not None and gamma != len(positions):
        raise ValueError(
            f"--gamma {gamma} contradicts the {counts.engine} counters, which count {len(positions)} "
            f"positions per draft"
        )
    if positions:
        trials = counts.drafts + sum(positions[:-1])
        alpha = sum(positions) / trials
        return AlphaEstimate(
            alpha,
            math.sqrt(max(alpha * (1 - alpha), 0.0) / trials),
            len(positions),
            "per-position counts (maximum likelihood)",
        )
    k = max(1, round(counts.draft_length)) if gamma is None else gamma
    length = min(counts.mean_acceptance_length, k + 1.0)
    alpha = float(alpha_from_tokens_per_iteration(length, k))
    # Var of the accepted count L = min(geometric, k) at alpha, and dE/dalpha, by finite differences of Eq. 1.
    j = np.arange(k + 1)
    probabilities = np.where(j < k, alpha**j * (1 - alpha), alpha**k)
    variance = float(np.sum(probabilities * j**2) - np.sum(probabilities * j) ** 2)
    step = 1e-6
    slope = float(expected_tokens(min(alpha + step, 1.0), k) - expected_tokens(max(alpha - step, 0.0), k)) / (
        min(alpha + step, 1.0) - max(alpha - step, 0.0)
    )
    error = math.sqrt(variance / counts.drafts) / slope if slope > 0 else float("inf")
    exact = math.isclose(counts.draft_length, k)
    return AlphaEstimate(
        alpha,
        error,
        k,
        "mean acceptance length through Eq. 1"
        + ("" if exact else f" (draft lengths vary, mean {counts.draft_length:.2f}: approximate)"),
    )
