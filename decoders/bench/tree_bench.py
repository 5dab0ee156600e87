"""Tree against chain at equal node budgets, measured on a pair at T = 0 (docs/theory-trees.md §12).

The draft's rank frequencies a_1..a_k (how often the target's greedy token is the draft's j-th most likely) are
measured along held-out text and along the target's own greedy continuations of the bench prompts (the text the
decoders walk). For each budget n (nodes per verify call, the root included) the optimal tree of the rank model
(Sequoia's programme on the decoding a) is decoded with the tree decoder and the chain of n - 1 drafts with the
speculative decoder (and, with ``dynamic``, EAGLE-2's dynamic tree of n nodes, which the rank model does not
predict); all are timed interleaved with the autoregressive decoder, repeat by repeat. Beside each
measurement: the rank model's tokens per call E; the iterations replayed along the greedy continuations
(``replayed_iterations``: the walk each position's greedy rank allows, exact at T = 0, as the chain's along-text
replay); and the calibrated speedup: the autoregressive seconds over prefill + replayed iterations x seconds per
iteration (the rank model's: tokens / E iterations), both costs medians over profiled runs of the decoder
interleaved with the timed ones (its prefill phases; its other wall time over its iterations: draft levels, the
verify call at the tree's width, acceptance, commit). One verify call of the tree is timed against one chain
call of the same width (the mask's cost).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import BenchSettings, environment, model_dtype
from decoders.bench.documents import TreeBench, TreeCall, TreeChoice
from decoders.bench.forecast.document import DynamicForecast
from decoders.bench.forecast.dynamic import DynamicPlan, forecast_dynamic
from decoders.bench.inputs import Pair
from decoders.bench.prompts import text_windows
from decoders.bench.rows import TreeRow
from decoders.models.protocol import has_tree, synchronize
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import DynamicTree, TreeConfig, breadth_first, generate_tree
from plumbing.timing import repeat_ratios, time_interleaved
from plumbing.validation import as_int
from spectheory.metrics import EngineCounts
from spectheory.optimum import best_choice
from spectheory.trees import Tree, expected_tokens_rank, optimal_tree

__all__ = [
    "BENCH_TREE_BUDGETS",
    "MAX_RANKS",
    "greedy_ranks",
    "rank_frequencies",
    "replayed_iterations",
    "TreePlan",
    "bench_trees",
    "check_budgets",
    "check_dynamic",
    "tree_lines",
]

BENCH_TREE_BUDGETS = (4, 8, 16, 32)
MAX_RANKS = 8  # candidates per node the rank frequencies cover
HELD_OUT_WINDOWS = (32, 128)  # windows x tokens of held-out text for the rank frequencies
CALL_REPEATS = 30  # one-call timings of the tree against the chain


def check_budgets(budgets) -> tuple:
    budgets = tuple(budgets)
    if not budgets:
        raise ValueError("budgets must name at least one node budget")
    return tuple(as_int("budget", budget, low=2, high=256) for budget in budgets)


def check_dynamic(spec: str | None, budgets) -> tuple | None:
    """``K:D`` (``--dynamic``): EAGLE-2's branching and depth, valid at every budget (None: no dynamic trees)."""
    if spec is None:
        return None
    try:
        branching, depth = (int(value) for value in str(spec).split(":"))
        for budget in check_budgets(budgets):
            DynamicTree(branching, depth, budget)
    except ValueError as error:
        raise ValueError(
            f"dynamic must be K:D (branching, depth) valid at every budget, got {spec!r}: {error}"
        ) from None
    return branching, depth


@torch.no_grad()
def greedy_ranks(
    target, draft, windows: torch.Tensor, *, skip: int, ranks: int = MAX_RANKS, batch_size: int = 8
) -> np.ndarray:
    """``[W, L - skip]``: at each position of ``windows`` ``[W, L]`` after the first ``skip`` tokens, the rank of the
    target's greedy token among the draft's most likely tokens there (1 for the first, ties broken by the lower id;
    0 beyond ``ranks``)."""
    as_int("skip", skip, low=1, high=windows.shape[1] - 1)
    out = []
    for start in range(0, len(windows), batch_size):
        rows = windows[start : start + batch_size].to(target.device)
        greedy = target.forward(rows, target.new_state(len(rows), rows.shape[1]))[:, skip - 1 : -1].argmax(dim=-1)
        logits = draft.forward(rows, draft.new_state(len(rows), rows.shape[1]))[:, skip - 1 : -1]  # [B, L - skip, V]
        order = torch.sort(logits.float(), dim=-1, descending=True, stable=True).indices[..., :ranks]
        hit = order == greedy[..., None]  # [B, L - skip, ranks], at most one rank per position
        out.append(torch.where(hit.any(dim=-1), hit.to(torch.int64).argmax(dim=-1) + 1, 0).cpu().numpy())
    return np.concatenate(out)


