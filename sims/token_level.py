"""Token-level speculative sampling with real categorical draws (Leviathan et al. Algorithm 1; Sun et al.).

Each iteration drafts gamma tokens from q, verifies them against p and emits the accepted ones plus a
correction token from norm(max(0, p - q)) or a bonus token from p. The position of a token picks its
(p, q) pair from a ``Contexts``: independently by the contexts' weights (so beta is i.i.d. with mean
alpha, the setting of Eq. 1) or by a fixed ``schedule`` of context indices per draft position (the
setting of the block-verification closed form). All iterations are drawn at once, as arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plumbing.validation import as_cost, as_distribution_pair, as_lenience, as_positive_int
from sims._draws import RowSampler, categorical, leading_true_count
from sims._stats import Estimate, Moments, as_generator, mean_estimate, ratio_estimate
from sims.families import Contexts
from spectheory.acceptance import excess, rejection_sampling_acceptance
from spectheory.block_verification import CHAIN_VERIFIERS

__all__ = ["NO_TOKEN", "TokenLevelRun", "simulate_speculative", "simulate_rejection_sampling", "residual_weights"]

#: Most floats per ``[iterations, gamma + 1, V]`` slab the block verifier materialises at once.
_BLOCK_SLAB = 1 << 22

#: Marks positions after an iteration's last emitted token in ``TokenLevelRun.tokens``.
NO_TOKEN = -1


@dataclass(frozen=True)
class TokenLevelRun:
    """What ``simulate_speculative`` saw, per iteration; estimates are methods over these arrays.

    ``tokens: [N, gamma + 1]`` the emitted token ids (``NO_TOKEN`` after the last one);
    ``contexts: [N, gamma + 1]`` the context index of every position (also after the last token);
    ``accepted: [N]`` accepted draft tokens n, so the iteration emitted n + 1 tokens;
    ``verified_beta: [N, gamma]`` beta of the context at each draft position the verifier decided on
    (positions 1..min(n + 1, gamma)), NaN elsewhere.
    """

    gamma: int
    lenience: float
    verifier: str
    tokens: np.ndarray
    contexts: np.ndarray
    accepted: np.ndarray
    verified_beta: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.accepted)

    @property
    def target_calls(self) -> int:
        """One parallel target call per iteration."""
        return self.iterations

    @property
    def draft_calls(self) -> int:
        """gamma autoregressive draft calls per iteration."""
        return self.iterations * self.gamma

    def tokens_per_iteration(self) -> Estimate:
        """Mean emitted tokens per iteration, accepted drafts plus the correction/bonus token (Eq. 1)."""
        return mean_estimate(self.accepted + 1)

    def accepted_per_iteration(self) -> Estimate:
        """Mean accepted draft tokens per iteration, without the correction/bonus token."""
        return mean_estimate(self.accepted)

    def acceptance_moments(self) -> Moments:
        """Per iteration: accepted drafts over drafts the verifier decided on (chunks of a run pool these)."""
        return Moments.of(self.accepted, np.minimum(self.accepted + 1, self.gamma))

    def beta_moments(self) -> Moments:
        """Per iteration: the sum of beta over the verified positions, over their number."""
        verified = ~np.isnan(self.verified_beta)
        return Moments.of(np.where(verified, self.verified_beta, 0.0).sum(axis=1), verified.sum(axis=1))

    def alpha_from_acceptances(self) -> Estimate:
        """Accepted drafts / drafts the verifier decided on: alpha from acceptance counts (token verifier)."""
        return self.acceptance_moments().ratio()

    def alpha_from_beta(self) -> Estimate:
        """Mean beta = sum min(p, q) over the verified positions: alpha as Leviathan et al. estimate it."""
        return self.beta_moments().ratio()

    def operations_per_token(self, c_hat: float) -> Estimate:
        """Arithmetic per emitted token relative to autoregressive decoding (Theorem 3.11).

        Every iteration runs the target on gamma + 1 positions and the draft on gamma positions, each
        costing ``c_hat`` of a target position.
        """
        c_hat = float(as_cost("c_hat", c_hat))
        work = np.full(self.iterations, self.gamma * (1 + c_hat) + 1)
        return ratio_estimate(work, self.accepted + 1)


def residual_weights(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """max(0, p - q), the unnormalised law a rejected draft token is replaced from (Algorithm 1)."""
    return excess(p, q)


def simulate_speculative(
    rng: np.random.Generator,
    contexts: Contexts,
    gamma: int,
    iterations: int,
    *,
    lenience: float = 1.0,
    verifier: str = "token",
    schedule=None,
) -> TokenLevelRun:
    """``iterations`` independent iterations of speculative sampling with ``gamma`` draft tokens.

    ``lenience`` l accepts a draft token x with min(1, p(x) / (l q(x))) (token verifier only);
    ``verifier`` is "token" (Algorithm 1) or "block" (Sun et al., docs/theory.md §5); ``schedule: [gamma + 1]``
    fixes the context of each position instead of drawing it by the contexts' weights.
    """
    rng = as_generator(rng)
    if not isinstance(contexts, Contexts):
        raise ValueError(f"contexts must be a sims.families.Contexts, got {type(contexts).__name__}")
    gamma = as_positive_int("gamma", gamma)
    iterations = as_positive_int("iterations", iterations)
    lenience = float(as_lenience(lenience))
    if verifier not in CHAIN_VERIFIERS:
        raise ValueError(f"verifier must be one of {CHAIN_VERIFIERS}, got {verifier!r}")
    if verifier == "block" and lenience != 1.0:
        raise ValueError(f"lenience must be 1 with the block verifier, got {lenience!r}")
    positions = _positions(rng, contexts, gamma, iterations, schedule)  # [N, gamma + 1]
    draft = RowSampler(contexts.q).draw(rng, positions[:, :gamma])  # [N, gamma]
    if verifier == "token":
        accepted, last = _verify_tokens(rng, contexts, positions, draft, lenience)
    else:
        accepted, last = _verify_block(rng, contexts, positions, draft)
    tokens = np.where(np.arange(gamma + 1) < accepted[:, None], np.pad(draft, ((0, 0), (0, 1))), NO_TOKEN)
    tokens[np.arange(iterations), accepted] = last
    beta = contexts.beta(lenience)[positions[:, :gamma]]  # [N, gamma]
    decided = np.arange(gamma) < np.minimum(accepted + 1, gamma)[:, None]
    return TokenLevelRun(gamma, lenience, verifier, tokens, positions, accepted, np.where(decided, beta, np.nan))


def _positions(rng: np.random.Generator, contexts: Contexts, gamma: int, iterations: int, schedule) -> np.ndarray:
    """The context index of every position of every iteration.  # [N, gamma + 1]"""
    count = len(contexts.weights)
    if schedule is None:
        if np.all(contexts.weights == contexts.weights[0]):
            return rng.integers(count, size=(iterations, gamma + 1))  # equally likely: skip choice's CDF
        return rng.choice(count, size=(iterations, gamma + 1), p=contexts.weights)
    schedule = np.asarray(schedule)
    if (
        schedule.shape != (gamma + 1,)
        or not np.issubdtype(schedule.dtype, np.integer)
        or np.any((schedule < 0) | (schedule >= count))
    ):
        raise ValueError(f"schedule must be gamma + 1 = {gamma + 1} context indices in [0, {count}), got {schedule!r}")
    return np.broadcast_to(schedule, (iterations, gamma + 1)).copy()


