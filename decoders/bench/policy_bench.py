"""Draft-length policies against the best fixed gamma, measured on a pair (docs/theory.md §13).

At each temperature the autoregressive decoder, the speculative decoder at every fixed gamma and at every policy
(``decoders.policies``, the engines' defaults) decode the prompts one at a time, timed interleaved repeat by repeat;
each row reports tokens per target call, draft tokens proposed and wasted (proposed, not accepted) per generated
token, and the speedup with its spread over repeats. A policy object lives for one timed run, so a rule that
persists over calls (transformers' ``heuristic``) carries its length from prompt to prompt.

Every row also carries the replay's prediction: the same policy object run along the target's own continuation
of each prompt (greedy at T = 0, sampled at T > 0), where at each position the draft's token and whether the
target accepts it are drawn as the decoder draws them (``acceptance_trace``: nothing random at T = 0; at T > 0,
``REPLAY_DRAWS`` draws averaged) and the draft's law q there is what the policy sees. Tokens per call follow, and
the speedup from a cost profile whose jobs are timed interleaved with the runs (t_step, t_draft, the verify call
at every width, t_iteration, prefills: ``decoders.bench.profile``), each iteration costing max(d, 1) draft calls
and a verify call of d + 1 positions for d proposed drafts. Past a rejection the replay's draft sees the text, not
its own rejected token, and at T > 0 the next position is the text's, not the accepted draft token (docs/theory.md
§13 says what that approximates).
"""

from __future__ import annotations

import copy
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import acceptance_calibration, adjusted_along_text, engine_metrics
from decoders.bench.bench import BenchSettings, environment, model_dtype
from decoders.bench.documents import PolicyBench, PolicyTemperature
from decoders.bench.inputs import Pair
from decoders.bench.profile import ProfilePlan, profile_jobs
from decoders.bench.prompts import text_windows
from decoders.bench.rows import PolicyRow
from decoders.models.protocol import synchronize
from decoders.policies import POLICIES, DraftPolicy, make_policy
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.timing import repeat_ratios, time_interleaved
from plumbing.validation import as_positive_int
from spectheory.costs import CostProfile, forecast_speedup, width_priced
from spectheory.optimum import best_choice

__all__ = [
    "BENCH_POLICIES",
    "acceptance_trace",
    "replay",
    "replay_prompts",
    "predicted",
    "PolicyPlan",
    "bench_policies",
    "policy_lines",
    "check_policies",
]

#: Every policy but "fixed" (the fixed gammas are their own rows).
BENCH_POLICIES = tuple(name for name in POLICIES if name != "fixed")
POLICY_CALIBRATION_WINDOWS = (32, 128)  # held-out windows x tokens for the rejection-risk predictor
REPLAY_DRAWS = 16  # draws of each draft's randomness along the sampled texts at T > 0 (one at T = 0)


def check_policies(names) -> tuple:
    names = tuple(names)
    for name in names:
        if name not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
    return names


@torch.no_grad()
def acceptance_trace(
    pair: Pair, continuations: torch.Tensor, skip: int, sampling: Sampling, *, draws: int = 1, seed: int = 0
) -> list[dict]:
    """Along ``continuations`` ``[P, L]`` after ``skip`` tokens, ``draws`` draws (one at T = 0, where nothing is
    random) of what the draft does at each position under ``sampling``: the drafted token x ~ q ``drafted [P, T]``,
    whether it is accepted (u < min(1, p(x) / q(x)) for a fresh uniform u, so accepted with probability
    sum_x min(p, q); at T = 0: the draft's argmax is the text's next token) ``accepted [P, T]``, and the law a
    policy reads there ``q [P, T, V]`` (``seen_law``; shared by the draws). Row by row, so memory is one row's."""
    target, draft = pair.target, pair.draft
    draws = 1 if sampling.greedy else as_positive_int("draws", draws)
    generator = torch.Generator(device=target.device).manual_seed(int(seed))
    drafted, accepted, seen = [], [], []
    for row in continuations.to(target.device):
        p, q, proposed, law = adjusted_along_text(target, draft, row[None], sampling, skip)  # [1, T, V], [1, T]
        tokens = torch.multinomial(q[0], draws, replacement=True, generator=generator).T  # [draws, T]
        drawn = [law[0].expand(draws, -1, -1).gather(-1, tokens[..., None])[..., 0] for law in (p, q)]  # [draws, T]
        uniform = torch.rand(tokens.shape, generator=generator, device=tokens.device)
        drafted.append(tokens[:, None])
        accepted.append(((uniform < drawn[0] / drawn[1]) & proposed)[:, None])  # [draws, 1, T]
        seen.append(law)
    drafted, accepted, seen = torch.cat(drafted, dim=1), torch.cat(accepted, dim=1), torch.cat(seen)
    return [{"accepted": accepted[i], "drafted": drafted[i], "q": seen} for i in range(draws)]


