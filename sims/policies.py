"""Dynamic-gamma policies compared by walltime speedup (Leviathan et al. section 3.5 and beyond).

Every draft position draws a context k (by the contexts' weights) and a draft token x ~ q_k; the
token would be accepted if reached with probability min(1, p_k(x) / q_k(x)). A policy decides how many
tokens to draft in an iteration from what it can see: nothing (a fixed gamma), the future (the oracle
drafts exactly the tokens that will be accepted), the draft's confidence q_k(x) in each token it
drafted (stop below a threshold, as Hugging Face's ``assistant_confidence_threshold``), a calibrated
prediction 1 - beta_k of each token's rejection (stop once the probability of at least one rejection
exceeds a threshold, as SpecDec++), or the last iteration's outcome (+2 after a fully accepted
iteration, -1 otherwise: Hugging Face's "heuristic" schedule). An iteration that drafts d tokens and
accepts n of them costs 1 + c d target calls and emits n + 1 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from plumbing.validation import as_cost, as_positive_int, as_probability, as_real
from sims._draws import RowSampler, leading_true_count
from sims._stats import Estimate, as_generator, ratio_estimate
from sims.documents import PolicyGains, PolicyPeak
from sims.families import Contexts, contexts_with_alpha
from spectheory.metrics import HEURISTIC_START
from spectheory.optimum import best_choice
from spectheory.speedup import oracle_gain

__all__ = [
    "PositionDraws",
    "PolicyRun",
    "draw_positions",
    "fixed_gamma",
    "oracle",
    "confidence_threshold",
    "rejection_threshold",
    "heuristic",
    "PolicyComparison",
    "compare_policies",
    "GainGrid",
    "policy_gain_grid",
    "policy_gain_document",
    "HEURISTIC_START",
    "DEFAULT_THRESHOLDS",
    "POLICY_NAMES",
]


#: Uncounted iterations before the heuristic is measured: it moves from 20 by +2 or -1 per iteration and settles
#: near alpha^d = 1/3 (+2 as often as -1 on average), d = 109 at alpha = 0.99.
HEURISTIC_BURN_IN = 100

#: Thresholds tried for the confidence and rejection-prediction policies (the best is reported); with
#: threshold 0 the confidence policy, and with threshold 1 the rejection policy, never stop early.
DEFAULT_THRESHOLDS = (0.0, 0.001, 0.003, 0.01, 0.03) + tuple(np.round(np.linspace(0.05, 0.95, 19), 2)) + (1.0,)

#: Most positions (iterations x max_gamma) ``compare_policies`` draws at once.
MAX_POSITIONS = 1 << 22


@dataclass(frozen=True)
class PositionDraws:
    """What a policy can know about draft positions 1..G of N iterations, ``[N, G]`` each.

    ``accepted_if_reached``: the verifier would accept this position's token; ``confidence``: q(x) of the
    drafted token; ``rejection_risk``: 1 - beta of the position's context, a calibrated prediction of
    its rejection.
    """

    accepted_if_reached: np.ndarray
    confidence: np.ndarray
    rejection_risk: np.ndarray

    @property
    def max_gamma(self) -> int:
        return self.accepted_if_reached.shape[1]

    @cached_property
    def acceptable_run(self) -> np.ndarray:
        """Accepted tokens if the policy drafted all G positions.  # [N]"""
        return leading_true_count(self.accepted_if_reached)


@dataclass(frozen=True)
class PolicyRun:
    """Draft tokens ``drafts`` and accepted tokens ``accepted`` per iteration, ``[units, I]``.

    Stateless policies have one iteration per unit; the heuristic schedule has a stream of I iterations
    per unit, since its iterations depend on each other.
    """

    drafts: np.ndarray
    accepted: np.ndarray

    def speedup(self, c: float) -> Estimate:
        """Autoregressive over speculative time: sum (n + 1) / sum (1 + c d), over independent units."""
        c = float(as_cost("c", c))
        return ratio_estimate((self.accepted + 1).sum(axis=1), (1 + c * self.drafts).sum(axis=1))