def rank_frequencies(
    target, draft, windows: torch.Tensor, *, skip: int, ranks: int = MAX_RANKS, batch_size: int = 8
) -> np.ndarray:
    """a_1..a_ranks at T = 0 along ``windows`` ``[W, L]`` after the first ``skip`` tokens: the share of positions
    where the target's greedy token is the draft's j-th most likely token (``greedy_ranks``)."""
    return _frequencies(greedy_ranks(target, draft, windows, skip=skip, ranks=ranks, batch_size=batch_size), ranks)


def _frequencies(found: np.ndarray, ranks: int = MAX_RANKS) -> np.ndarray:
    """a_1..a_ranks: the share of ``found``'s positions (``greedy_ranks``) at each rank."""
    return np.array([(found == j).sum() for j in range(1, ranks + 1)]) / found.size


def replayed_iterations(tree: Tree, ranks) -> int:
    """Iterations of greedy target-only tree decoding along a text whose positions have the greedy ``ranks``
    (``greedy_ranks``, one row): from each iteration's first position the walk moves to the child whose rank is the
    next position's, while the node has one (exact at T = 0: on the greedy text the draft's candidates at a node
    are its ranking at that position)."""
    children = [tree.children(node) for node in range(tree.size)]
    position, iterations = 0, 0
    while position < len(ranks):
        node, accepted = 0, 0
        while position + accepted < len(ranks) and 1 <= ranks[position + accepted] <= len(children[node]):
            node, accepted = children[node][ranks[position + accepted] - 1], accepted + 1
        position, iterations = position + accepted + 1, iterations + 1
    return iterations


@dataclass(frozen=True)
class _Candidate:
    """One decoder of the comparison: ``kind`` chain, tree or dynamic at ``budget`` nodes."""

    kind: str
    budget: int
    tree: Tree | DynamicTree

    @property
    def name(self) -> str:
        return f"{self.kind} {self.budget}"

    def decode(self, target, draft, prompt: torch.Tensor, max_new_tokens: int, profile: bool = False):
        randomness = seeded(0, target.device)
        if self.kind == "chain":
            return generate_speculative(
                target,
                draft,
                prompt,
                max_new_tokens=max_new_tokens,
                config=SpeculativeConfig(self.tree.size - 1, GREEDY),
                randomness=randomness,
                profile=profile,
            )
        return generate_tree(
            target,
            draft,
            prompt,
            max_new_tokens=max_new_tokens,
            config=TreeConfig(self.tree, GREEDY, "target-only"),
            randomness=randomness,
            profile=profile,
        )


def _call_ratio(target, prompt: torch.Tensor, tree: Tree, repeats: int) -> TreeCall:
    """Seconds of one target call scoring ``tree``'s nodes (``forward_tree``) and of one chain call of the same
    width (``forward``), after ``prompt`` ``[L]``, timed interleaved."""
    tree = breadth_first(tree)
    state = target.new_state(1, len(prompt) + tree.size + 1)
    with torch.no_grad():
        target.forward(prompt[None].to(target.device), state)
    held = state.lengths.clone()
    nodes = (torch.arange(tree.size, device=target.device) % target.vocab_size)[None]  # any tokens: same cost
    parents = torch.tensor(tree.parents, device=target.device)[None]

    @torch.no_grad()
    def tree_call():
        target.forward_tree(nodes, state, parents)
        target.truncate(state, held)

    @torch.no_grad()
    def chain_call():
        target.forward(nodes, state)
        target.truncate(state, held)

    timing = time_interleaved(
        {"tree": tree_call, "chain": chain_call},
        repeats=repeats,
        warmup=3,
        synchronize=lambda: synchronize(target.device),
    )
    return TreeCall(
        width=tree.size,
        tree_call_seconds=timing["tree"].median,
        chain_call_seconds=timing["chain"].median,
        tree_over_chain_call=timing["tree"].median / timing["chain"].median,
    )