def replay(policy: DraftPolicy, trace: dict, *, cap: int, tokens: int) -> list[list[tuple]]:
    """Each row's iterations (proposed, accepted) when ``policy`` (fresh state) drafts at most ``cap`` per iteration
    along ``trace`` (one of ``acceptance_trace``'s) until ``tokens`` are emitted."""
    accepted_along, q, drafted = trace["accepted"], trace["q"], trace["drafted"]
    batch, length = accepted_along.shape
    device, rows = accepted_along.device, torch.arange(batch, device=accepted_along.device)
    state, position = policy.start(batch, device), torch.zeros(batch, dtype=torch.int64, device=device)
    iterations = [[] for _ in range(batch)]
    while bool((position < tokens).any()):
        active = position < tokens
        limit = policy.limit(state, batch, device).clamp(max=cap)
        drafting, proposed = limit > 0, torch.zeros(batch, dtype=torch.int64, device=device)
        for i in range(cap):
            if i and not bool(drafting.any()):
                break
            at = (position + i).clamp(max=length - 1)
            proposed += drafting.long()
            drafting = drafting & policy.keep(state, i, q[rows, at], drafted[rows, at]) & (i + 1 < limit)
        window = (position[:, None] + torch.arange(cap, device=device)).clamp(max=length - 1)  # [B, cap]
        hits = accepted_along.gather(1, window) & (torch.arange(cap, device=device) < proposed[:, None])
        accepted = hits.long().cummin(dim=1).values.sum(dim=1)
        policy.update(state, proposed, accepted)
        for row in active.nonzero()[:, 0].tolist():
            iterations[row].append((int(proposed[row]), int(accepted[row])))
        position = torch.where(active, position + accepted + 1, position)
    return iterations


def replay_prompts(policy: DraftPolicy, trace: dict, *, cap: int, tokens: int) -> list[list[tuple]]:
    """``replay`` prompt after prompt with one policy object, as the bench decodes them at batch 1 (a rule that
    persists over calls carries over; the batch-dependent rules see batch 1)."""
    return [
        replay(policy, {key: value[row : row + 1] for key, value in trace.items()}, cap=cap, tokens=tokens)[0]
        for row in range(len(trace["accepted"]))
    ]


@dataclass(frozen=True)
class Replayed:
    """What a policy's replayed iterations predict: tokens per target call and the speedup (``predicted``)."""

    tokens_per_call: float
    speedup: float


def predicted(iterations: list[list[tuple]], profile: CostProfile, tokens: int) -> Replayed:
    """Tokens per call and the speedup the replay's iterations ((drafted, accepted) per call) predict under
    ``profile``'s costs (``spectheory.costs.forecast_speedup``): each call's verify priced by its width, drafted + 1
    (``width_priced``), and its draft-and-rest seconds where it drafted, the round's own t_iteration alone where it
    drafted nothing."""
    calls = [pair for row in iterations for pair in row]
    widths = Counter(d + 1 for d, _ in calls)
    per_call = sum(n + 1 for _, n in calls) / len(calls)
    speedup = forecast_speedup(
        per_call,
        profile.t_step,
        width_priced(profile.t_verify, widths),
        sum(profile.overhead_seconds(d) if d else profile.t_iteration for d, _ in calls) / len(calls),
        tokens=tokens,
        target_prefill=profile.target_prefill,
        draft_prefill=profile.draft_prefill,
    )
    return Replayed(per_call, speedup)


def _row(name: str, policy: str, generations: list, timing, autoregressive, gamma_max: int) -> PolicyRow:
    ratios = repeat_ratios(autoregressive, timing)
    accepted = [n for g in generations for step in g.stats.accepted_per_iteration for n in step]
    proposed = [n for g in generations for step in g.stats.proposed_per_iteration for n in step]
    emitted = sum(len(row) for g in generations for row in g.tokens)
    speedup = statistics.median(ratios)
    return PolicyRow(
        decoder=name,
        tokens_per_call=sum(n + 1 for n in accepted) / len(accepted),
        drafted_per_token=sum(proposed) / emitted,
        wasted_per_token=(sum(proposed) - sum(accepted)) / emitted,
        mean_proposed=sum(proposed) / len(proposed),
        seconds=timing.median,
        speedup=speedup,
        speedup_spread=[min(ratios), speedup, max(ratios)],
        **asdict(engine_metrics(generations, gamma_max)),
        policy=policy,
    )


