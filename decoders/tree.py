"""Speculative decoding with a draft tree and exact multi-draft verification (docs/theory-trees.md §12).

One iteration: the draft is fed its pending tokens (``decoders._loop.feed_draft``, as the chain decoder does) and
grows a static tree level by level (one ``forward_tree`` call per level but the deepest, whose nodes it never
needs to score), drafting each node's children from its distribution q as the verifier needs them (the draft's
top tokens for ``target-only``; i.i.d. draws for ``rrs`` and ``kseq``; draws without replacement for
``rrs-without-replacement``); one target call scores every node (``forward_after``: at the first iteration after
the prompt, as a chain of nodes under the tree's root); then each row walks down from the root: at its current
node the children are verified in rank order against the target's p there, by the rule of
``decoders.verification``, and the walk moves to the accepted child or stops with a token drawn from the
verifier's residual (the bonus at a leaf is drawn from p). Both models then keep the accepted path
(``keep_nodes``), with the invariants of ``decoders._loop.Committed``: the target holds the committed sequence
but its last token, the draft the same or, where the path ended at the deepest level, but its last two.

A chain-shaped tree (``Tree.chain``: one child per node) whose verifier's rule at one child is Algorithm 1's (RRS
with or without replacement, K-SEQ; every verifier at temperature 0) is the chain decoder: ``generate_tree`` runs
``decoders.speculative.SpeculativeStep`` with gamma the chain's depth, so the chain lives in one step class
(docs/project.md, "One decode loop"). The target-only verifier at a temperature above 0 is another rule on a chain
(the draft's top token, accepted with p(x)); it and the audits' planted-bug steps run this module's tree step on
any shape. Rows of a batch accept different paths. Every draw goes through ``Randomness`` with the batch first, so
the exact audit enumerates it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from decoders._loop import (
    Committed,
    PhaseTimer,
    begin,
    check_models,
    decode,
    feed_draft,
    forward_after,
    host_read,
    keep_nodes,
    park_committed,
    room_for,
    start,
)
from decoders.dynamic_tree import DynamicTree, draft_dynamic, proposing, row_children
from decoders.models.protocol import check_model, prefill_call
from decoders.randomness import Randomness
from decoders.results import DecodeStats, Generation
from decoders.sampling import Sampling, adjusted_probs, check_probs
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.verification import TREE_VERIFIERS, residual, verify_node
from spectheory.trees import Tree

__all__ = [
    "DynamicTree",
    "TreeConfig",
    "TreeOutcome",
    "TreeStep",
    "REFERENCE_TREE_STEP",
    "generate_tree",
    "tree_acceptance",
    "breadth_first",
    "check_tree_models",
    "tree_room",
    "is_chain",
    "CHAIN_RULE_VERIFIERS",
    "runs_as_chain",
    "chain_config",
]

#: The verifiers whose rule at a node with one child is Algorithm 1's: the child drawn from q, accepted with
#: min(1, p / q), else a token from norm((p - q)+) (docs/theory-trees.md §12).
CHAIN_RULE_VERIFIERS = ("kseq", "rrs", "rrs-without-replacement")


def breadth_first(tree: Tree) -> Tree:
    """The same tree with nodes numbered level by level (siblings keep their order), so that each depth is a
    contiguous range of nodes: the order the draft inserts them in."""
    order, level = [0], [0]
    while level:
        level = [child for node in level for child in tree.children(node)]
        order += level
    new_index = {old: new for new, old in enumerate(order)}
    return Tree(tuple(-1 if old == 0 else new_index[tree.parents[old]] for old in order))


def tree_room(config, max_new_tokens: int) -> int:
    """Tokens each model's state must hold beyond its prompt: the new ones and one iteration's pending nodes, and one
    for the draft's pending pair (``feed_draft`` feeds two tokens, the second padding where one is pending)."""
    tree = config.tree
    return room_for(max_new_tokens, max(tree.size, tree.scored if isinstance(tree, DynamicTree) else 0) + 1)


def is_chain(tree: Tree | DynamicTree) -> bool:
    """Whether ``tree`` is static with one child per node at most (``Tree.chain``)."""
    return isinstance(tree, Tree) and tree.size == tree.depth + 1


def runs_as_chain(config) -> bool:
    """Whether ``config`` (a ``TreeConfig``) is the chain decoder's: a chain verified by Algorithm 1's rule, which
    every verifier is at temperature 0 (greedy matching)."""
    return is_chain(config.tree) and (config.verifier in CHAIN_RULE_VERIFIERS or config.sampling.greedy)


