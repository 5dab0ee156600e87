"""Exact audits: the law of a decoder's output, summed in float64 over every outcome of its random draws.

``Enumerator`` implements the randomness interface. Row r of every draw follows ``scripts[r]`` (the
outcome indices of its successive draws); past its script it takes the first outcome of positive
probability and records each other one as a new script. Every row of a run is therefore one complete
branch, with its probability, and running the recorded scripts covers every branch exactly once. The
decoders' own code runs along every branch (docs/theory.md §7).

Two ways to sum the law of the first ``horizon`` new tokens:

- ``speculative_law`` (a dynamic programme over prefixes): one iteration at a time, from each reachable
  prefix freshly prefilled, all branches of all prefixes of one length in one batch. Fast; it trusts
  that an iteration depends on the committed prefix only, so it does not test the rollback between
  iterations.
- ``whole_run_law``: the full generation loop, once per branch, so that state carried across iterations
  (caches, their rollback, the draft's pending tokens) is covered too. A run may decode a batch of rows
  whose tokens it returns concatenated: the enumerator then treats the rows as one branch, and the law of
  the batch must be ``product_law`` of the target's, which covers couplings between rows too.

``compare_laws`` holds either against ``autoregressive_law``, the target's own law computed from fresh
forward passes over whole prefixes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Sequence

import numpy as np
import torch

from decoders._loop import start
from decoders.audit.verdict import ExactReport
from decoders.progress import progress_bar
from decoders.randomness import Randomness
from decoders.sampling import History, Sampling, adjusted_probs, history_of, stop_padded
from decoders.speculative import REFERENCE_STEP, SpeculativeConfig, SpeculativeStep, refuse_inexact
from decoders.tree import REFERENCE_TREE_STEP, TreeConfig, TreeStep, chain_config, check_tree_models, tree_room
from plumbing.validation import as_positive_int

__all__ = [
    "Enumerator",
    "Law",
    "BranchBudgetExceeded",
    "autoregressive_law",
    "speculative_law",
    "tree_law",
    "prefix_law",
    "whole_run_law",
    "product_law",
    "compare_laws",
    "lenience_bound_violations",
]

Law = dict  # tuple of token ids -> probability
BRANCH_BATCH = 4096  # most branches the prefix programme runs in one batch (its rows' states are the memory)


class Enumerator:
    """A ``Randomness`` that runs ``len(scripts)`` branches side by side, one per batch row.

    Every draw is a set of independent draws per row: ``categorical(probs [N, ..., V])`` and
    ``bernoulli(probs [N, ...])``, with the batch first. Their joint outcome (one index per row) is what
    a script records. After the run ``probability: [N]`` holds each branch's probability and
    ``branches`` the new scripts, as ``(row, script)`` pairs.
    """

    def __init__(self, scripts: Sequence[Sequence[int]]) -> None:
        self.lengths = np.array([len(script) for script in scripts], dtype=np.int64)  # [N]
        self.scripts = np.full((len(scripts), max(self.lengths.max(initial=0), 1)), -1, dtype=np.int64)
        for row, script in enumerate(scripts):
            self.scripts[row, : len(script)] = script
        self.probability = np.ones(len(scripts))  # [N]
        self.taken: list[np.ndarray] = []  # one [N] array of joint outcomes per draw
        self.branches: list[tuple[int, tuple[int, ...]]] = []

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def _draw(self, factors: torch.Tensor) -> np.ndarray:
        """``factors: [N, m, K]``, each row m independent draws over K outcomes -> joint outcome ``[N]``."""
        if factors.shape[0] != self.rows:
            raise ValueError(f"an enumerated draw needs the batch ({self.rows} rows) first, got {tuple(factors.shape)}")
        factors = factors.detach().to("cpu", torch.float64).numpy()
        weights = factors[:, 0]
        for i in range(1, factors.shape[1]):
            weights = (weights[:, :, None] * factors[:, i, None, :]).reshape(self.rows, -1)  # [N, K^(i+1)]
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise ValueError("an enumerated draw got NaN, infinite or negative probabilities")
        call = len(self.taken)
        scripted = call < self.lengths  # [N]
        possible = weights > 0
        first = possible.argmax(axis=1)  # [N], the default outcome past the script
        choice = np.where(scripted, self.scripts[:, min(call, self.scripts.shape[1] - 1)], first)
        rows, outcomes = np.nonzero(possible & ~scripted[:, None] & (np.arange(weights.shape[1]) != first[:, None]))
        if len(rows):
            path = np.stack(self.taken, axis=1) if self.taken else np.zeros((self.rows, 0), dtype=np.int64)
            scripts = np.concatenate([path[rows], outcomes[:, None]], axis=1).tolist()  # [new branches, draws]
            self.branches.extend(zip(rows.tolist(), map(tuple, scripts)))
        self.probability *= weights[np.arange(self.rows), choice]
        self.taken.append(choice)
        return choice

    @staticmethod
    def _digits(joint: np.ndarray, m: int, k: int) -> np.ndarray:
        """Joint outcomes ``[N]`` -> the m draws ``[N, m]`` (the first draw is the most significant digit)."""
        return np.stack([(joint // k ** (m - 1 - i)) % k for i in range(m)], axis=1)

    def categorical(self, probs: torch.Tensor) -> torch.Tensor:
        k = probs.shape[-1]
        flat = probs.reshape(self.rows, -1, k).to(torch.float64)  # [N, m, V]
        joint = self._draw(flat / flat.sum(dim=-1, keepdim=True))
        return torch.as_tensor(self._digits(joint, flat.shape[1], k), device=probs.device).reshape(probs.shape[:-1])

    def bernoulli(self, probs: torch.Tensor) -> torch.Tensor:
        p = probs.reshape(self.rows, -1).to(torch.float64).clamp(0.0, 1.0)  # [N, m]
        joint = self._draw(torch.stack([1 - p, p], dim=-1))
        return torch.as_tensor(self._digits(joint, p.shape[1], 2) == 1, device=probs.device).reshape(probs.shape)


def _progress(total: int | None, description: str, progress: bool | None):
    """A tqdm bar on stderr when it is a terminal (``progress=None``), always (True) or never (False)."""
    return progress_bar(progress, total=total, desc=description, unit="branch")


@torch.no_grad()
def autoregressive_law(target, prompt: Sequence[int], sampling: Sampling, horizon: int) -> Law:
    """The target's law of the next ``horizon`` tokens: each prefix's conditional from a fresh forward pass; a
    prefix that holds a stop token is complete (``stop_padded``)."""
    _check_horizon(horizon)
    level, ended = {(): 1.0}, {}
    for _ in range(horizon):
        for prefix in [prefix for prefix in level if set(prefix) & set(sampling.stop)]:
            ended[stop_padded(prefix, horizon, sampling.stop)] = level.pop(prefix)
        if not level:
            break
        prefixes = list(level)
        rows = [list(prompt) + list(prefix) for prefix in prefixes]
        tokens = torch.tensor(rows, device=target.device)  # [K, L]
        logits = target.forward(tokens, target.new_state(len(prefixes), tokens.shape[1]))[:, -1]  # [K, V]
        history = _history(rows, len(prompt), target, sampling)
        probs = adjusted_probs(logits.to(torch.float64), sampling, history=history).cpu().numpy()
        level = {
            prefix + (token,): level[prefix] * probs[k, token]
            for k, prefix in enumerate(prefixes)
            for token in np.flatnonzero(probs[k] > 0).tolist()
        }
    return {**{stop_padded(prefix, horizon, sampling.stop): mass for prefix, mass in level.items()}, **ended}


def _history(rows: list, prompt_length: int, target, sampling: Sampling) -> History | None:
    """The history of ``rows`` (the prompt, then generated tokens) where ``sampling`` needs one, else None."""
    return history_of(sampling, rows, target, [len(row) - prompt_length for row in rows])


@torch.no_grad()
def speculative_law(
    target,
    draft,
    prompt: Sequence[int],
    config: SpeculativeConfig,
    horizon: int,
    *,
    step: SpeculativeStep = REFERENCE_STEP,
    progress: bool | None = None,
    max_branches: int | None = None,
) -> tuple[Law, int]:
    """The exact law of the first ``horizon`` tokens of speculative decoding, and the number of branches
    (``prefix_law`` over ``step``'s iterations, each from fresh states and a fresh copy of the config's policy); a
    step that is not a sampler is refused."""
    refuse_inexact(step)

    def iterate(prompts: list, randomness: Randomness) -> list:
        committed = start(
            target, draft, prompts, config.gamma + 1, _history(prompts, len(prompt), target, config.sampling)
        )
        outcome = step(target, draft, committed, config.afresh(), randomness)
        tokens, accepted = outcome.tokens.tolist(), outcome.accepted.tolist()
        return [row[: n + 1] for row, n in zip(tokens, accepted)]

    return prefix_law(iterate, prompt, horizon, progress=progress, stop=config.sampling.stop, max_branches=max_branches)


@torch.no_grad()
def tree_law(
    target,
    draft,
    prompt: Sequence[int],
    config: TreeConfig,
    horizon: int,
    *,
    step: TreeStep = REFERENCE_TREE_STEP,
    progress: bool | None = None,
    max_branches: int | None = None,
) -> tuple[Law, int]:
    """The exact law of the first ``horizon`` tokens of tree decoding (``prefix_law`` over ``step``'s iterations);
    of the chain decoder where ``generate_tree`` runs it (``chain_config``)."""
    check_tree_models(target, draft, config)
    chain = chain_config(config, step)
    if chain is not None:
        return speculative_law(target, draft, prompt, chain, horizon, progress=progress, max_branches=max_branches)

    def iterate(prompts: list, randomness: Randomness) -> list:
        state = start(
            target, draft, prompts, tree_room(config, 0), _history(prompts, len(prompt), target, config.sampling)
        )
        outcome = step(target, draft, state, config, randomness)
        tokens, accepted = outcome.tokens.tolist(), outcome.accepted.tolist()
        return [row[: n + 1] for row, n in zip(tokens, accepted)]

    return prefix_law(iterate, prompt, horizon, progress=progress, stop=config.sampling.stop, max_branches=max_branches)


class BranchBudgetExceeded(ValueError):
    """An exact enumeration that needs, or has run, more branches than its budget (one line at the CLI)."""


def _over_budget(run: int, budget: int | None, waiting: float, detail: str = "") -> None:
    """Raise ``BranchBudgetExceeded`` when the ``run`` branches and the ``waiting`` ones still to come exceed
    ``budget`` (None: no budget)."""
    if budget is not None and run + waiting > budget:
        raise BranchBudgetExceeded(
            f"--exact needs more than its budget of {budget:,} branches: {run:,} run and about {waiting:,.0f} more "
            f"to come{detail}; lower --vocabulary or --horizon, or use a smaller --tree or --gamma"
        )


def _dp_over_budget(branches: int, budget: int | None, expanded: int, pending: int, frontier: int) -> None:
    """The prefix programme's count: the branches run, the ``pending`` scripts of the prefixes being extended, and
    the ``frontier`` prefixes waiting at the mean count per ``expanded`` prefix so far (an estimate that can only
    be low while those prefixes are still being extended, and leaves out the waiting prefixes' own children)."""
    each = branches / expanded
    _over_budget(
        branches,
        budget,
        pending + each * frontier,
        f" ({frontier:,} prefixes still to extend, at {each:,.0f} branches each so far)" if frontier else "",
    )


def prefix_law(
    iterate: Callable[[list, Randomness], list],
    prompt: Sequence[int],
    horizon: int,
    *,
    progress: bool | None = None,
    stop: tuple = (),
    max_branches: int | None = None,
) -> tuple[Law, int]:
    """The exact law of the first ``horizon`` tokens of a decoder whose iteration ``iterate(prompts, randomness)``
    (from fresh states of each prompt) returns each row's new tokens, and the number of branches, by a dynamic
    programme over prefixes: the branches of one iteration from every prefix of one length run as one batch,
    and their outcomes extend the prefixes; an outcome that holds a ``stop`` token ends there (``stop_padded``).
    With ``max_branches`` it counts as it goes and stops with ``BranchBudgetExceeded`` as soon as the branches run,
    those known to be waiting and the prefixes waiting at the mean count per prefix so far exceed it."""
    _check_horizon(horizon)
    law, frontier, branches, expanded = defaultdict(float), {(): 1.0}, 0, 0
    with _progress(None, "exact (prefix DP)", progress) as bar:
        while frontier:
            length = min(len(prefix) for prefix in frontier)
            prefixes = [prefix for prefix in frontier if len(prefix) == length]
            masses = [frontier.pop(prefix) for prefix in prefixes]
            expanded += len(prefixes)
            pending = [(source, ()) for source in range(len(prefixes))]  # (prefix, script) of branches still to run
            while pending:  # at most BRANCH_BATCH rows a run: memory stays bounded however many branches there are
                sources, scripts = zip(*pending[-BRANCH_BATCH:])
                del pending[-BRANCH_BATCH:]
                enumerator = Enumerator(scripts)
                emitted = iterate([list(prompt) + list(prefixes[s]) for s in sources], enumerator)
                for row, source in enumerate(sources):
                    child = stop_padded(prefixes[source] + tuple(emitted[row]), horizon, stop)
                    mass = masses[source] * enumerator.probability[row]
                    if mass == 0:  # a script replayed where rounding has closed its branch
                        continue
                    if len(child) == horizon:
                        law[child] += mass
                    else:
                        frontier[child] = frontier.get(child, 0.0) + mass
                branches += enumerator.rows
                bar.update(enumerator.rows)
                pending.extend((sources[row], script) for row, script in enumerator.branches)
                _dp_over_budget(branches, max_branches, expanded, len(pending), len(frontier))
    return dict(law), branches


def whole_run_law(
    run: Callable[[Randomness], Sequence[int]], *, progress: bool | None = None, max_branches: int | None = None
) -> tuple[Law, int]:
    """The exact law of ``run(randomness)`` (one generation, returning its tokens; of a batch, its rows'
    tokens concatenated) and the number of branches: the whole loop is run once along every branch of its
    random draws. With ``max_branches`` it stops with ``BranchBudgetExceeded`` when the branches run, plus those
    already recorded and waiting, exceed it."""
    law, scripts, branches = defaultdict(float), [()], 0
    with _progress(None, "exact (whole runs)", progress) as bar:
        while scripts:
            script = scripts.pop()
            enumerator = Enumerator([script])
            law[tuple(run(enumerator))] += enumerator.probability[0]
            scripts.extend(new for _, new in enumerator.branches)
            branches += 1
            bar.update(1)
            _over_budget(branches, max_branches, len(scripts))  # each script waiting is one more run at least
    return dict(law), branches


def product_law(law: Law, copies: int) -> Law:
    """The law of ``copies`` independent sequences drawn from ``law``, concatenated: what the whole-run law of
    a batch of ``copies`` rows of one prompt must be."""
    as_positive_int("copies", copies)
    product = {(): 1.0}
    for _ in range(copies):
        product = {head + tail: p * q for head, p in product.items() for tail, q in law.items()}
    return product


def compare_laws(law: Law, reference: Law, *, method: str, horizon: int, branches: int) -> ExactReport:
    """Max absolute difference and total variation, 1/2 sum |law - reference|, over the union of supports."""
    sequences = sorted(set(law) | set(reference))
    differences = np.array([law.get(s, 0.0) - reference.get(s, 0.0) for s in sequences])
    order = np.argsort(-np.abs(differences))[:5]
    return ExactReport(
        method,
        horizon,
        branches,
        len(sequences),
        math.fsum(law.values()),
        float(np.abs(differences).max(initial=0.0)),
        0.5 * math.fsum(np.abs(differences)),
        tuple((sequences[i], law.get(sequences[i], 0.0), reference.get(sequences[i], 0.0)) for i in order),
    )


def lenience_bound_violations(law: Law, reference: Law, lenience: float, *, slack: float = 1e-12) -> list[tuple]:
    """Sequences sampled with probability above p(sequence) / l^length, the guarantee of lenience l
    (Leviathan et al. A.5: no token above p(x) / l, so no sequence above the product)."""
    return [
        tokens
        for tokens, probability in law.items()
        if probability > reference.get(tokens, 0.0) / lenience ** len(tokens) + slack
    ]


def _check_horizon(horizon: int) -> None:
    as_positive_int("horizon", horizon)
