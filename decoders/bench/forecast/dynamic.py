"""EAGLE-2's dynamic tree, forecast before it is run (docs/theory-trees.md §12, "Forecasting a dynamic tree").

* The text: windows of held-out text continued greedily by the target (``greedy_continuations``), the text a
  decoder walks at T = 0.
* At every position of it the draft grows its widest tree of branching K and depth D (every node it drafts kept)
  and one target call scores it; each node's confidence s (its cumulative draft log-probability) is recorded
  beside its acceptance under the target-only rule, the target's probability of its path (0 or 1 at T = 0)
  (``node_acceptance``).
* Tokens per call at each budget N, replayed: the tree of N nodes keeps the N - 1 most confident; an iteration
  starting at a position accepts its kept nodes on the greedy path and the next starts after them
  (``spectheory.dynamic_trees.replayed_tokens``). Beside it, EAGLE-2's premise: c(s) fitted on the same nodes
  (``calibrate_paths``) and the harmonic mean of 1 + the sum of c over the kept nodes (``expected_tokens_dynamic``).
* Call costs on other prompts (``cost_prompts``): the tree decoder at each budget interleaved with our
  autoregressive decoder; its seconds per iteration, and the autoregressive seconds per prompt.
* The forecast speedup from both (``spectheory.costs.forecast_speedup``: the tree decoder's iteration timed whole,
  its verify call included, against the autoregressive seconds per token).

Nothing here decodes the prompts the forecast is judged on: the windows are drawn with seeds of their own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from decoders._loop import feed_draft, forward_after, start
from decoders.autoregressive import generate_autoregressive
from decoders.bench.forecast.document import BudgetForecast, DynamicForecast
from decoders.bench.inputs import Pair
from decoders.bench.prompts import text_windows
from decoders.dynamic_tree import DynamicTree, draft_dynamic
from decoders.models.protocol import synchronize
from decoders.randomness import seeded
from decoders.sampling import Sampling, adjusted_probs, history_of
from decoders.tree import TreeConfig, generate_tree
from plumbing.timing import time_interleaved
from plumbing.validation import as_int
from spectheory.costs import forecast_speedup
from spectheory.dynamic_trees import calibrate_paths, expected_tokens_dynamic, replayed_tokens
from spectheory.optimum import best_choice

__all__ = ["widest", "node_acceptance", "greedy_continuations", "DynamicPlan", "forecast_dynamic"]

BATCH = 8  # contexts per call


def widest(branching: int, depth: int) -> DynamicTree:
    """The dynamic tree of ``branching`` and ``depth`` that keeps every node the draft drafts."""
    return DynamicTree(branching, depth, branching + (depth - 1) * branching**2 + 1)


def _grown(target, draft, contexts: torch.Tensor, tree: DynamicTree, sampling: Sampling) -> tuple:
    """The committed state after ``contexts`` ``[W, L]`` and each row's tree there: tokens, parents, confidence."""
    state = start(
        target, draft, contexts.tolist(), tree.size + tree.scored + 2, history_of(sampling, contexts.tolist(), target)
    )
    tokens, parents, _, confidence = draft_dynamic(
        draft, state.draft_state, feed_draft(draft, state), state.last, tree, sampling.unconditioned
    )
    return state, tokens, parents, confidence


@torch.inference_mode()
def node_acceptance(target, draft, contexts: torch.Tensor, tree: DynamicTree, sampling: Sampling) -> tuple:
    """(confidence, acceptance), both ``[W, N - 1]``: each node of ``tree`` grown at the end of each context, and the
    target's probability of its path under ``sampling``, from one target call over the tree (as ``TreeStep`` scores
    it): the probability that the target-only rule accepts the node."""
    confidence, acceptance = [], []
    for i in range(0, len(contexts), BATCH):
        state, tokens, parents, scores = _grown(target, draft, contexts[i : i + BATCH], tree, sampling)
        history = None if state.history is None else state.history.along_tree(tokens, parents)
        p = adjusted_probs(
            forward_after(target, tokens, state.target_state, state.target_unfed, parents),
            sampling,
            validate=False,
            history=history,
        ).double()  # [B, N, V]
        rows = torch.arange(len(tokens), device=tokens.device)
        path = torch.ones(tokens.shape, dtype=torch.float64, device=tokens.device)
        for node in range(1, tokens.shape[1]):  # a parent is numbered before its children
            parent = parents[:, node]
            path[:, node] = path[rows, parent] * p[rows, parent, tokens[:, node]]
        confidence.append(scores[:, 1:].double().cpu().numpy()), acceptance.append(path[:, 1:].cpu().numpy())
    return np.concatenate(confidence), np.concatenate(acceptance)


@dataclass(frozen=True)
class _Costs:
    """The autoregressive seconds per prompt and, per budget, the tree decoder's (seconds per iteration, tokens per
    call) on the cost prompts."""

    autoregressive_seconds: float
    budgets: dict  # budget -> (seconds per iteration, tokens per call)