def _engine_counts(generations: list, tree: Tree) -> EngineCounts:
    """The runs' rounds as an engine counts a tree's (docs/metrics.md): every node but the root is a draft token
    of its round; the accepted ones are the accepted path's."""
    accepted = [
        n for generation in generations for iteration in generation.stats.accepted_per_iteration for n in iteration
    ]
    return EngineCounts("ours", len(accepted), len(accepted) * (tree.size - 1), sum(accepted))


def _costs(generations: list) -> tuple[float, float]:
    """(prefill seconds in all, seconds per iteration) of profiled runs: their prefill phases (the draft's: the
    target reads the prompt in its first call, whose cost the iterations then share), and their wall time but the
    prefill over their iterations."""
    prefill = sum(g.stats.seconds["prefill"] for g in generations)
    seconds = sum(g.stats.seconds["total"] for g in generations) - prefill
    return prefill, seconds / sum(g.stats.iterations for g in generations)


def _row(candidate, timings: dict, outputs: list, profiled: list, along: np.ndarray, text: np.ndarray) -> TreeRow:
    """One candidate's row: its timings against the autoregressive runs', its counts from ``outputs``, its costs
    (``profiled``: per repeat, prefill and per-iteration seconds) and, for static shapes, the rank model's and the
    replay's predictions from the greedy ranks ``along`` the continuations (and their frequencies) and the rank
    frequencies of held-out ``text``."""
    autoregressive, timing = timings["autoregressive"], timings[candidate.name]
    ratios = repeat_ratios(autoregressive, timing)
    counts = _engine_counts(outputs, candidate.tree)
    measured_tokens = counts.mean_acceptance_length
    prefill, per_iteration = (statistics.median(costs) for costs in zip(*profiled))
    speedup = statistics.median(ratios)
    row = TreeRow(
        kind=candidate.kind,
        budget=candidate.budget,
        tree=candidate.tree.as_dict(),
        iterations=int(counts.drafts),
        tokens_per_call=measured_tokens,
        mean_acceptance_length=measured_tokens,
        acceptance_rate=counts.acceptance_rate,
        seconds=timing.median,
        seconds_spread=[min(timing.seconds), max(timing.seconds)],
        speedup=speedup,
        speedup_spread=[min(ratios), speedup, max(ratios)],
        prefill_seconds=prefill,
        seconds_per_iteration=per_iteration,
    )
    if candidate.kind != "dynamic":  # the rank model and the replay predict static shapes
        decoding = _frequencies(along)
        predicted = expected_tokens_rank(candidate.tree, decoding[:1] if candidate.kind == "chain" else decoding)
        iterations = sum(replayed_iterations(candidate.tree, ranks) for ranks in along)
        calibrated = autoregressive.median / (prefill + iterations * per_iteration)
        row = replace(
            row,
            predicted_tokens_per_call=predicted,
            tokens_over_predicted=measured_tokens / predicted,
            predicted_tokens_per_call_held_out=expected_tokens_rank(
                candidate.tree, text[:1] if candidate.kind == "chain" else text
            ),
            rank_model_speedup=autoregressive.median / (prefill + along.size / predicted * per_iteration),
            replayed_iterations=iterations,
            calibrated_speedup=calibrated,
            calibrated_over_measured=calibrated / speedup,
        )
    return row


def _judged(row: TreeRow, forecast: DynamicForecast | None) -> TreeRow:
    """``row``; a dynamic tree's with the forecast of its budget (``decoders.bench.forecast.dynamic``) beside what it
    measured."""
    if not forecast or row.kind != "dynamic":
        return row
    ahead = forecast.at(row.budget)
    return replace(
        row,
        forecast_tokens_per_call=ahead.forecast_tokens_per_call,
        forecast_speedup=ahead.forecast_speedup,
        calibrated_tokens_per_call=ahead.calibrated_tokens_per_call,
        tokens_forecast_over_measured=ahead.forecast_tokens_per_call / row.tokens_per_call,
        forecast_over_measured=ahead.forecast_speedup / row.speedup,
    )