@dataclass(frozen=True)
class TreeConfig:
    """A static draft tree (``spectheory.trees.Tree``, renumbered breadth first) or a ``DynamicTree`` (with the
    target-only verifier), the sampling, the verifier."""

    tree: Tree | DynamicTree
    sampling: Sampling
    verifier: str = "target-only"

    def __post_init__(self) -> None:
        dynamic = isinstance(self.tree, DynamicTree)
        if not (dynamic or isinstance(self.tree, Tree) and self.tree.size >= 2):
            raise ValueError(
                f"tree must be a spectheory.trees.Tree with at least one draft node or a DynamicTree, got {self.tree!r}"
            )
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must be a Sampling, got {type(self.sampling).__name__}")
        if self.verifier not in TREE_VERIFIERS:
            raise ValueError(f"verifier must be one of {sorted(TREE_VERIFIERS)}, got {self.verifier!r}")
        if dynamic and self.verifier != "target-only":
            raise ValueError(
                f"a dynamic tree drafts the draft's most likely tokens: it needs the target-only "
                f"verifier, got {self.verifier!r}"
            )
        if not dynamic:
            object.__setattr__(self, "tree", breadth_first(self.tree))


def _levels(tree: Tree) -> list[range]:
    """The node ranges of each depth (breadth-first numbering)."""
    depths = tree.depths
    return [range(depths.index(d), len(depths) - depths[::-1].index(d)) for d in range(tree.depth + 1)]


def _children_table(tree: Tree, device) -> torch.Tensor:
    """``[N, max children]`` child ids in rank order, -1 where none."""
    width = max(len(tree.children(node)) for node in range(tree.size))
    table = torch.full((tree.size, width), -1, dtype=torch.int64)
    for node in range(tree.size):
        for rank, child in enumerate(tree.children(node)):
            table[node, rank] = child
    return table.to(device)


def _draft_children(logits, q, count: int, verifier: str, randomness: Randomness) -> torch.Tensor:
    """``count`` children ``[B, count]`` of one node per row from the draft's ``logits``/``q`` ``[B, V]``."""
    if verifier == "target-only":  # deterministic candidates: the draft's top tokens
        return torch.topk(logits, count, dim=-1).indices
    if verifier in ("rrs", "kseq"):
        return torch.stack([randomness.categorical(q) for _ in range(count)], dim=1)
    remaining, drawn = q.clone(), []
    for _ in range(count):  # without replacement; once q's support is used up, repeats are never accepted
        empty = remaining.sum(dim=-1, keepdim=True) <= 0
        token = randomness.categorical(torch.where(empty, q, remaining))
        remaining.scatter_(1, token[:, None], 0.0)
        drawn.append(token)
    return torch.stack(drawn, dim=1)


def _draft_tree(
    draft,
    state,
    root: torch.Tensor,
    last: torch.Tensor,
    config: TreeConfig,
    randomness: Randomness,
    draft_children=_draft_children,
):
    """The tree's tokens ``[B, N]`` (node 0 the last committed token) and each node's draft law ``[B, N, V]``
    (zero at the deepest level: never read), from the draft's logits after the committed sequence, ``root: [B, V]``.
    The draft scores every level but the deepest; its nodes sit beyond the committed sequence, node n at pending
    index n - 1."""
    tree, levels = config.tree, _levels(config.tree)
    parents = torch.tensor(tree.parents, device=last.device) - 1  # [N], each node's parent's pending index
    tokens = torch.zeros(len(last), tree.size, dtype=torch.int64, device=last.device)
    tokens[:, 0] = last
    logits, q = root[:, None], None  # [B, 1, V]: the root level's
    for depth, level in enumerate(levels[:-1]):
        nodes = list(level)
        if depth:
            logits = draft.forward_tree(tokens[:, nodes], state, parents[nodes].expand(len(last), -1))  # [B, n, V]
        logits = proposing(logits)  # none: uniform q
        probs = adjusted_probs(logits, config.sampling.unconditioned, validate=False)
        if q is None:
            q = probs.new_zeros(len(last), tree.size, probs.shape[-1])
        q[:, nodes] = probs
        for i, node in enumerate(nodes):
            children = list(tree.children(node))
            if children:
                tokens[:, children] = draft_children(
                    logits[:, i], q[:, node], len(children), config.verifier, randomness
                )
    return tokens, q