def draw_positions(rng: np.random.Generator, contexts: Contexts, iterations: int, max_gamma: int) -> PositionDraws:
    """Draw a context and a draft token for every position, with its acceptance and what policies see."""
    rng = as_generator(rng)
    iterations = as_positive_int("iterations", iterations)
    max_gamma = as_positive_int("max_gamma", max_gamma)
    joint = (contexts.weights[:, None] * contexts.q).ravel()  # [K V], P(context k, draft token x)
    outcome = RowSampler(joint[None]).draw(rng, np.zeros((iterations, max_gamma), dtype=np.int64))  # [N, G]
    context, token = np.divmod(outcome, contexts.vocabulary)
    confidence = contexts.q[context, token]
    accept_probability = np.minimum(1.0, contexts.p[context, token] / confidence)
    return PositionDraws(rng.random(outcome.shape) < accept_probability, confidence, 1 - contexts.beta()[context])


def _run(draws: PositionDraws, drafts: np.ndarray) -> PolicyRun:
    """Iterations that draft ``drafts: [N]`` tokens each."""
    accepted = np.minimum(draws.acceptable_run, drafts)
    return PolicyRun(drafts[:, None], accepted[:, None])


def fixed_gamma(draws: PositionDraws, gamma: int) -> PolicyRun:
    """Draft ``gamma`` tokens every iteration (Theorem 3.8's setting)."""
    gamma = int(as_real("gamma", gamma, low=1, high=draws.max_gamma, integer=True))
    return _run(draws, np.full(len(draws.confidence), gamma))


def oracle(draws: PositionDraws) -> PolicyRun:
    """Draft exactly the tokens that will be accepted (capped at G): expected speedup 1 / (1 - alpha + c alpha)."""
    return _run(draws, draws.acceptable_run)


def _cap(draws: PositionDraws, cap: int | None) -> int:
    return draws.max_gamma if cap is None else int(as_real("cap", cap, low=1, high=draws.max_gamma, integer=True))


def _confident_run(draws: PositionDraws, threshold: float) -> np.ndarray:
    """Tokens up to and including the first with q(x) below ``threshold``.  # [N]"""
    threshold = float(as_probability("threshold", threshold))
    return leading_true_count(draws.confidence >= threshold) + 1


def _cumulative_risk(draws: PositionDraws) -> np.ndarray:
    """P(some rejection among positions 1..i) under the calibrated predictions.  # [N, G]"""
    return 1 - np.cumprod(1 - draws.rejection_risk, axis=1)


def _risky_run(cumulative_risk: np.ndarray, threshold: float) -> np.ndarray:
    """Tokens up to and including the one that takes the predicted risk above ``threshold``.  # [N]"""
    threshold = float(as_probability("threshold", threshold))
    return leading_true_count(cumulative_risk <= threshold) + 1


def confidence_threshold(draws: PositionDraws, threshold: float, cap: int | None = None) -> PolicyRun:
    """Stop drafting after the first token whose draft probability q(x) is below ``threshold``, or at
    ``cap`` tokens (default G)."""
    return _run(draws, np.minimum(_confident_run(draws, threshold), _cap(draws, cap)))


def rejection_threshold(draws: PositionDraws, threshold: float, cap: int | None = None) -> PolicyRun:
    """Stop drafting once the predicted probability of at least one rejection exceeds ``threshold``, or
    at ``cap`` tokens (default G)."""
    return _run(draws, np.minimum(_risky_run(_cumulative_risk(draws), threshold), _cap(draws, cap)))


def heuristic(
    rng: np.random.Generator,
    contexts: Contexts,
    streams: int,
    iterations: int,
    max_gamma: int,
    *,
    start: int = HEURISTIC_START,
    burn_in: int = 0,
) -> PolicyRun:
    """Hugging Face's schedule: draft d tokens, then d + 2 if all were accepted, else max(1, d - 1).

    Each of ``streams`` streams runs ``burn_in`` uncounted iterations (the schedule climbing from
    ``start``), then ``iterations`` counted ones. Iterations of a stream depend on each other, so
    streams are the independent units; the loop runs over iterations, each vectorised over streams.
    """
    streams = as_positive_int("streams", streams)
    iterations = as_positive_int("iterations", iterations)
    burn_in = int(as_real("burn_in", burn_in, low=0, integer=True))
    current = np.full(streams, int(as_real("start", start, low=1, high=max_gamma, integer=True)))
    drafts = np.empty((streams, burn_in + iterations), dtype=np.int64)
    accepted = np.empty((streams, burn_in + iterations), dtype=np.int64)
    for i in range(burn_in + iterations):
        draws = draw_positions(rng, contexts, streams, int(current.max()))
        drafts[:, i] = current
        accepted[:, i] = np.minimum(draws.acceptable_run, current)
        current = np.where(accepted[:, i] == current, np.minimum(current + 2, max_gamma), np.maximum(current - 1, 1))
    return PolicyRun(drafts[:, burn_in:], accepted[:, burn_in:])