@dataclass(frozen=True)
class TreePlan:
    """What the tree bench compares: trees and chains at each node budget of ``budgets`` (``dynamic``: EAGLE-2's
    (branching, depth) too), rank frequencies from ``held_out_windows`` windows of the held-out text, each tree's
    one-call timing ``call_repeats`` times (the report passes its own budget for both)."""

    budgets: tuple = BENCH_TREE_BUDGETS
    dynamic: tuple | None = None
    held_out_windows: int = HELD_OUT_WINDOWS[0]
    call_repeats: int = CALL_REPEATS


def bench_trees(
    pair: Pair,
    prompts: torch.Tensor,
    held_out: np.ndarray,
    settings: BenchSettings,
    plan: TreePlan = TreePlan(),
    *,
    progress: bool | None = None,
) -> TreeBench:
    """The module's comparison on ``prompts`` ``[P, L]`` at batch 1, T = 0, as ``plan`` says; rank frequencies from
    windows of ``held_out`` (token ids) and from the target's greedy continuations."""
    dynamic, held_out_windows, call_repeats = plan.dynamic, plan.held_out_windows, plan.call_repeats
    target, draft, target_name, draft_name = pair.target, pair.draft, pair.target_name, pair.draft_name
    budgets = check_budgets(plan.budgets)
    new = settings.max_new_tokens
    if not has_tree(draft):
        raise ValueError(f"draft {draft_name} has no tree attention (forward_tree): it cannot decode trees")
    started = time.perf_counter()
    forecast = (
        None
        if not dynamic
        else forecast_dynamic(  # first: from other windows, before the sweep it forecasts
            pair,
            held_out,
            DynamicPlan(
                *dynamic,
                budgets,
                tokens=new,
                length=prompts.shape[1],
                seed=settings.seed,
                windows=held_out_windows,
                repeats=settings.repeats,
            ),
        )
    )
    with progress_bar(progress, total=None, desc=f"trees {draft_name}") as bar:

        def ar(prompt):
            return generate_autoregressive(
                target, prompt, max_new_tokens=new, sampling=GREEDY, randomness=seeded(0, target.device)
            )

        continuations = torch.tensor([p.tolist() + list(ar(p[None]).tokens[0]) for p in prompts])
        along = greedy_ranks(target, draft, continuations, skip=prompts.shape[1])  # [P, new]
        decoding = _frequencies(along)
        length = HELD_OUT_WINDOWS[1]
        text = rank_frequencies(
            target, draft, text_windows(held_out, held_out_windows, length, settings.seed), skip=length // 4
        )
        candidates = [
            candidate
            for budget in budgets
            for candidate in (
                _Candidate("chain", budget, Tree.chain(budget - 1)),
                _Candidate("tree", budget, optimal_tree(decoding, budget)[0]),
                *([_Candidate("dynamic", budget, DynamicTree(*dynamic, budget))] if dynamic else []),
            )
        ]
        runs, outputs, profiled = {"autoregressive": lambda: [ar(p[None]) for p in prompts]}, {}, {}
        for candidate in candidates:

            def run(candidate=candidate):
                outputs[candidate.name] = [candidate.decode(target, draft, p[None], new) for p in prompts]

            def profile(candidate=candidate):  # its costs, measured beside its timings
                profiled.setdefault(candidate.name, []).append(
                    _costs([candidate.decode(target, draft, p[None], new, profile=True) for p in prompts])
                )

            runs[candidate.name], runs[candidate.name + " profiled"] = run, profile
        timings = time_interleaved(
            runs,
            repeats=settings.repeats,
            warmup=settings.warmup,
            synchronize=lambda: synchronize(target.device),
            progress=bar.update,
        )
        calls = [_call_ratio(target, prompts[0], c.tree, call_repeats) for c in candidates if c.kind == "tree"]
        bar.update()
    autoregressive = timings["autoregressive"]
    rows = [
        _judged(_row(candidate, timings, outputs[candidate.name], profiled[candidate.name], along, text), forecast)
        for candidate in candidates
    ]
    best = best_choice(rows, lambda row: row.speedup, lambda row: row.budget)
    return TreeBench(
        target=target_name,
        draft=draft_name,
        temperature=0.0,
        verifier="target-only",
        batch_size=1,
        environment=environment(target.device, model_dtype(target)),
        settings=dict(
            settings.as_dict(), budgets=list(budgets), held_out_windows=held_out_windows, call_repeats=call_repeats
        ),
        rank_frequencies={"decoding": decoding.tolist(), "held_out_text": text.tolist()},
        autoregressive=dict(autoregressive.as_dict(), seconds_per_token=autoregressive.median / (len(prompts) * new)),
        rows=tuple(rows),
        tree_calls=tuple(calls),
        dynamic_forecast=forecast,
        seconds=time.perf_counter() - started,
        recommendation=TreeChoice(kind=best.kind, budget=best.budget, tree=best.tree, speedup=best.speedup),
    )


