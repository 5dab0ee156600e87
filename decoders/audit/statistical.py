"""Statistical audits of black-box samplers against a target model's law (docs/theory.md §8).

``audit_sampler`` draws n continuations and tests them with the sequential randomized probability
integral transform: for token y_t after prefix y_<t, u = F_t(y_t - 1) + V p_t(y_t) with V ~ U(0, 1),
where p_t is the target's adjusted conditional and F_t its CDF under a token ordering. Exactly when the
sampler draws from the target, the u_t are i.i.d. U(0, 1) across positions and samples (Rosenblatt's
transform), so the audit tests both halves of that statement under three orderings (by token id, by
target probability, and by draft/target ratio when a draft is given, where the classic q-mismatch bugs
move mass):

- uniformity: each position with Kolmogorov-Smirnov;
- independence: every pair of positions s < t by the correlation of the normal scores z = Phi^-1(u)
  (sqrt(n) r_st is N(0, 1) under the null), and each row's combined score S = sum_t z_t / sqrt(T), whose
  sum of squares over the rows is chi-square with n degrees of freedom under the null.

A G-test on the joint law of the first tokens (exact from the target, when the table is small enough for
n) and a support check (a token of target probability 0 refutes the sampler outright) complete it. The
combined p-value is Bonferroni's over all tests. Each test is registered (``decoders.audit.battery``, at the end of
this module): a test registered anywhere joins the battery, its count and its report.

Why these dependence tests. Normal-score correlation is the locally most powerful rank test against a
Gaussian-copula dependence and needs only the [n, T] matrix of u (no table of V^2 cells, so it works at
any vocabulary); testing every pair, not only neighbours, reaches a position that copies a much earlier
one. The row statistic adds power against dependence spread over all pairs (shared random state): with
mean pairwise correlation rho it inflates E[S^2] to 1 + (T - 1) rho, so its power grows with the horizon.
The G-test sees any dependence among the first k tokens but only where V^k * 5 <= n (k = 1 for a
98-token vocabulary at n = 20,000); the pair tests are what covers longer horizons and large vocabularies.

Power: a deviation at one position whose excess mass is contiguous in one of the orderings (e.g. mass
moved to the likeliest tokens, what a temperature or filtering bug does) shifts that position's PIT
CDF by exactly its total variation. ``detectable_tv`` is the smallest such total variation detected with
probability >= 90% at this n and level: the KS critical value plus 1.2816 times the largest standard
deviation of an empirical CDF (1/2), over sqrt(n) (Kolmogorov's asymptotic tail 2 exp(-2 n d^2)).
``detectable_correlation`` is the same for a normal-score correlation between two positions:
(z_{1 - level / (2 tests)} + 1.2816) / sqrt(n); ``detectable_mean_correlation`` for the row statistic,
sqrt(2) (z_{1 - level / (2 tests)} + 1.2816) / ((T - 1) sqrt(n)).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from scipy import special, stats

from decoders._loop import as_prompts, check_models
from decoders.audit.battery import STATISTICAL, AuditTest, BatteryOutcome, bonferroni, register_audit_test, run_battery
from decoders.audit.exact import autoregressive_law
from decoders.audit.verdict import AuditVerdict
from decoders.models.protocol import repeated
from decoders.sampling import Sampling, adjusted_probs, after_stop, history_of, proposes
from plumbing.validation import as_int, as_positive_int

__all__ = [
    "AuditReport",
    "SampleEvidence",
    "audit_sampler",
    "conditionals",
    "prompt_state",
    "chunk_rows",
    "ORDERINGS",
    "detectable_tv",
    "detectable_correlation",
    "detectable_mean_correlation",
    "dependence_p_values",
]

ORDERINGS = ("id", "target_probability", "draft_ratio")
POWER_Z = 1.2815515655446004  # the standard normal's 0.9 quantile
MIN_EXPECTED = 5.0  # G-test cells expected to hold fewer samples are pooled
SCORE_CLIP = 2.0**-53  # u is clipped to [eps, 1 - eps] before Phi^-1 (u = 0 has probability 0)
MAX_SAMPLES = 1_000_000  # [n, horizon] float64 matrices per ordering (~1 GB at horizon 16); the shipped pair
# samples 100,000 in 7 minutes on 2 CPU cores, so 10^6 is over an hour
CHUNK = 256  # sequences per forward pass: bounded memory, and fastest on CPU (shipped: 7.3 s / 4096 vs 9.7 s at 1024)
CHUNK_CELLS = 1 << 23  # rows x horizon x V per chunk: ~64 MB per float64 [b, T, V] tensor, whatever V is


def chunk_rows(vocab_size: int, horizon: int, sampling: Sampling | None = None) -> int:
    """Sequences per chunk of the audit's conditionals: ``CHUNK``, fewer where the vocabulary is large, a quarter as
    many where ``sampling`` has penalties or a grammar (their counts, masks and penalised logits are [b, T, V] too:
    SmolLM2's audit under a JSON schema peaked at 2.05 GB with full chunks)."""
    return max(1, min(CHUNK, CHUNK_CELLS // (vocab_size * horizon * (4 if sampling and sampling.uses_history else 1))))


@dataclass(frozen=True, kw_only=True)
class AuditReport(AuditVerdict):
    """``p_value`` is the Bonferroni combination of every test (``tests`` of them); ``passed`` when it is at
    least ``level``. ``test_p_values`` holds each test's own p-value (per ordering: the smallest per-position
    KS p times the horizon, the smallest pair p times the pairs, and the row test), ``position_p_values``
    the per-ordering, per-position KS p-values, ``strongest_pairs`` per ordering the pair of positions with
    the largest |normal-score correlation| as (s, t, correlation)."""

    battery: tuple = ()  # every test's ``decoders.audit.battery.BatteryOutcome``, in the order run

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            test_p_values=dict(self.test_p_values),
            position_p_values={k: list(v) for k, v in self.position_p_values.items()},
            strongest_pairs={k: list(v) for k, v in self.strongest_pairs.items()},
            battery=[outcome.as_dict() for outcome in self.battery],
        )


def detectable_tv(n: int, tests: int, level: float) -> float:
    """The per-position total variation detected with 90% power (module docstring)."""
    critical = math.sqrt(math.log(2 * tests / level) / 2)  # sqrt(n) D exceeds it with probability level / tests
    return (critical + POWER_Z * 0.5) / math.sqrt(n)


def detectable_correlation(n: int, tests: int, level: float) -> float:
    """The normal-score correlation between two positions detected with 90% power (module docstring)."""
    return (float(stats.norm.isf(level / (2 * tests))) + POWER_Z) / math.sqrt(n)


def detectable_mean_correlation(n: int, tests: int, level: float, horizon: int) -> float:
    """The mean pairwise normal-score correlation the row statistic detects with 90% power."""
    return math.sqrt(2) * detectable_correlation(n, tests, level) / (horizon - 1)


def _dependence(u: np.ndarray) -> tuple[np.ndarray, tuple, float, float]:
    """``dependence_p_values`` with the row statistic: (pair p-values, strongest pair, row statistic, row p)."""
    n, horizon = u.shape
    z = special.ndtri(np.clip(u, SCORE_CLIP, 1 - SCORE_CLIP))  # [n, T], i.i.d. N(0, 1) under the null
    correlation = z.T @ z / n  # [T, T]: known mean 0 and variance 1, so sqrt(n) r_st has variance 1
    first, second = np.triu_indices(horizon, 1)
    pairs = correlation[first, second]
    pair_p = 2 * stats.norm.sf(math.sqrt(n) * np.abs(pairs))
    rows = float(np.sum(z.sum(axis=1) ** 2) / horizon)  # chi-square(n) under the null
    row_p = min(1.0, 2 * min(float(stats.chi2.cdf(rows, n)), float(stats.chi2.sf(rows, n))))
    strongest = int(np.argmax(np.abs(pairs)))
    return pair_p, (int(first[strongest]), int(second[strongest]), float(pairs[strongest])), rows, row_p


def dependence_p_values(u: np.ndarray) -> tuple[np.ndarray, float, tuple]:
    """Independence across positions of PIT values ``u: [n, T]`` (T >= 2): the two-sided p-value of every
    pair s < t (``np.triu_indices`` order), the row statistic's, and the strongest pair (s, t, r)."""
    pair_p, strongest, _, row_p = _dependence(u)
    return pair_p, row_p, strongest


@torch.no_grad()
def prompt_state(model, prompt: Sequence[int], horizon: int):
    """One row holding the prompt but its last token, with room for ``horizon`` more: ``conditionals``
    repeats it per continuation, so the prompt is scored once, not once per sample."""
    state = model.new_state(1, len(prompt) + horizon)  # sized to the sequences, not the model's context
    if len(prompt) > 1:
        model.forward(torch.tensor([list(prompt)[:-1]], dtype=torch.int64, device=model.device), state)
    return state


@torch.no_grad()
def conditionals(
    model, prompt: Sequence[int], continuations: torch.Tensor, sampling: Sampling, state=None
) -> torch.Tensor:
    """The model's adjusted distribution before each continuation token: ``[b, T] -> [b, T, V]`` float64, from
    one forward pass of the continuations over ``state`` (``prompt_state``'s, computed when not given). Rows
    where the model proposes nothing (all -inf: a draft's no proposal) are all zeros; after a stop token, that
    token for sure (``decoders.sampling.after_stop``)."""
    base = prompt_state(model, prompt, continuations.shape[1]) if state is None else state
    last = torch.full((len(continuations), 1), int(list(prompt)[-1]), dtype=torch.int64)
    tokens = torch.cat([last, continuations.cpu()[:, :-1]], dim=1).to(model.device)  # [b, T]
    body = torch.tensor([list(prompt)[:-1]], dtype=torch.int64, device=model.device)  # what the state holds
    logits = model.forward(tokens, repeated(model, base, len(continuations), body, len(prompt) + tokens.shape[1]))
    proposed = proposes(logits)[..., None]
    history = history_of(sampling, [list(prompt)], model)  # the prompt's, then the continuation's before each position
    history = None if history is None else history.along(tokens[:, 1:])
    probs = adjusted_probs(
        torch.where(proposed, logits, torch.zeros_like(logits)).to(torch.float64), sampling, history=history
    )
    return after_stop(torch.where(proposed, probs, 0.0), continuations.to(probs.device), sampling.stop).cpu()


def _pit_terms(target, draft, prompt, tokens: torch.Tensor, sampling: Sampling, orderings) -> tuple:
    """p_t(y_t) ``[n, T]``, per ordering F_t(y_t - 1) ``[n, T]``, and the expected count of every token at every
    position ``[T, V]`` (the sum of the conditionals), a chunk of samples at a time."""
    horizon = tokens.shape[1]
    # Filled in place: small per-chunk results kept alive between the chunks' large temporaries fragment the
    # heap (at V = 49,152 and n = 20,000 the process grew by 15 MB a chunk, to 8 GB).
    p_y = torch.zeros(tokens.shape, dtype=torch.float64)
    ahead = {order: torch.zeros(tokens.shape, dtype=torch.float64) for order in orderings}
    expected = torch.zeros(horizon, target.vocab_size, dtype=torch.float64)
    states = [None if model is None else prompt_state(model, prompt, horizon) for model in (target, draft)]
    rows = chunk_rows(target.vocab_size, horizon, sampling)
    for begin in range(0, len(tokens), rows):
        y = tokens[begin : begin + rows]
        p = conditionals(target, prompt, y, sampling, states[0])  # [b, T, V]
        q = conditionals(draft, prompt, y, sampling, states[1]) if draft is not None else None
        p_y[begin : begin + rows] = torch.gather(p, -1, y[..., None])[..., 0]
        expected += p.sum(dim=0)
        for order in orderings:
            ahead[order][begin : begin + rows] = _ahead(p, y, order, q)
    return p_y, ahead, expected


#: tokens named where the samples deviate most
DEVIATING_TOKENS = 3


def locate_deviation(tokens: np.ndarray, expected: torch.Tensor, position_p: dict, threshold: float) -> dict:
    """The position whose uniformity test (over every ordering) is least likely under the target, its p-value,
    the ``DEVIATING_TOKENS`` tokens sampled there most in excess of their expected count (observed, expected),
    and whether the first position alone falls below ``threshold`` (the p a position needs to fail the audit):
    the mark of an engine that read the prompt differently (docs/theory.md §8)."""
    smallest = np.min(np.array([p for p in position_p.values()]), axis=0)  # [T], over orderings
    position = int(np.argmin(smallest))
    observed = np.bincount(tokens[:, position], minlength=expected.shape[1]).astype(float)
    excess = observed - expected[position].numpy()
    top = np.argsort(-excess, kind="stable")[:DEVIATING_TOKENS]
    return {
        "position": position,
        "p_value": float(smallest[position]),
        "tokens": [[int(t), int(observed[t]), float(expected[position, t])] for t in top],
        "first_position_only": bool(smallest[0] < threshold and (smallest[1:] >= threshold).all()),
    }


def _ahead(p: torch.Tensor, y: torch.Tensor, order: str, q: torch.Tensor | None) -> torch.Tensor:
    """Mass F_t(y_t - 1) of the tokens ordered before y_t. ``p, q: [n, T, V]``, ``y: [n, T]`` -> ``[n, T]``."""
    ids = torch.arange(p.shape[-1])
    before_in_id = ids < y[..., None]  # ties broken by id
    if order == "id":
        mask = before_in_id
    elif order == "target_probability":  # likeliest first
        p_y = torch.gather(p, -1, y[..., None])
        mask = (p > p_y) | ((p == p_y) & before_in_id)
    else:  # largest q / p first, compared as q(x) p(y) > q(y) p(x) so that p = 0 needs no division
        p_y, q_y = torch.gather(p, -1, y[..., None]), torch.gather(q, -1, y[..., None])
        left, right = q * p_y, q_y * p
        mask = (left > right) | ((left == right) & before_in_id)
    return (p * mask).sum(dim=-1)


def _joint_test(tokens: np.ndarray, target, prompt, sampling: Sampling, n: int) -> tuple[int, float, float]:
    """(k, G, p): the G-test of the first k tokens' joint law, k the longest prefix (at most 3) with V^k <= n / 5."""
    vocab, horizon = target.vocab_size, tokens.shape[1]
    k = 0
    while k < min(horizon, 3) and vocab ** (k + 1) * MIN_EXPECTED <= n:
        k += 1
    if k == 0:
        return 0, 0.0, 1.0
    law = autoregressive_law(target, prompt, sampling, k)
    cells = {prefix: i for i, prefix in enumerate(law)}
    expected = np.array([law[prefix] for prefix in cells]) * n
    index = np.array([cells.get(tuple(row), -1) for row in tokens[:, :k].tolist()])
    observed = np.bincount(index[index >= 0], minlength=len(cells)).astype(float)  # outside the support: counted apart
    small = expected < MIN_EXPECTED
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    expected *= observed.sum() / expected.sum()
    if len(expected) < 2:
        return k, 0.0, 1.0
    g = stats.power_divergence(observed, expected, lambda_="log-likelihood")
    return k, float(g.statistic), float(g.pvalue)


def audit_sampler(
    sample: Callable[[int, torch.Generator], torch.Tensor],
    target,
    prompt: Sequence[int],
    sampling: Sampling,
    *,
    n: int,
    horizon: int,
    seed: int,
    draft=None,
    level: float = 0.01,
) -> AuditReport:
    """Test that ``sample(n, generator) -> [n, horizon]`` continuations of ``prompt`` follow ``target``'s law
    under ``sampling`` (``target`` and ``draft`` are models of the project's protocol)."""
    as_int("n", n, low=2, high=MAX_SAMPLES)
    as_positive_int("horizon", horizon)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if len(prompt) == 0:
        raise ValueError("prompt must be a non-empty sequence of token ids")
    prompt = as_prompts([prompt], target.vocab_size)[0]  # integer ids of the target's vocabulary
    check_models(target, draft)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(int(seed))
    tokens = torch.as_tensor(sample(n, generator)).cpu().to(torch.int64)
    sampled = time.perf_counter()
    if tokens.shape != (n, horizon):
        raise ValueError(f"sample(n, generator) must return shape ({n}, {horizon}), got {tuple(tokens.shape)}")
    if bool(((tokens < 0) | (tokens >= target.vocab_size)).any()):
        raise ValueError(f"sampled tokens must be in [0, {target.vocab_size})")
    orderings = ORDERINGS if draft is not None else ORDERINGS[:2]
    p_y, ahead, expected = _pit_terms(target, draft, prompt, tokens, sampling, orderings)  # [n, T] each, [T, V]
    noise = torch.rand(n, horizon, generator=generator, dtype=torch.float64)
    u = {order: (ahead[order] + noise * p_y).clamp(0.0, 1.0).numpy() for order in orderings}  # i.i.d. U(0, 1)
    evidence = SampleEvidence(tokens.numpy(), u, p_y, target, tuple(prompt), sampling, level)
    outcomes = run_battery(STATISTICAL, evidence, orderings)
    combined, tests = bonferroni(outcomes)
    found = {outcome.name: outcome for outcome in outcomes}
    position_p = {
        order: found[f"pit_{order}"].details["position_p_values"] for order in orderings if f"pit_{order}" in found
    }
    strongest = {
        order: found[f"pairs_{order}"].details["strongest_pair"] for order in orderings if f"pairs_{order}" in found
    }
    power = {
        name: getattr(found.get(f"{name}_{orderings[0]}"), "detectable", None) for name in ("pit", "pairs", "rows")
    }
    deviation = locate_deviation(evidence.tokens, expected, position_p, level / tests)
    return AuditReport(
        passed=combined >= level,
        p_value=combined,
        level=level,
        n=n,
        horizon=horizon,
        tests=tests,
        test_p_values={outcome.name: outcome.p_value for outcome in outcomes},
        position_p_values=position_p,
        strongest_pairs=strongest,
        joint_tokens=found["joint_first_tokens"].details["joint_tokens"],
        impossible_tokens=int(found["support"].statistic),
        detectable_tv=power["pit"],
        detectable_correlation=power["pairs"],
        detectable_mean_correlation=power["rows"],
        seconds=time.perf_counter() - started,
        sampling_seconds=sampled - started,
        deviation=deviation,
        battery=outcomes,
    )


@dataclass(frozen=True)
class SampleEvidence:
    """What the statistical battery's tests read (``decoders.audit.battery``): the samples ``tokens: [n, T]``, their
    randomized PIT values per token ordering ``u: {ordering: [n, T]}``, the target's probability of each sampled
    token ``p_y: [n, T]``, and the target, prompt, sampling and level they are tested against."""

    tokens: np.ndarray
    u: dict
    p_y: torch.Tensor
    target: object
    prompt: tuple
    sampling: Sampling
    level: float

    @property
    def n(self) -> int:
        return self.tokens.shape[0]

    @property
    def horizon(self) -> int:
        return self.tokens.shape[1]


def _uniformity(evidence: SampleEvidence, order: str) -> BatteryOutcome:
    """Kolmogorov-Smirnov of each position's PIT values against U(0, 1); the statistic is the largest distance."""
    results = [stats.kstest(evidence.u[order][:, t], "uniform") for t in range(evidence.horizon)]
    position_p = tuple(float(result.pvalue) for result in results)
    return BatteryOutcome(
        "pit", max(float(result.statistic) for result in results), position_p, details={"position_p_values": position_p}
    )


def _pairs(evidence: SampleEvidence, order: str) -> BatteryOutcome:
    pair_p, strongest, _, _ = _dependence(evidence.u[order])
    return BatteryOutcome("pairs", abs(strongest[2]), tuple(pair_p.tolist()), details={"strongest_pair": strongest})


def _rows(evidence: SampleEvidence, order: str) -> BatteryOutcome:
    _, _, rows, row_p = _dependence(evidence.u[order])
    return BatteryOutcome("rows", rows, (row_p,))


def _joint(evidence: SampleEvidence, order: None) -> BatteryOutcome:
    k, g, p = _joint_test(evidence.tokens, evidence.target, evidence.prompt, evidence.sampling, evidence.n)
    return BatteryOutcome("joint_first_tokens", g, (p,), details={"joint_tokens": k})


def _support(evidence: SampleEvidence, order: None) -> BatteryOutcome:
    """Any sampled token the target gives probability 0 refutes the sampler outright (p = 0)."""
    impossible = int((evidence.p_y <= 0).sum())
    return BatteryOutcome("support", impossible, (0.0 if impossible else 1.0,))


def _two_positions(evidence: SampleEvidence) -> bool:
    return evidence.horizon > 1


for _test in (
    AuditTest(
        "pit",
        STATISTICAL,
        _uniformity,
        "each new token's PIT values uniform (Kolmogorov-Smirnov per position)",
        power="a per-position TV",
        detectable=lambda e, tests: detectable_tv(e.n, tests, e.level),
        per_ordering=True,
    ),
    AuditTest(
        "pairs",
        STATISTICAL,
        _pairs,
        "every pair of positions uncorrelated (normal scores)",
        power="a correlation between two positions",
        per_ordering=True,
        applies=_two_positions,
        detectable=lambda e, tests: detectable_correlation(e.n, tests, e.level),
    ),
    AuditTest(
        "rows",
        STATISTICAL,
        _rows,
        "each row's summed normal scores chi-square (dependence over all pairs)",
        power="a mean correlation over all pairs",
        per_ordering=True,
        applies=_two_positions,
        detectable=lambda e, tests: detectable_mean_correlation(e.n, tests, e.level, e.horizon),
    ),
    AuditTest("joint_first_tokens", STATISTICAL, _joint, "G-test of the first k tokens' joint law (V^k * 5 <= n)"),
    AuditTest("support", STATISTICAL, _support, "no sampled token of target probability 0"),
):
    register_audit_test(_test)