@dataclass(frozen=True)
class TreeOutcome:
    """One iteration: ``tokens: [B, depth + 1]`` of which the first ``accepted + 1`` are new (the accepted nodes,
    then the token drawn after them); ``ranks: [B, depth]``, the child ranks along the accepted path (0 past it)."""

    tokens: torch.Tensor
    accepted: torch.Tensor
    ranks: torch.Tensor


def check_tree_models(target, draft, config: TreeConfig | None = None) -> None:
    """Both models have tree attention and one vocabulary; ``config``'s top-k candidates fit in it."""
    check_models(target, draft)
    for role, model in (("target", target), ("draft", draft)):
        check_model(model, role, tree=True)
    if config is None or config.verifier != "target-only":
        return
    tree = config.tree
    widest = tree.branching if isinstance(tree, DynamicTree) else max(len(tree.children(n)) for n in range(tree.size))
    if widest > target.vocab_size:
        raise ValueError(
            f"the tree's {widest} top-k candidates per node exceed the vocabulary of {target.vocab_size} tokens"
        )


class TreeStep:
    """One iteration in named phases: ``children`` (drafting a node's children), ``verify_node`` (the verifier at
    one node), ``bonus_law`` (the law at a leaf or after the deepest accepted node); calling it runs the
    iteration and updates the state in place. The planted-bug decoders of ``decoders.audit.tree_mutants`` override
    one phase each."""

    def children(self, logits, q, count: int, verifier: str, randomness: Randomness) -> torch.Tensor:
        return _draft_children(logits, q, count, verifier, randomness)

    def verify_node(self, p, q, children, tokens, verifier: str, randomness: Randomness):
        return verify_node(p, q, children, tokens, verifier, randomness, self.residual)

    def residual(self, r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The law after a rejection by RRS: norm((r - q)+)."""
        return residual(r, q)

    def score(self, target, tokens: torch.Tensor, target_state, parents: torch.Tensor | None, pending) -> torch.Tensor:
        """The target's logits ``[B, N, V]`` of the tree's nodes in one call, after the ``pending`` prompt tokens at
        the first (``forward_after``)."""
        return forward_after(target, tokens, target_state, pending, parents)

    def bonus_law(self, p: torch.Tensor, logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
        """The law at a node whose walk ends without a rejection there: p (``logits`` are the raw ones)."""
        return p

    def walk(self, p, q, logits, tokens, children, config: TreeConfig, randomness: Randomness) -> tuple:
        """The verifier's walk from the root, node by node: the law of the token after it ``[B, V]`` (the residual
        where it stopped at a rejection, the bonus law at a leaf or the deepest level), the path ``[B, depth + 1]``
        of nodes (root first; repeated once a row stops) and the accepted child ranks ``[B, depth]`` (0: none)."""
        batch = len(tokens)
        rows = torch.arange(batch, device=tokens.device)
        node = torch.zeros(batch, dtype=torch.int64, device=tokens.device)
        path, ranks = [node], []
        weights = torch.zeros_like(p[:, 0])
        walking = torch.ones(batch, dtype=torch.bool, device=tokens.device)
        for _ in range(config.tree.depth):
            kids = torch.where(walking[:, None], children[rows, node], -1)  # [B, width]; stopped rows draw nothing
            rank, residual = self.verify_node(
                p[rows, node], q[rows, node], kids, tokens.gather(1, kids.clamp(min=0)), config.verifier, randomness
            )
            leaf = children[rows, node][:, 0] < 0
            stopped = walking & (rank == 0)
            weights = torch.where((stopped & ~leaf)[:, None], residual, weights)
            bonus = self.bonus_law(p[rows, node], logits[rows, node], config.sampling)
            weights = torch.where((stopped & leaf)[:, None], bonus, weights)  # a leaf: the bonus
            walking = walking & (rank > 0)
            node = torch.where(walking, kids.gather(1, (rank - 1).clamp(min=0)[:, None])[:, 0], node)
            path.append(node), ranks.append(torch.where(walking, rank, 0))
        bonus = self.bonus_law(p[rows, node], logits[rows, node], config.sampling)
        weights = torch.where(walking[:, None], bonus, weights)  # walked to the deepest level: the bonus
        return weights, torch.stack(path, dim=1), torch.stack(ranks, dim=1)

    @staticmethod
    def commit(target, draft, state: Committed, tokens, path, accepted, held: tuple, tree) -> None:
        """Both models keep the accepted path ``path: [B, depth + 1]`` (``keep_nodes``) from their lengths before the
        iteration, ``held`` (target, draft). The target keeps its first ``accepted + 1`` nodes (after the prompt, at
        the first iteration); the draft, which was fed the root causally, the accepted nodes it scored (all but one
        at the deepest level) or, for a dynamic tree, whose scored nodes are not the tree's, appends them. Sets
        ``draft_pending``."""
        dynamic = isinstance(tree, DynamicTree)
        pending = state.target_unfed
        held_target = held[0] if pending is None else held[0] + pending.counts
        keep_nodes(target, state.target_state, held_target, accepted + 1, path, pending)
        state.target_unfed = None
        fed = held[1] + state.draft_pending  # [B], the committed sequence, root included
        if dynamic:  # drop the scored nodes, then append the accepted ones
            keep_nodes(draft, state.draft_state, fed, torch.zeros_like(accepted))
            prefill_call(draft)(tokens.gather(1, path[:, 1:]), state.draft_state, accepted)
            state.draft_pending = torch.ones_like(accepted)
            return
        kept = accepted.clamp(max=tree.depth - 1)  # the deepest level was never scored
        causal = tree.depth == 1  # no node beyond the root was scored: nothing but the root to keep
        scored = _levels(tree)[-1].start - 1  # nodes beyond the root the draft scored; later path entries are unread
        keep_nodes(draft, state.draft_state, fed, kept, None if causal else (path[:, 1:] - 1).clamp(0, scored - 1))
        state.draft_pending = torch.where(accepted == tree.depth, 2, 1)

    def __call__(
        self,
        target,
        draft,
        state: Committed,
        config: TreeConfig,
        randomness: Randomness,
        timer: PhaseTimer | None = None,
    ) -> TreeOutcome:
        """One iteration (module docstring); updates ``state`` in place."""
        timer = timer or PhaseTimer(target.device, profile=False)
        tree, batch = config.tree, len(state.tail)
        held = (state.target_state.lengths, state.draft_state.lengths)  # never changed in place
        with timer.phase("draft"):
            root = feed_draft(draft, state)  # [B, V]
            if isinstance(tree, DynamicTree):  # each row's own tree
                tokens, parents, q, _ = draft_dynamic(
                    draft, state.draft_state, root, state.last, tree, config.sampling.unconditioned
                )
                children = row_children(parents, tree.branching)  # [B, N, width]
            else:
                tokens, q = _draft_tree(draft, state.draft_state, root, state.last, config, randomness, self.children)
                parents = torch.tensor(tree.parents, device=target.device).expand(batch, -1)
                children = _children_table(tree, target.device).expand(batch, -1, -1)  # [B, N, width]
        with timer.phase("verify"):
            history = None if state.history is None else state.history.along_tree(tokens, parents)
            logits = self.score(target, tokens, state.target_state, parents, state.target_unfed)
            p = adjusted_probs(logits, config.sampling, validate=False, history=history)
            check_probs(p, models={"target": p})
        with timer.phase("accept"):
            weights, path, ranks = self.walk(p, q, logits, tokens, children, config, randomness)
            accepted = ranks.gt(0).sum(dim=1)
        with timer.phase("correct"):
            last = randomness.categorical(weights)
            self.commit(target, draft, state, tokens, path, accepted, held, tree)
            new = tokens.gather(1, path)  # [B, depth + 1]: the root, then the path
            state.tail = torch.stack([new.gather(1, accepted[:, None])[:, 0], last], dim=1)
            new = torch.cat([new[:, 1:], last[:, None]], dim=1)
            new.scatter_(1, accepted[:, None], last[:, None])
            if state.history is not None:  # the accepted path and the token after it, each at its node's law
                laws = (
                    None
                    if state.history.mirostat is None
                    else p.gather(  # [B, depth + 1, V]
                        1, path[..., None].expand(-1, -1, p.shape[-1])
                    )
                )
                state.history = state.history.plus(
                    new, torch.arange(new.shape[1], device=new.device) <= accepted[:, None], laws
                )
        return TreeOutcome(new, accepted, ranks)


REFERENCE_TREE_STEP = TreeStep()


def chain_config(config: TreeConfig, step: TreeStep) -> SpeculativeConfig | None:
    """The chain decoder's config (gamma = the chain's depth) where ``config`` run by ``step`` is the chain decoder's
    (``runs_as_chain``, with the reference step: a planted bug runs its own step), else None."""
    if step is REFERENCE_TREE_STEP and runs_as_chain(config):
        return SpeculativeConfig(config.tree.depth, config.sampling)
    return None


@torch.inference_mode()
def generate_tree(
    target,
    draft,
    prompts,
    *,
    max_new_tokens: int,
    config: TreeConfig,
    randomness: Randomness,
    eos: int | None = None,
    profile: bool = False,
    step: TreeStep = REFERENCE_TREE_STEP,
) -> Generation:
    """Tree speculative decoding of up to ``max_new_tokens`` per row. Both models need ``forward_tree`` and
    ``commit_path`` (TinyGPT, the Hugging Face adapter); ``step`` is the iteration (the audits plant bugs). A chain
    the chain decoder verifies alike (``chain_config``) is the chain decoder's, with each accepted child's rank 1."""
    if not isinstance(config, TreeConfig):
        raise ValueError(f"config must be a TreeConfig, got {type(config).__name__}")
    check_tree_models(target, draft, config)
    chain = chain_config(config, step)
    if chain is not None:
        generation = generate_speculative(
            target,
            draft,
            prompts,
            max_new_tokens=max_new_tokens,
            config=chain,
            randomness=randomness,
            eos=eos,
            profile=profile,
        )
        ranks = tuple(tuple((1,) * count for count in rows) for rows in generation.stats.accepted_per_iteration)
        return replace(generation, stats=replace(generation.stats, accepted_ranks=ranks))
    room = tree_room(config, max_new_tokens)
    run = begin(
        (target, draft),
        prompts,
        max_new_tokens=max_new_tokens,
        room=room,
        needed="max_new_tokens + tree nodes + 1",
        sampling=config.sampling,
        eos=eos,
        profile=profile,
    )
    (target, draft), timer = run.models, run.timer
    with timer.phase("prefill"):
        state = start(target, draft, run.prompts, room, run.history)
    accepted_log, ranks_log = [], []

    def iterate(active: list) -> list:
        outcome = step(target, draft, state, config, randomness, timer)
        counts, tokens, ranks = host_read(
            [outcome.accepted[:, None], outcome.tokens, outcome.ranks], states=(state.target_state, state.draft_state)
        )
        counts = [row[0] for row in counts]
        accepted_log.append(tuple(counts[b] for b in active))
        ranks_log.append(tuple(tuple(ranks[b][: counts[b]]) for b in active))
        return [row[: count + 1] for row, count in zip(tokens, counts)]

    decode(run.output, iterate, lambda done: park_committed(target, draft, state, done))  # finished rows restart empty
    iterations = len(accepted_log)
    draft_calls = iterations * (config.tree.depth + isinstance(config.tree, DynamicTree))  # a call per level but the
    # deepest (the first feeds the pending tokens); a dynamic tree then appends its accepted path
    stats = DecodeStats(
        iterations=iterations,
        target_calls=iterations,
        draft_calls=draft_calls,
        accepted_per_iteration=tuple(accepted_log),
        betas=(),
        seconds=timer.finish(),
        accepted_ranks=tuple(ranks_log),
    )
    return run.generation(stats)


def tree_acceptance(stats: DecodeStats, tree: Tree) -> dict:
    """Tokens per target call, and the acceptance per depth (P(depth d accepted | depth d - 1 was)) and per child
    rank (how often the accepted child had that rank, over the walks that reached a node with children)."""
    walks = [ranks for iteration in stats.accepted_ranks for ranks in iteration]
    per_depth = []
    for d in range(1, tree.depth + 1):
        reached = sum(1 for ranks in walks if len(ranks) >= d - 1)
        per_depth.append(sum(1 for ranks in walks if len(ranks) >= d) / reached if reached else 0.0)
    width = (
        tree.branching if isinstance(tree, DynamicTree) else max(len(tree.children(node)) for node in range(tree.size))
    )
    chosen = [rank for ranks in walks for rank in ranks]
    tries = sum(len(ranks) + 1 for ranks in walks)  # every accepted step, and the step that stopped
    per_rank = [chosen.count(r) / tries if tries else 0.0 for r in range(1, width + 1)]
    return {
        "tokens_per_target_call": stats.mean_tokens_per_iteration,
        "acceptance_per_depth": per_depth,
        "rank_frequencies": per_rank,
    }