def tree_lines(document: TreeBench) -> list[str]:
    """The comparison as printed by `spectheory bench --tree`."""
    env, a = document.environment, document.rank_frequencies
    lines = [
        f"{document.target} with {document.draft}, T = 0, target-only verifier, batch 1; {env['device_name']}, "
        f"{env['dtype']}; autoregressive {document.autoregressive['seconds_per_token'] * 1e3:.3f} ms per token",
        "rank frequencies a_1.. along the decoded text: "
        + ", ".join(f"{x:.3f}" for x in a["decoding"])
        + "; along held-out text: "
        + ", ".join(f"{x:.3f}" for x in a["held_out_text"]),
        "budget  kind     depth  tokens/call  iterations (replayed)  predicted  meas/pred  speedup (min-max)    "
        "calibrated  cal/measured",
    ]

    def number(value, width: int) -> str:
        return f"{'-':>{width}s}" if value is None else f"{value:{width}.3f}"

    for row in document.rows:
        low, _, high = row.speedup_spread
        replayed = "-" if row.replayed_iterations is None else str(row.replayed_iterations)
        lines.append(
            f"{row.budget:6d}  {row.kind:7s}  {row.tree['depth']:5d}  {row.tokens_per_call:11.3f}  "
            f"{row.iterations:10d} {'(' + replayed + ')':>10s}  {number(row.predicted_tokens_per_call, 9)}  "
            f"{number(row.tokens_over_predicted, 9)}  "
            f"{row.speedup:7.3f} ({low:.2f}-{high:.2f})  {number(row.calibrated_speedup, 10)}  "
            f"{number(row.calibrated_over_measured, 12)}"
        )
    forecast = document.dynamic_forecast
    for row in [row for row in document.rows if row.kind == "dynamic"] if forecast else ():
        lines.append(
            f"dynamic {row.budget}: forecast {row.forecast_tokens_per_call:.3f} tokens/call (calibrated "
            f"{row.calibrated_tokens_per_call:.3f}), "
            f"{row.forecast_speedup:.3f}x; measured {row.tokens_per_call:.3f}, {row.speedup:.3f}x "
            f"(forecast/measured {row.tokens_forecast_over_measured:.3f}, {row.forecast_over_measured:.3f})"
        )
    if forecast:
        used = forecast.used
        lines.append(
            f"the forecast recommends dynamic at budget {forecast.recommended_budget}; it took "
            f"{forecast.seconds:.1f} s ({used['windows']} other windows continued by the target, a tree "
            f"scored at each of {used['contexts']} positions; {used['cost_prompts']} cost prompts) of the "
            f"whole bench's {document.seconds:.1f} s"
        )
    for call in document.tree_calls:
        lines.append(
            f"one verify call of {call.width} positions: tree {call.tree_call_seconds * 1e3:.3f} ms, chain "
            f"{call.chain_call_seconds * 1e3:.3f} ms, {call.tree_over_chain_call:.3f}x"
        )
    best = document.recommendation
    shape = f"branching {best.tree['branching']}" if best.kind == "dynamic" else f"parents {best.tree['parents']}"
    lines.append(
        f"recommended: {best.kind} at budget {best.budget} (depth {best.tree['depth']}, {shape}), "
        f"{best.speedup:.3f}x measured"
    )
    return lines