@dataclass(frozen=True)
class PolicyComparison:
    """Speedups of every policy at one cost ratio ``c``, each with its best knob setting found.

    The threshold policies are tuned over (threshold, cap) with cap either the best fixed gamma or
    the largest gamma drawn, so they can always fall back to the best fixed gamma.
    """

    c: float
    alpha: float
    best_fixed_gamma: int
    best_fixed: Estimate
    oracle: Estimate
    confidence_setting: tuple
    confidence: Estimate
    rejection_setting: tuple
    rejection: Estimate
    heuristic: Estimate

    def gains(self) -> dict[str, float]:
        """Each dynamic policy's speedup over the best fixed gamma's."""
        return {name: getattr(self, name).mean / self.best_fixed.mean for name in POLICY_NAMES}

    def as_dict(self) -> dict:
        estimates = {name: getattr(self, name).as_dict() for name in ("best_fixed",) + POLICY_NAMES}
        return dict(
            estimates,
            c=self.c,
            alpha=self.alpha,
            best_fixed_gamma=self.best_fixed_gamma,
            confidence_setting=list(self.confidence_setting),
            rejection_setting=list(self.rejection_setting),
            gains=self.gains(),
        )


#: The dynamic policies a comparison reports, besides the best fixed gamma.
POLICY_NAMES = ("oracle", "confidence", "rejection", "heuristic")


def _best(runs: dict, c: float) -> tuple:
    """The key and speedup of the run with the highest mean speedup at cost ratio c, by the one tie rule
    (``spectheory.optimum``): among equal speedups the fewest drafts, a key's gamma (a fixed run's key, or the cap of
    a (threshold, cap) key)."""
    speedups = {key: run.speedup(c) for key, run in runs.items()}
    key = best_choice(speedups, lambda k: speedups[k].mean, lambda k: k[1] if isinstance(k, tuple) else k)
    return key, speedups[key]


def _default_max_gamma(alpha: float) -> int:
    """The gamma past which almost no iteration would still be accepting: alpha^G < 1e-4, in [8, 1024]."""
    if alpha >= 1:
        return 1024
    return int(np.clip(np.ceil(np.log(1e-4) / np.log(max(alpha, 1e-12))), 8, 1024))