def _calibration(target, draft, held_out: np.ndarray, sampling: Sampling, seed: int, count: int):
    length = POLICY_CALIBRATION_WINDOWS[1]
    return acceptance_calibration(
        target, draft, text_windows(held_out, count, length, seed), sampling, skip=length // 4
    )


@dataclass(frozen=True)
class PolicyPlan:
    """Which draft-length policies the bench runs beside the fixed gammas, and how many windows of the held-out text
    fit their rejection-risk predictor (the report passes its own budget)."""

    policies: tuple = BENCH_POLICIES
    calibration_windows: int = POLICY_CALIBRATION_WINDOWS[0]


def bench_policies(
    pair: Pair,
    prompts: torch.Tensor,
    held_out: np.ndarray,
    settings: BenchSettings,
    plan: PolicyPlan = PolicyPlan(),
    *,
    progress: bool | None = None,
) -> PolicyBench:
    """The module's measurement on ``prompts`` ``[P, L]`` at batch 1 for ``settings``' gammas and temperatures, the
    policies of ``plan`` fit on its windows of the ``held_out`` token ids."""
    target, draft, target_name, draft_name = pair.target, pair.draft, pair.target_name, pair.draft_name
    policies, new, windows = check_policies(plan.policies), settings.max_new_tokens, plan.calibration_windows
    # Every policy drafts at most what both models' contexts leave after the prompt, the new tokens and a bonus.
    contexts = [model.max_context for model in (target, draft) if model.max_context is not None]
    room = min(contexts) - prompts.shape[1] - new - 1 if contexts else None
    if room is not None and room < 1:
        raise ValueError(
            f"prompt length {prompts.shape[1]} plus max_new_tokens {new} leaves no room to draft in the "
            f"models' context of {min(contexts)} tokens"
        )
    blocks = []
    with progress_bar(progress, total=None, desc=f"policies {draft_name}") as bar:
        for temperature in settings.temperatures:
            calibration = _calibration(target, draft, held_out, settings.at(temperature), settings.seed, windows)
            rules = {name: make_policy(name, calibration=calibration, cap=room) for name in policies}
            blocks.append(_at_temperature(pair, prompts, settings, temperature, rules, bar))
            bar.update()
    return PolicyBench(
        target=target_name,
        draft=draft_name,
        batch_size=1,
        environment=environment(target.device, model_dtype(target)),
        settings=dict(settings.as_dict(), policies=list(policies), calibration_windows=windows),
        temperatures=tuple(blocks),
        profile=blocks[0].profile if blocks else None,
    )