def _verify_tokens(
    rng: np.random.Generator, contexts: Contexts, positions: np.ndarray, draft: np.ndarray, lenience: float
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1's accept/correct phases: accepted counts ``[N]`` and the last emitted token ``[N]``."""
    iterations, gamma = draft.shape
    rows = positions[:, :gamma]
    ratio = contexts.p[rows, draft] / (lenience * contexts.q[rows, draft])  # [N, gamma], q > 0 where drafted
    accepted = leading_true_count(rng.random(ratio.shape) < ratio)  # [N]
    context_after = positions[np.arange(iterations), accepted]  # [N], where the last token goes
    last = np.empty(iterations, dtype=np.int64)
    rejected = accepted < gamma
    last[rejected] = RowSampler(residual_weights(contexts.p, contexts.q)).draw(rng, context_after[rejected])
    last[~rejected] = RowSampler(contexts.p).draw(rng, context_after[~rejected])
    return accepted, last


def _verify_block(
    rng: np.random.Generator, contexts: Contexts, positions: np.ndarray, draft: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sun et al.'s block verifier, in slabs that bound the ``[n, gamma + 1, V]`` arrays it needs."""
    slab = max(1, _BLOCK_SLAB // (positions.shape[1] * contexts.vocabulary))
    parts = []
    for start in range(0, len(draft), slab):
        rows = positions[start : start + slab]  # [n, gamma + 1]
        parts.append(_verify_block_slab(rng, contexts.p[rows], contexts.q[rows], draft[start : start + slab]))
    return np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts])


def _verify_block_slab(
    rng: np.random.Generator, target: np.ndarray, drafted_from: np.ndarray, draft: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Block verification of ``draft: [n, gamma]``; index i of ``target, drafted_from: [n, gamma + 1, V]``
    holds P_{i+1}, Q_{i+1} (docs/theory.md §5).

    p_0 = 1, p_i = min(1, p_{i-1} P_i(X_i) / Q_i(X_i)); h_0 = 1, h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i) with
    Z_{i+1} = sum_x max(0, p_i P_{i+1}(x) - Q_{i+1}(x)) for 0 < i < gamma, h_gamma = p_gamma; tau is the
    largest i with eta_i < h_i; the next token comes from max(0, p_tau P_{tau+1} - Q_{tau+1}) if
    tau < gamma, else from P_{gamma+1}.
    """
    count, gamma = draft.shape
    rows = np.arange(count)
    ratio = target[rows[:, None], np.arange(gamma), draft] / drafted_from[rows[:, None], np.arange(gamma), draft]
    path = np.ones((count, gamma + 1))  # [n, gamma + 1], p_0..p_gamma
    for i in range(gamma):
        path[:, i + 1] = np.minimum(1.0, path[:, i] * ratio[:, i])
    # [n, gamma + 1, V], max(0, p_i P_{i+1} - Q_{i+1}) at index i
    leftover = excess(path[:, :, None] * target, drafted_from)
    mass = leftover[:, :gamma].sum(axis=2)  # [n, gamma], Z_{i+1} for i < gamma
    denominator = mass + 1 - path[:, :gamma]
    # p_i = 1 and Z_{i+1} = 0 only when everything so far was accepted with certainty: keep it.
    stop = np.divide(mass, denominator, out=np.ones_like(mass), where=denominator > 0)  # [n, gamma]
    stop[:, 0] = 1.0
    stop = np.concatenate([stop, path[:, gamma:]], axis=1)  # [n, gamma + 1], h_0..h_gamma
    hits = rng.random((count, gamma + 1)) < stop  # column 0 always hits
    tau = gamma - np.argmax(hits[:, ::-1], axis=1)  # [n], the largest hit
    weights = np.where((tau < gamma)[:, None], leftover[rows, tau], target[:, gamma])  # [n, V]
    return tau, categorical(rng, weights)


def simulate_rejection_sampling(rng: np.random.Generator, p, q, draws: int) -> tuple[Estimate, np.ndarray]:
    """Rejection sampling of p with proposals from q (Leviathan et al. appendix A.2).

    Draw x ~ q and accept with p(x) / (M q(x)), M = max p / q. Returns the acceptance-rate estimate and
    the accepted tokens (whose law is p).
    """
    rng = as_generator(rng)
    p, q = as_distribution_pair(p, q)
    draws = as_positive_int("draws", draws)
    if p.ndim != 1:
        raise ValueError(f"p and q must be single distributions of shape (V,), got {p.shape}")
    if rejection_sampling_acceptance(p, q) == 0:
        raise ValueError("rejection sampling needs q(x) > 0 wherever p(x) > 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.max(np.where(p > 0, p / q, 0.0))
    proposals = RowSampler(q[None]).draw(rng, np.zeros(draws, dtype=np.int64))  # [draws]
    accepted = rng.random(draws) < p[proposals] / (bound * q[proposals])
    return mean_estimate(accepted), proposals[accepted]