def compare_policies(
    rng: np.random.Generator,
    contexts: Contexts,
    cs,
    *,
    iterations: int = 20000,
    max_gamma: int | None = None,
    streams: int = 100,
    thresholds=DEFAULT_THRESHOLDS,
) -> list[PolicyComparison]:
    """Every policy on the same draws, for each cost ratio in ``cs``, knobs tuned per c.

    ``max_gamma`` defaults to ``_default_max_gamma(alpha)``; at most ``MAX_POSITIONS`` positions are
    drawn, so ``iterations`` shrinks for large gamma. The heuristic runs ``streams`` streams of
    ``HEURISTIC_BURN_IN`` uncounted and then max(100, ``iterations // streams``) counted iterations.
    """
    rng = as_generator(rng)
    alpha = contexts.alpha()
    max_gamma = _default_max_gamma(alpha) if max_gamma is None else as_positive_int("max_gamma", max_gamma)
    iterations = max(2, min(as_positive_int("iterations", iterations), MAX_POSITIONS // max_gamma))
    draws = draw_positions(rng, contexts, iterations, max_gamma)
    fixed = {g: fixed_gamma(draws, g) for g in range(1, max_gamma + 1)}
    scheduled = heuristic(
        rng,
        contexts,
        streams,
        max(100, iterations // streams),
        max_gamma,
        start=min(HEURISTIC_START, max_gamma),
        burn_in=HEURISTIC_BURN_IN,
    )
    optimal = oracle(draws)
    cumulative_risk = _cumulative_risk(draws)
    confident = {h: _confident_run(draws, h) for h in thresholds}  # drafts before the cap, per threshold
    risky = {h: _risky_run(cumulative_risk, h) for h in thresholds}
    comparisons = []
    for c in np.atleast_1d(as_cost("cs", cs)):
        gamma, best_fixed = _best(fixed, c)
        caps = sorted({gamma, max_gamma})
        confidence = _best(
            {(h, cap): _run(draws, np.minimum(run, cap)) for h, run in confident.items() for cap in caps}, c
        )
        rejection = _best({(h, cap): _run(draws, np.minimum(run, cap)) for h, run in risky.items() for cap in caps}, c)
        comparisons.append(
            PolicyComparison(
                float(c),
                alpha,
                int(gamma),
                best_fixed,
                optimal.speedup(c),
                *confidence,
                *rejection,
                scheduled.speedup(c),
            )
        )
    return comparisons


@dataclass(frozen=True)
class GainGrid:
    """Speedup of each policy over the best fixed gamma on a grid, ``[len(alphas), len(cs)]`` each.

    ``theory_oracle`` is the closed-form gain of the oracle over the best fixed gamma (i.i.d. acceptance).
    """

    alphas: np.ndarray
    cs: np.ndarray
    oracle: np.ndarray
    confidence: np.ndarray
    rejection: np.ndarray
    heuristic: np.ndarray
    theory_oracle: np.ndarray
    comparisons: list = field(repr=False)

    def as_dict(self) -> dict:
        arrays = {name: getattr(self, name).tolist() for name in ("alphas", "cs", "theory_oracle") + POLICY_NAMES}
        return dict(arrays, comparisons=[[one.as_dict() for one in row] for row in self.comparisons])


def policy_gain_grid(
    rng: np.random.Generator,
    alphas,
    cs,
    *,
    vocabulary: int = 32,
    contexts: int = 64,
    spread: float = 0.5,
    concentration: float = 0.3,
    iterations: int = 20000,
    progress=None,
) -> GainGrid:
    """``compare_policies`` over a grid of alpha (one ``contexts_with_alpha`` family each) and c.

    ``progress``: an optional callable wrapping the alpha loop (e.g. ``tqdm``).
    """
    alphas = np.atleast_1d(as_probability("alphas", alphas))
    cs = np.atleast_1d(as_cost("cs", cs))
    loop = progress(alphas) if progress else alphas
    rows = [
        compare_policies(
            rng,
            contexts_with_alpha(rng, vocabulary, contexts, alpha, spread=spread, concentration=concentration),
            cs,
            iterations=iterations,
        )
        for alpha in loop
    ]
    gains = {
        name: np.array([[row.gains()[name] for row in comparisons] for comparisons in rows]) for name in POLICY_NAMES
    }
    realised = np.array([comparisons[0].alpha for comparisons in rows])
    theory = oracle_gain(realised[:, None], cs[None, :], gamma_max=1024)
    return GainGrid(
        alphas, cs, gains["oracle"], gains["confidence"], gains["rejection"], gains["heuristic"], theory, rows
    )


def _claim_summary(grid: GainGrid) -> dict[str, PolicyPeak]:
    """Where each policy's gain over the best fixed gamma peaks on the grid, and the closed form's peak."""
    summary = {}
    for name in POLICY_NAMES + ("theory_oracle",):
        gains = getattr(grid, name)
        i, j = np.unravel_index(np.argmax(gains), gains.shape)
        summary[name] = PolicyPeak(max_gain=float(gains[i, j]), alpha=float(grid.alphas[i]), c=float(grid.cs[j]))
    return summary


def policy_gain_document(*, seed: int = 0, iterations: int = 20000, progress=None) -> PolicyGains:
    """The policy gain grid over alpha in [0.5, 0.99] (15 values) and c in [0, 0.1] (11 values), as a JSON
    document with each policy's peak; ``progress`` optionally wraps the alpha loop (e.g. ``tqdm``)."""
    alphas = np.round(np.linspace(0.5, 0.99, 15), 3)
    cs = np.round(np.linspace(0.0, 0.1, 11), 3)
    grid = policy_gain_grid(np.random.default_rng(seed), alphas, cs, iterations=iterations, progress=progress)
    return PolicyGains(
        seed=seed,
        iterations=iterations,
        family="contexts_with_alpha(V=32, K=64, spread=0.5, concentration=0.3)",
        peaks=_claim_summary(grid),
        **grid.as_dict(),
    )
