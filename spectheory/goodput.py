"""Goodput under concurrency (docs/theory-goodput.md §16): B requests decode in one batch, and every forward pass
costs what the tokens it processes cost, t(n) (a plain step n = B, a verify call n = B (gamma + 1), each draft step
the draft's own at B). Goodput is output tokens per second over all requests; speculation's goodput over plain
decoding's is

    S(B, gamma) = E(alpha, gamma) t(B) / (t(B (gamma + 1)) + gamma t_draft(B) + t_iteration),

``forecast_speedup`` with the batch's step for t_step and its verify call priced by the tokens it processes: the one
cost model every forecast uses, at batch B. Where t(n) grows with n (a compute-bound pass), S falls as B grows, and
above some B no gamma >= 1 pays: the crossover, above which do not speculate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from plumbing.validation import as_cost, as_int, as_positive_int, as_probability
from spectheory.costs import CostProfile, forecast_speedup, width_priced
from spectheory.optimum import best_choice
from spectheory.speedup import expected_tokens

__all__ = [
    "affine_calls",
    "measured_calls",
    "scaled_draft",
    "GoodputCosts",
    "goodput_speedup",
    "GoodputChoice",
    "goodput_gamma",
    "goodput_schedule",
    "crossover_batch",
    "affine_crossover",
    "affine_goodput_speedup",
    "profile_goodput_schedule",
    "goodput_lines",
    "profile_goodput_costs",
    "judged_lines",
    "batched_iterations",
    "ServerCosts",
    "fixed_count_seconds",
    "fixed_count_speedups",
    "fixed_count_interval",
    "fit_server_costs",
]


def affine_calls(intercept: float, slope: float) -> Callable[[float], float]:
    """t(n) = intercept + slope n: a pass that costs a fixed part (weights read once) and a part per token."""
    intercept, slope = as_cost("intercept", intercept), as_cost("slope", slope)
    if not intercept + slope > 0:
        raise ValueError("intercept and slope must not both be 0: a pass costs time")
    return lambda n: intercept + slope * n


def measured_calls(t_calls) -> Callable[[float], float]:
    """t(n) from calls measured at n = 1..len(``t_calls``) tokens (a profile's t_verify(k) at batch 1: k tokens),
    priced as every verify call is (``width_priced``: linear between the measured widths, a count outside refused)."""
    t_calls = tuple(float(t) for t in t_calls)
    return lambda n: width_priced(t_calls, {n: 1.0})


def scaled_draft(t_draft: float, calls: Callable[[float], float]) -> Callable[[float], float]:
    """A draft step's seconds at batch B as ``t_draft`` (its batch-1 step) scaled like the target's passes,
    t_draft t(B) / t(1): the assumption where only batch-1 draft costs were measured (docs/theory-goodput.md §16)."""
    t_draft, one = as_cost("t_draft", t_draft), calls(1)
    return lambda batch: t_draft * calls(batch) / one


@dataclass(frozen=True)
class GoodputCosts:
    """What a batch's iteration costs: the target's pass of n tokens ``calls(n)``, a draft step at batch B
    ``draft(B)`` (None: free, as prompt lookup nearly is) and the round's own seconds ``t_iteration``."""

    calls: Callable[[float], float]
    draft: Callable[[float], float] | None = None
    t_iteration: float = 0.0

    def other_seconds(self, batch: int, gamma: int) -> float:
        """An iteration's seconds beside its verify pass: gamma draft steps at ``batch`` and the round."""
        return (gamma * self.draft(batch) if self.draft is not None and gamma else 0.0) + self.t_iteration

    def iteration_seconds(self, batch: int, gamma: int) -> float:
        """A speculative iteration of ``batch`` requests at ``gamma``: its verify pass of batch (gamma + 1) tokens
        and the rest."""
        return self.calls(batch * (gamma + 1)) + self.other_seconds(batch, gamma)


def goodput_speedup(alpha, gamma: int, batch: int, costs: GoodputCosts, *, tokens_per_iteration=None) -> float:
    """S(B, gamma) of the module docstring at acceptance ``alpha`` (i.i.d.; or ``tokens_per_iteration`` where the
    acceptance per position is known). Gamma 0 is the speculative loop drafting nothing (its round still costs);
    plain decoding is 1 exactly (``goodput_gamma``'s "do not speculate")."""
    gamma, batch = as_int("gamma", gamma, low=0), as_positive_int("batch", batch)
    per_request = (
        float(expected_tokens(as_probability("alpha", alpha), gamma))
        if tokens_per_iteration is None
        else float(tokens_per_iteration)
    )
    verify = costs.calls(batch * (gamma + 1))
    return forecast_speedup(per_request, costs.calls(batch), verify, costs.other_seconds(batch, gamma))


@dataclass(frozen=True)
class GoodputChoice:
    """At one batch size: the gamma of the largest goodput speedup (0: do not speculate) and that speedup."""

    batch: int
    gamma: int
    speedup: float

    def as_dict(self) -> dict:
        return {"batch": self.batch, "gamma": self.gamma, "speedup": self.speedup}


def goodput_gamma(alpha, batch: int, costs: GoodputCosts, *, gamma_max: int = 16, tokens=None) -> GoodputChoice:
    """The exhaustive search over gamma = 1..``gamma_max`` at ``batch`` and plain decoding (gamma 0, 1x), ties to the
    smaller gamma (``spectheory.optimum``); ``tokens``: gamma -> tokens per iteration, where the acceptance per
    position is known."""
    speedups = {0: 1.0} | {
        gamma: goodput_speedup(
            alpha, gamma, batch, costs, tokens_per_iteration=None if tokens is None else tokens(gamma)
        )
        for gamma in range(1, as_int("gamma_max", gamma_max, low=1) + 1)
    }
    best = best_choice(speedups, lambda gamma: speedups[gamma], lambda gamma: gamma)
    return GoodputChoice(batch, best, speedups[best])


def goodput_schedule(alpha, batches, costs: GoodputCosts, *, gamma_max: int = 16, tokens=None) -> list:
    """``goodput_gamma`` at each of ``batches``, ascending: the draft length per batch size."""
    return [goodput_gamma(alpha, b, costs, gamma_max=gamma_max, tokens=tokens) for b in sorted(set(batches))]


def crossover_batch(schedule: list) -> int | None:
    """The smallest batch size of ``schedule`` from which on no gamma pays (gamma 0 there and above), None where
    speculation pays at the largest."""
    paying = [choice.batch for choice in schedule if choice.gamma > 0]
    above = [choice.batch for choice in schedule if choice.gamma == 0 and choice.batch > max(paying, default=0)]
    return min(above) if above else None


def affine_crossover(alpha, gamma: int, target: tuple, draft: tuple = (0.0, 0.0), t_iteration: float = 0.0):
    """The batch size B* where S(B, gamma) = 1 for affine passes, ``target`` t(n) = a + b n and ``draft``
    t_draft(B) = d_a + d_b B: B* = (a (E - 1) - gamma d_a - t_iteration) / (b (gamma + 1 - E) + gamma d_b), with
    E = E(alpha, gamma); speculation at gamma pays below it. None where it never pays (B* <= 0) or always does
    (denominator 0: a pass that costs nothing per token)."""
    (a, b), (d_a, d_b) = target, draft
    e = float(expected_tokens(as_probability("alpha", alpha), as_positive_int("gamma", gamma)))
    denominator = b * (gamma + 1 - e) + gamma * d_b
    numerator = a * (e - 1) - gamma * d_a - t_iteration
    if denominator <= 0 or numerator <= 0:
        return None
    return numerator / denominator


def affine_goodput_speedup(alpha, gamma: int, batch: int, a, b, d_a=0.0, d_b=0.0, t_iteration=0.0) -> float:
    """``goodput_speedup`` with affine passes t(n) = a + b n and draft steps d_a + d_b B (the closed form's case,
    ``spectheory.symbolic.GOODPUT_SPEEDUP``)."""
    costs = GoodputCosts(affine_calls(a, b), affine_calls(d_a, d_b) if d_a + d_b > 0 else None, t_iteration)
    return goodput_speedup(alpha, gamma, batch, costs)


def profile_goodput_costs(profile: CostProfile) -> GoodputCosts:
    """A batch-1 cost profile's costs at any batch: its verify calls at 1..N positions as the passes of 1..N tokens
    (``measured_calls``), its draft step scaled like them (``scaled_draft``), its round's seconds."""
    calls = measured_calls(profile.t_verify)
    return GoodputCosts(calls, scaled_draft(profile.t_draft, calls) if profile.t_draft else None, profile.t_iteration)


def profile_goodput_schedule(profile: CostProfile, batches) -> list:
    """``goodput_schedule`` from one batch-1 cost profile (``spectheory profile``): its verify calls at 1..N
    positions as the passes of 1..N tokens (``measured_calls``), its draft step scaled like them (``scaled_draft``),
    its round's seconds, and its acceptance per position for the tokens per iteration. At each batch size gamma is
    searched up to the profile's own gamma_max and the widest call it measured (B (gamma + 1) <= N); a batch whose
    gamma 1 would need wider calls is refused, naming the width to measure."""
    widest, costs = len(profile.t_verify), profile_goodput_costs(profile)
    choices = []
    for batch in sorted({as_positive_int("concurrency", b) for b in batches}):
        gamma_max = min(profile.gamma_max, widest // batch - 1)
        if gamma_max < 1:
            raise ValueError(
                f"concurrency {batch}: gamma 1 verifies {2 * batch} tokens, the profile's calls reach {widest}; "
                f"measure wider calls (`spectheory profile --verify-widths {2 * batch}`)"
            )
        choices.append(goodput_gamma(None, batch, costs, gamma_max=gamma_max, tokens=profile.tokens_per_iteration))
    return choices


def goodput_lines(schedule: list) -> list[str]:
    """A goodput schedule as printed lines: per concurrency the draft length (or "do not speculate") and its goodput
    over plain decoding's, then where speculation stops paying (`spectheory schedule`, `spectheory gamma`)."""
    lines = [
        f"concurrency {c.batch}: {'do not speculate' if c.gamma == 0 else f'gamma {c.gamma}'} "
        f"(goodput {c.speedup:.3f}x plain decoding's)"
        for c in schedule
    ]
    crossover = crossover_batch(schedule)
    return lines + [
        "speculation pays at every concurrency given"
        if crossover is None
        else f"from concurrency {crossover} on, do not speculate"
    ]


def judged_lines(profile: CostProfile, measured: dict) -> list[str]:
    """The goodput forecast of ``profile`` (``profile_goodput_costs``, its acceptance per position) beside a batch
    sweep's measured speedups ``measured`` {batch: {gamma: speedup}}, row by row, with forecast / measured."""
    costs = profile_goodput_costs(profile)
    lines = [f"{'batch':>5} {'gamma':>5} {'forecast':>9} {'measured':>9} {'forecast/measured':>18}"]
    for batch, speedups in sorted(measured.items()):
        for gamma, speedup in sorted(speedups.items()):
            ahead = goodput_speedup(None, gamma, batch, costs, tokens_per_iteration=profile.tokens_per_iteration(gamma))
            lines.append(f"{batch:>5} {gamma:>5} {ahead:>8.3f}x {speedup:>8.3f}x {ahead / speedup:>18.3f}")
    return lines


def batched_iterations(lengths, slots: int) -> list[tuple]:
    """Continuous batching of requests that take ``lengths[i]`` iterations each (a prefill that emits the first token,
    then one a round), at most ``slots`` in an iteration, taken in order, a waiting request joining in the iteration
    after one finishes (docs/theory-goodput.md §16, "A fixed count of requests"): per iteration, the requests in it.
    Where as many requests as slots are sent at once, every iteration waits for the slowest request's last."""
    lengths = [as_positive_int("length", length) for length in lengths]
    slots = as_positive_int("slots", slots)
    waiting, active, remaining, iterations = list(range(len(lengths))), [], list(lengths), []
    while waiting or active:
        while waiting and len(active) < slots:
            active.append(waiting.pop(0))
        iterations.append(tuple(active))
        for request in active:
            remaining[request] -= 1
        active = [request for request in active if remaining[request] > 0]
    return iterations


@dataclass(frozen=True)
class ServerCosts:
    """A serving engine's iteration costs (docs/theory-goodput.md §16, "Engines"): the plain server's seconds per
    decoding iteration at each concurrency it was run at (``plain_step``), a token's seconds in a pass beyond one a row
    (``token_seconds``: a prompt's tokens in its prefill, a round's drafted tokens), and a speculative iteration's own
    seconds beyond that pass (the proposer, a draft model, the verify pass's width beyond the prefill's price, the
    rejection sampler) at each concurrency the speculating server was run at (``round_step``); both tables linear
    between their concurrencies and flat outside them."""

    plain_step: dict  # {concurrency: seconds per iteration}
    token_seconds: float
    round_step: dict = field(default_factory=dict)  # {concurrency: a round's own seconds}; empty: no round priced

    def step(self, rows: int) -> float:
        """The plain server's iteration of ``rows`` requests."""
        return _between(self.plain_step, rows)

    def iteration(self, rows: int, extra_tokens: float, *, speculative: bool) -> float:
        """An iteration of ``rows`` requests whose pass carries ``extra_tokens`` beyond one a row (prefills, drafts),
        with a round's own seconds where it is ``speculative``."""
        rounds = _between(self.round_step, rows) if speculative and self.round_step else 0.0
        return self.step(rows) + self.token_seconds * extra_tokens + rounds

    def as_dict(self) -> dict:
        return {
            "plain_step": {str(c): s for c, s in sorted(self.plain_step.items())},
            "token_seconds": self.token_seconds,
            "round_step": {str(c): s for c, s in sorted(self.round_step.items())},
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ServerCosts":
        return cls(
            {int(c): s for c, s in data["plain_step"].items()},
            data["token_seconds"],
            {int(c): s for c, s in data["round_step"].items()},
        )


def _between(table: dict, rows: float) -> float:
    """``table`` {concurrency: seconds} at ``rows``: linear between its concurrencies, the nearest outside them."""
    measured = sorted(table)
    low = max([c for c in measured if c <= rows], default=measured[0])
    high = min([c for c in measured if c >= rows], default=measured[-1])
    if low == high:
        return table[low]
    share = (rows - low) / (high - low)
    return table[low] * (1 - share) + table[high] * share


def fixed_count_seconds(costs: ServerCosts, lengths, prompt_tokens, slots: int, drafted: float | None = None) -> float:
    """Seconds of requests that take ``lengths[i]`` iterations each, prompts of ``prompt_tokens[i]`` tokens, batched
    as a server batches them (``batched_iterations``): plain where ``drafted`` is None, else speculative, each request
    drafting ``drafted`` tokens a round after its prefill."""
    seen, seconds = set(), 0.0
    for active in batched_iterations(lengths, slots):
        new = [request for request in active if request not in seen]
        seen.update(new)
        extra = sum(prompt_tokens[request] - 1 for request in new)
        if drafted is not None:
            extra += drafted * (len(active) - len(new))
        seconds += costs.iteration(len(active), extra, speculative=drafted is not None)
    return seconds


def fixed_count_speedups(costs: ServerCosts, rounds, drafted: float, prompt_tokens, tokens: int, concurrency) -> tuple:
    """({concurrency: goodput speedup}, {concurrency: plain tokens per second}) of requests with prompts of
    ``prompt_tokens`` that take ``rounds`` each after their first token (``drafted`` tokens a round) against plain ones
    of ``tokens`` each, batched as a server batches them at each of ``concurrency`` (docs/theory-goodput.md §16,
    "Engines")."""
    tokens = as_positive_int("tokens", tokens)
    if len(rounds) != len(prompt_tokens):
        raise ValueError(
            f"rounds and prompt_tokens must be per request alike, got {len(rounds)} and {len(prompt_tokens)}"
        )
    plain = {c: fixed_count_seconds(costs, [tokens] * len(rounds), prompt_tokens, c) for c in concurrency}
    speedups = {
        c: plain[c] / fixed_count_seconds(costs, [1 + r for r in rounds], prompt_tokens, c, drafted)
        for c in concurrency
    }
    return speedups, {c: tokens * len(rounds) / plain[c] for c in concurrency}


def fixed_count_interval(
    costs: ServerCosts, rounds, drafted: float, prompt_tokens, tokens: int, concurrency, rng, *, draws: int = 200
) -> dict:
    """{concurrency: [low, high]}, the 95% interval of ``fixed_count_speedups`` over workloads of as many requests
    whose rounds are drawn from ``rounds`` with replacement (``draws`` of them, from the generator ``rng``): where the
    speedup of another set of requests of the same kind falls, the rounds of a set of mixed questions varying as much
    as the questions do (docs/theory-goodput.md §16, "Engines")."""
    draws = as_int("draws", draws, low=20)
    rounds = list(rounds)
    drawn = [
        fixed_count_speedups(
            costs,
            [rounds[i] for i in rng.integers(0, len(rounds), len(rounds))],
            drafted,
            prompt_tokens,
            tokens,
            concurrency,
        )[0]
        for _ in range(draws)
    ]
    return {
        c: [float(q) for q in np.quantile([speedups[c] for speedups in drawn], [0.025, 0.975])] for c in concurrency
    }


def fit_server_costs(prompt_tokens, first_seconds, tokens: int, plain_seconds: dict, speculative: list) -> ServerCosts:
    """``ServerCosts`` from runs of one set of requests (prompts of ``prompt_tokens``, ``tokens`` each): a token's
    seconds, the slope of the requests' seconds to their first token on their prompt's length at concurrency 1
    (``first_seconds``: one request at a time, its prefill alone in its pass); the plain step at each concurrency, the
    plain run's wall seconds there (``plain_seconds``) less its prefills' tokens, over its iterations; and a round's
    own seconds at each concurrency of the speculative runs (``speculative``: (concurrency, each request's rounds,
    tokens drafted a round, wall seconds)), from each run's wall seconds less its iterations priced without the round;
    both solved in rising concurrency (``_per_concurrency``)."""
    lengths = [float(n) for n in prompt_tokens]
    mean_length, mean_first = sum(lengths) / len(lengths), sum(first_seconds) / len(first_seconds)
    spread = sum((n - mean_length) ** 2 for n in lengths)
    slope = sum((n - mean_length) * (f - mean_first) for n, f in zip(lengths, first_seconds)) / spread if spread else 0
    token_seconds, prefill = max(slope, 0.0), sum(n - 1 for n in lengths)
    plain_rows = {c: [len(a) for a in batched_iterations([tokens] * len(lengths), c)] for c in plain_seconds}
    steps = _per_concurrency([(c, plain_rows[c], s - token_seconds * prefill) for c, s in plain_seconds.items()])
    plain = ServerCosts(steps, token_seconds)
    runs = []
    for concurrency, rounds, drafted, seconds in speculative:
        iterations = batched_iterations([1 + r for r in rounds], concurrency)
        priced = fixed_count_seconds(plain, [1 + r for r in rounds], prompt_tokens, concurrency, drafted)  # no round
        runs.append((concurrency, [len(active) for active in iterations], seconds - priced))
    return ServerCosts(steps, token_seconds, _per_concurrency(runs))


def _per_concurrency(runs: list) -> dict:
    """{concurrency: seconds an iteration} from runs (concurrency, each iteration's rows, seconds over them), solved in
    rising concurrency: a run's iterations of fewer rows than its concurrency are priced from the values already solved
    (linear between, as ``ServerCosts`` reads its tables), which leaves its own concurrency's value one unknown. None
    is below 0 (a round costs at least its pass: a negative residual says the pass was priced high); a concurrency no
    iteration reached (more slots than requests) is left out."""
    concurrencies = [c for c, _, _ in runs]
    if len(set(concurrencies)) != len(concurrencies):
        raise ValueError(f"runs must be at distinct concurrencies, got {sorted(concurrencies)}")
    solved: dict = {}
    for concurrency, rows, residual in sorted(runs):
        below = max(solved, default=None)
        known, weight = 0.0, 0.0
        for r in rows:
            if below is not None and r <= below:
                known += _between(solved, r)
            else:  # between the largest solved concurrency and this one (or below it, where none is solved)
                share = 1.0 if below is None else (r - below) / (concurrency - below)
                known += 0.0 if below is None else (1 - share) * solved[below]
                weight += share
        if weight > 0:
            solved[concurrency] = max((residual - known) / weight, 0.0)
    return solved