def _at_temperature(
    pair: Pair, prompts: torch.Tensor, settings: BenchSettings, temperature: float, policies: dict, bar
) -> PolicyTemperature:
    """``bench_policies`` at one temperature: every fixed gamma and policy timed interleaved with the autoregressive
    runs and the profile's jobs, each row beside its replayed prediction; the best fixed gamma and policy."""
    target, draft = pair.target, pair.draft
    sampling, new = settings.at(temperature), settings.max_new_tokens
    rules = {f"fixed {g}": DraftPolicy(g) for g in settings.gammas}  # decoded without a policy: the lean path
    fixed = set(rules)
    rules.update(policies)
    cap = max(rule.gamma_max for rule in rules.values())
    outputs = {}

    def decoder(name, rule):
        def run():
            fresh = copy.deepcopy(rule)  # one policy per run: it persists over the prompts
            outputs[name] = [
                generate_speculative(
                    target,
                    draft,
                    p[None],
                    max_new_tokens=new,
                    randomness=seeded(i, target.device),
                    config=SpeculativeConfig(rule.gamma_max, sampling, policy=None if name in fixed else fresh),
                )
                for i, p in enumerate(prompts)
            ]

        return run

    runs = {
        "autoregressive": lambda: [
            generate_autoregressive(
                target, p[None], max_new_tokens=new, sampling=sampling, randomness=seeded(i, target.device)
            )
            for i, p in enumerate(prompts)
        ]
    }
    runs.update({name: decoder(name, rule) for name, rule in rules.items()})
    # the replay's costs, measured interleaved with the runs they predict
    plan = ProfilePlan(max(settings.gammas), new, settings.warmup, verify_widths=cap + 1)
    jobs, recorder = profile_jobs(pair, prompts, sampling, plan)
    runs.update({("profile", key): job for key, job in jobs.items()})
    timings = time_interleaved(
        runs,
        repeats=settings.repeats,
        warmup=settings.warmup,
        synchronize=lambda: synchronize(target.device),
        progress=bar.update,
    )
    rows = [
        _row(name, rule.describe(), outputs[name], timings[name], timings["autoregressive"], rule.gamma_max)
        for name, rule in rules.items()
    ]
    profile = recorder.profile()
    continuations = torch.tensor(
        [
            p.tolist()
            + list(
                generate_autoregressive(
                    target,
                    p[None],
                    max_new_tokens=new + cap + 1,
                    sampling=sampling,
                    randomness=seeded(i, target.device),
                ).tokens[0]
            )
            for i, p in enumerate(prompts)
        ]
    )
    traces = acceptance_trace(pair, continuations, prompts.shape[1], sampling, draws=REPLAY_DRAWS, seed=settings.seed)
    for at, row in enumerate(rows):
        replayed = predicted(
            [
                iterations
                for trace in traces
                for iterations in replay_prompts(copy.deepcopy(rules[row.decoder]), trace, cap=cap, tokens=new)
            ],
            profile,
            new,
        )
        rows[at] = replace(
            row,
            predicted_tokens_per_call=replayed.tokens_per_call,
            predicted_speedup=replayed.speedup,
            tokens_over_predicted=row.tokens_per_call / replayed.tokens_per_call,
            predicted_over_measured=replayed.speedup / row.speedup,
        )
    # the one tie rule (spectheory.optimum): the fewest drafts among equal speedups, a policy by its gamma cap
    best_fixed = best_choice(
        [row for row in rows if row.decoder in fixed], lambda row: row.speedup, lambda row: rules[row.decoder].gamma_max
    )
    others = [row for row in rows if row.decoder not in fixed]
    best_policy = (
        best_choice(others, lambda row: row.speedup, lambda row: rules[row.decoder].gamma_max) if others else None
    )
    summary = PolicyTemperature(
        temperature=temperature,
        autoregressive_seconds=timings["autoregressive"].median,
        rows=tuple(rows),
        best_fixed=best_fixed.decoder,
        profile=profile.as_dict(),
        replay_draws=len(traces),
    )
    if best_policy is None:
        return summary
    gains = repeat_ratios(timings[best_fixed.decoder], timings[best_policy.decoder])
    gain = best_policy.speedup / best_fixed.speedup
    return replace(
        summary,
        best_policy=best_policy.decoder,
        gain_over_best_fixed=gain,
        gain_spread=[min(gains), gain, max(gains)],
        use_policy=min(gains) > 1,
    )


def policy_lines(document: PolicyBench) -> list[str]:
    """The comparison as printed by `spectheory bench --policies`."""
    env = document.environment
    lines = [f"{document.target} with {document.draft}, batch 1; {env['device_name']}, {env['dtype']}"]
    for block in document.temperatures:
        lines.append(
            f"T = {block.temperature:g}: decoder  tokens/call  drafted/token  wasted/token  speedup "
            f"(min-max)  replay tokens/call  replay speedup"
        )
        for row in block.rows:
            low, _, high = row.speedup_spread
            replayed = (
                f"  {row.predicted_tokens_per_call:8.3f} ({row.tokens_over_predicted:.3f})  "
                f"{row.predicted_speedup:7.3f} ({row.predicted_over_measured:.3f})"
                if row.predicted_speedup is not None
                else ""
            )
            lines.append(
                f"  {row.decoder:20s}  {row.tokens_per_call:8.3f}  {row.drafted_per_token:8.3f}  "
                f"{row.wasted_per_token:8.3f}  {row.speedup:7.3f} ({low:.2f}-{high:.2f}){replayed}"
            )
        if block.best_policy is not None:
            low, _, high = block.gain_spread
            lines.append(
                f"  best fixed: {block.best_fixed}; best policy: {block.best_policy}, "
                f"{block.gain_over_best_fixed:.3f}x the best fixed gamma (repeats {low:.3f}-{high:.3f}): "
                + ("use it" if block.use_policy else "keep the fixed gamma")
            )
    return lines