def _costs(target, draft, prompts: torch.Tensor, trees: dict, tokens: int, repeats: int) -> _Costs:
    """The autoregressive seconds per prompt and, per budget, the tree decoder's seconds per iteration (its whole
    seconds over its iterations: the prefill shared among them) and its tokens per call on ``prompts``; medians over
    ``repeats``, timed interleaved after one warm-up, without phase timing (which slows a decoder down)."""
    greedy, made = Sampling(0.0), {}

    def decode(tree, prompt):
        return generate_tree(
            target,
            draft,
            prompt[None],
            max_new_tokens=tokens,
            config=TreeConfig(tree, greedy),
            randomness=seeded(0, target.device),
        )

    runs = {
        "autoregressive": lambda: [
            generate_autoregressive(
                target, p[None], max_new_tokens=tokens, sampling=greedy, randomness=seeded(0, target.device)
            )
            for p in prompts
        ]
    }
    for budget, tree in trees.items():

        def run(budget=budget, tree=tree):
            generations = [decode(tree, p) for p in prompts]  # greedy: the same every repeat
            made[budget] = (sum(len(g.tokens[0]) for g in generations), sum(g.stats.iterations for g in generations))

        runs[budget] = run
    timings = time_interleaved(runs, repeats=repeats, warmup=1, synchronize=lambda: synchronize(target.device))
    return _Costs(
        autoregressive_seconds=timings["autoregressive"].median / len(prompts),
        budgets={
            budget: (timings[budget].median / made[budget][1], made[budget][0] / made[budget][1]) for budget in trees
        },
    )


def greedy_continuations(target, windows: torch.Tensor, tokens: int) -> torch.Tensor:
    """``[W, L + tokens]``: each window followed by the target's greedy continuation, decoded as one batch."""
    generation = generate_autoregressive(
        target, windows, max_new_tokens=tokens, sampling=Sampling(0.0), randomness=seeded(0, target.device)
    )
    return torch.cat([windows, torch.tensor(generation.tokens, dtype=windows.dtype, device=windows.device)], dim=1)


@dataclass(frozen=True)
class DynamicPlan:
    """What ``forecast_dynamic`` forecasts: EAGLE-2's trees of ``branching`` and ``depth`` at each of ``budgets``,
    along ``windows`` windows of ``length`` tokens continued ``tokens`` tokens (seeded by ``seed``), with costs from
    ``cost_prompts`` other windows over ``repeats`` timed repeats."""

    branching: int
    depth: int
    budgets: tuple
    tokens: int
    length: int
    seed: int = 0
    windows: int = 16
    cost_prompts: int = 2
    repeats: int = 2


def forecast_dynamic(pair: Pair, held_out: np.ndarray, plan: DynamicPlan) -> DynamicForecast:
    """The forecast of the module docstring at T = 0 for EAGLE-2's trees of ``branching``, ``depth`` at each budget.
    ``windows`` windows of ``length`` tokens of ``held_out`` are continued greedily by the target for ``tokens``
    tokens (the text a decoder at T = 0 walks), and the draft's widest tree is grown and scored by the target at
    every position of the continuations. Per budget: tokens per call replayed along them (the forecast,
    ``replayed_tokens``) and from the calibration fitted on them (the premise's, ``expected_tokens_dynamic``).
    ``cost_prompts`` other windows give the costs over ``repeats`` timed repeats. Returns the JSON section: per
    budget the forecast tokens per call and speedup, the budget it recommends (the fastest forecast; ties to the
    smaller), the calibration, what went into it and its seconds (``DynamicForecast``)."""
    target, draft, branching, depth, budgets = pair.target, pair.draft, plan.branching, plan.depth, plan.budgets
    tokens, length, seed, windows = plan.tokens, plan.length, plan.seed, plan.windows
    cost_prompts, repeats = plan.cost_prompts, plan.repeats
    started = time.perf_counter()
    as_int("windows", windows, low=1), as_int("cost_prompts", cost_prompts, low=1), as_int("repeats", repeats, low=1)
    greedy, full = Sampling(0.0), widest(branching, depth)
    text = greedy_continuations(target, text_windows(held_out, windows, length, seed + 2), tokens)
    measured = [node_acceptance(target, draft, text[:, : length + cut], full, greedy) for cut in range(tokens)]
    confidence, acceptance = (np.stack(part, axis=1) for part in zip(*measured))  # [W, tokens, nodes]
    calibration = calibrate_paths(confidence.reshape(-1, full.size - 1), acceptance.reshape(-1, full.size - 1))
    trees = {budget: DynamicTree(branching, depth, budget) for budget in budgets}
    costs = _costs(target, draft, text_windows(held_out, cost_prompts, length, seed + 3), trees, tokens, repeats)
    order = np.argsort(-confidence, axis=2, kind="stable")  # the kept nodes first, as ``draft_dynamic`` ranks them
    rows = []
    for budget in budgets:
        kept = order[..., : budget - 1]
        expected = replayed_tokens(np.take_along_axis(acceptance, kept, axis=2).sum(axis=2))
        seconds, tokens_per_call = costs.budgets[budget]
        rows.append(
            BudgetForecast(
                budget=budget,
                forecast_tokens_per_call=expected,
                calibrated_tokens_per_call=expected_tokens_dynamic(
                    calibration, confidence.reshape(-1, full.size - 1), budget
                ),
                seconds_per_iteration=seconds,
                tokens_per_call_on_cost_prompts=tokens_per_call,
                forecast_speedup=forecast_speedup(
                    expected, costs.autoregressive_seconds / tokens, 0.0, seconds
                ),  # the iteration timed whole: its verify call is in the other seconds
            )
        )
    best = best_choice(rows, lambda row: row.forecast_speedup, lambda row: row.budget)
    return DynamicForecast(
        branching=branching,
        depth=depth,
        calibration=calibration.as_dict(),
        rows=tuple(rows),
        recommended_budget=best.budget,
        autoregressive_seconds=costs.autoregressive_seconds,
        used={
            "windows": windows,
            "contexts": windows * tokens,
            "cost_prompts": cost_prompts,
            "length": length,
            "tokens": tokens,
            "repeats": repeats,
            "seeds": {"windows": seed + 2, "costs": seed + 3},
        },
        seconds=time.perf_counter() - started,
    )
