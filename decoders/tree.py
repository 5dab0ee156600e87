"""Speculative decoding with a draft tree and exact multi-draft verification (docs/theory.md §12).

One iteration: the draft grows a static tree level by level (one ``forward_tree`` call per level), drafting
each node's children from its distribution q as the verifier needs them (the draft's top tokens for
``target-only``; i.i.d. draws for ``rrs`` and ``kseq``; draws without replacement for
``rrs-without-replacement``); one target call scores every node (``forward_tree``); then each row walks
down from the root: at its current node the children are verified in rank order against the target's p
there, by the rule of ``spectheory.multidraft``, and the walk moves to the accepted child or stops with a
token drawn from the verifier's residual (the bonus at a leaf is drawn from p). Both models then keep the
accepted path (``commit_path``); the invariant between iterations is that each holds the committed
sequence but its last token. Before the first iteration the target holds nothing: its first call carries the
prompt but its last token as a chain of nodes under the tree's root (``prompt_chain``), one call where a prefill
and a verify call would be two (docs/theory.md §10). Rows of a batch accept different paths. Every draw goes through
``Randomness`` with the batch first, so the exact audit enumerates it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders._loop import (Output, PhaseTimer, Unfed, as_prompts, check_models, check_room, new_state, park, prefill,
                            unfed)
from decoders.randomness import Randomness
from decoders.results import DecodeStats, Generation
from decoders.sampling import Sampling, adjusted_probs, check_probs, proposes
from spectheory.multidraft import VERIFIERS
from spectheory.trees import Tree
from spectheory.validation import as_int, as_positive_int

__all__ = ["DynamicTree", "TreeConfig", "TreeState", "TreeOutcome", "TreeStep", "REFERENCE_TREE_STEP", "start_tree",
           "generate_tree", "tree_acceptance", "breadth_first", "check_tree_models", "prompt_chain", "tree_room"]


def breadth_first(tree: Tree) -> Tree:
    """The same tree with nodes numbered level by level (siblings keep their order), so that each depth is a
    contiguous range of nodes: the order the draft inserts them in."""
    order, level = [0], [0]
    while level:
        level = [child for node in level for child in tree.children(node)]
        order += level
    new_index = {old: new for new, old in enumerate(order)}
    return Tree(tuple(-1 if old == 0 else new_index[tree.parents[old]] for old in order))


@dataclass(frozen=True)
class DynamicTree:
    """EAGLE-2's draft tree, grown anew each iteration from the draft's confidence (docs/theory.md §12): the root's
    ``branching`` most likely tokens are depth 1; at each next depth, up to ``depth``, the ``branching`` nodes of
    the depth before with the largest cumulative draft log-probability are expanded into their ``branching`` most
    likely tokens; then every drafted node is reranked by cumulative log-probability and the best ``budget`` - 1
    kept under the root. Its shape is a function of the draft alone, so any verifier that is exact for
    deterministic candidates (``target-only``) stays exact; rows of a batch grow different trees."""

    branching: int
    depth: int
    budget: int

    def __post_init__(self) -> None:
        as_positive_int("branching", self.branching), as_positive_int("depth", self.depth)
        drafted = self.branching + (self.depth - 1) * self.branching ** 2
        as_int("budget", self.budget, low=2, high=drafted + 1)

    @property
    def size(self) -> int:
        return self.budget

    def as_dict(self) -> dict:
        return {"dynamic": True, "branching": self.branching, "nodes": self.budget, "depth": self.depth}

    @property
    def scored(self) -> int:
        """Nodes the draft scores per iteration: the root and ``branching`` at each depth but the last."""
        return 1 + self.branching * (self.depth - 1)


def tree_room(config, max_new_tokens: int) -> int:
    """Tokens each model's state must hold beyond its prompt: the new ones and one iteration's pending nodes."""
    tree = config.tree
    return max_new_tokens + max(tree.size, tree.scored if isinstance(tree, DynamicTree) else 0) + 1


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
            raise ValueError(f"tree must be a spectheory.trees.Tree with at least one draft node or a DynamicTree, "
                             f"got {self.tree!r}")
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must be a Sampling, got {type(self.sampling).__name__}")
        if self.verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {sorted(VERIFIERS)}, got {self.verifier!r}")
        if dynamic and self.verifier != "target-only":
            raise ValueError(f"a dynamic tree drafts the draft's most likely tokens: it needs the target-only "
                             f"verifier, got {self.verifier!r}")
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


def _normalised(rows: torch.Tensor) -> torch.Tensor:
    return rows / rows.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(rows.dtype).tiny)


def _kseq_rho(p, q, count: torch.Tensor, steps: int = 60) -> torch.Tensor:
    """SpecTr's rho per row ``[B]`` by bisection on [1, count] (``spectheory.multidraft.kseq_rho``)."""
    k = count.to(p.dtype)

    def excess(rho):
        beta = torch.minimum(q, p / rho[:, None]).sum(dim=-1)
        return torch.where(beta > 0, (1 - (1 - beta) ** k) / beta.clamp(min=1e-300), k) - rho

    low, high = torch.ones_like(k), k.clone()
    for _ in range(steps):
        middle = (low + high) / 2
        above = excess(middle) > 0
        low, high = torch.where(above, middle, low), torch.where(above, high, middle)
    return torch.where(excess(torch.ones_like(k)) <= 0, torch.ones_like(k), high)


def _residual(residual: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm((r - q)+): the law after a rejection (rows without mass are left to the caller)."""
    return _normalised((residual - q).clamp(min=0.0))


def _verify_node(p, q, children, tokens, verifier: str, randomness: Randomness, residual_after=_residual):
    """Verify each row's children (``children: [B, c]`` node ids, -1 none; their ``tokens: [B, c]``) against p,
    q ``[B, V]`` at its current node: (accepted rank ``[B]``, 0 for none, and the law of the token drawn when
    none is accepted ``[B, V]``)."""
    batch, width = children.shape
    rows = torch.arange(batch, device=p.device)
    valid = children >= 0
    count = valid.sum(dim=1)
    rank = torch.zeros(batch, dtype=torch.int64, device=p.device)
    residual = p.clone()
    if verifier == "kseq":
        rho = _kseq_rho(p, q, count.clamp(min=1))
        a = torch.minimum(q, p / rho[:, None])
        beta = a.sum(dim=-1, keepdim=True)
        for j in range(width):
            x = tokens[:, j]
            chance = torch.where(valid[:, j] & (rank == 0), (p[rows, x] / (rho * q[rows, x])).clamp(max=1.0), 0.0)
            rank = torch.where(randomness.bernoulli(chance), j + 1, rank)
        missed = (1 - beta) ** count[:, None]
        c = torch.where(beta > 0, (1 - missed) / beta.clamp(min=1e-300), 0.0)
        return rank, torch.where(beta > 0, (p - c * a).clamp(min=0.0), p)
    draft = q.clone()
    for j in range(width):
        x = tokens[:, j]
        live = valid[:, j] & (rank == 0)
        if verifier == "target-only":
            chance = residual[rows, x] / residual.sum(dim=-1).clamp(min=torch.finfo(p.dtype).tiny)
        else:
            q_j = _normalised(draft)
            drafted = q_j[rows, x]  # 0 only for a repeat once q's support was used up: never accepted
            chance = torch.where(drafted > 0, residual[rows, x] / drafted.clamp(min=torch.finfo(p.dtype).tiny), 0.0)
            chance = chance.clamp(max=1.0)
        hit = randomness.bernoulli(torch.where(live, chance, 0.0))
        rank = torch.where(hit, j + 1, rank)
        missed = live & ~hit
        if verifier == "target-only":
            residual[rows[missed], x[missed]] = 0.0
        else:
            excess = residual_after(residual, q_j)
            keep = missed[:, None] & (excess.sum(dim=-1, keepdim=True) > 0)
            residual = torch.where(keep, excess, residual)
            if verifier == "rrs-without-replacement":
                draft[rows[missed], x[missed]] = 0.0
    return rank, residual


def _draft_tree(draft, state, last, config: TreeConfig, randomness: Randomness, draft_children=_draft_children):
    """The tree's tokens ``[B, N]`` (node 0 the last committed token) and each node's draft law ``[B, N, V]``
    (zero at leaves: never read)."""
    tree, levels = config.tree, _levels(config.tree)
    parents = torch.tensor(tree.parents, device=last.device)
    tokens = torch.zeros(len(last), tree.size, dtype=torch.int64, device=last.device)
    tokens[:, 0] = last
    q = None
    for depth, level in enumerate(levels):
        nodes = list(level)
        logits = draft.forward_tree(tokens[:, nodes], state, parents[nodes].expand(len(last), -1))  # [B, n, V]
        if depth == len(levels) - 1:
            break  # the leaves are fed so that the draft can keep an accepted one; their laws are unused
        logits = _proposing(logits)  # none: uniform q
        probs = adjusted_probs(logits, config.sampling, validate=False)
        if q is None:
            q = probs.new_zeros(len(last), tree.size, probs.shape[-1])
        q[:, nodes] = probs
        for i, node in enumerate(nodes):
            children = list(tree.children(node))
            if children:
                tokens[:, children] = draft_children(logits[:, i], q[:, node], len(children), config.verifier,
                                                     randomness)
    return tokens, q


def _proposing(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` ``[..., V]``, uniform (zeros) where the draft proposes nothing (all -inf)."""
    return torch.where(proposes(logits)[..., None], logits, torch.zeros_like(logits))


def _confidence(logits: torch.Tensor) -> torch.Tensor:
    """The draft's log-probabilities ``[..., V]`` of raw ``logits``: EAGLE-2's confidence."""
    return torch.log_softmax(_proposing(logits), dim=-1)


def _draft_dynamic(draft, state, last: torch.Tensor, spec: DynamicTree, sampling: Sampling) -> tuple:
    """EAGLE-2's tree per row (``DynamicTree``): tokens ``[B, N]`` (node 0 the last committed token), parents ``[B, N]``
    (nodes numbered depth by depth, siblings by descending confidence: their verification order) and each node's
    draft law ``[B, N, V]`` (zero where the draft did not expand it: never read)."""
    batch, k, device = len(last), spec.branching, last.device
    rows = torch.arange(batch, device=device)[:, None]
    logits = draft.forward_tree(last[:, None], state, torch.full((batch, 1), -1, device=device))  # [B, 1, V]
    scores, tokens = torch.topk(_confidence(logits[:, 0]), k, dim=-1)  # [B, k], depth 1
    drafted = {"tokens": [tokens], "scores": [scores], "parents": [torch.full_like(tokens, -1)],
               "depths": [torch.ones_like(tokens)]}
    fed_logits, fed_candidates = [logits], []  # the draft's logits at the nodes it scored, and which they were
    frontier, fed, held = torch.arange(k, device=device).expand(batch, -1), torch.zeros_like(tokens), 1
    for depth in range(2, spec.depth + 1):  # feed the frontier, draft its children, keep the best k as the next one
        logits = draft.forward_tree(tokens, state, fed)  # [B, k, V]; ``fed``: their parents among the scored nodes
        fed_logits.append(logits), fed_candidates.append(frontier)
        top, children = torch.topk(_confidence(logits), k, dim=-1)  # [B, k, k]
        child_scores = (scores[..., None] + top).flatten(1)  # [B, k * k]
        count = sum(c.shape[1] for c in drafted["tokens"])
        drafted["tokens"].append(children.flatten(1)), drafted["scores"].append(child_scores)
        drafted["parents"].append(frontier.repeat_interleave(k, dim=1))
        drafted["depths"].append(torch.full_like(child_scores, depth, dtype=torch.int64))
        scores, best = torch.topk(child_scores, k, dim=-1)  # [B, k]
        tokens, frontier = children.flatten(1).gather(1, best), count + best
        fed, held = held + best // k, held + k
    tokens, scores, parents, depths = (torch.cat(drafted[key], dim=1)
                                       for key in ("tokens", "scores", "parents", "depths"))
    # the best budget - 1; a stable sort keeps an ancestor (never less likely, drafted earlier) before its nodes
    kept = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :spec.budget - 1]  # [B, N - 1]
    order = torch.sort(depths.gather(1, kept) * kept.shape[1] + torch.arange(kept.shape[1], device=device), dim=1)
    kept = kept.gather(1, order.indices)  # depth by depth, by confidence within a depth
    node = torch.full_like(parents, -1)  # each drafted token's node, -1 if dropped
    node[rows, kept] = torch.arange(1, spec.budget, device=device)
    kept_parents = parents.gather(1, kept)
    tree_parents = torch.where(kept_parents < 0, 0, node.gather(1, kept_parents.clamp(min=0)))
    scored = torch.full_like(parents, -1)  # each drafted token's place among the scored nodes, -1 if not scored
    for level, candidates in enumerate(fed_candidates):
        scored[rows, candidates] = 1 + level * k + torch.arange(k, device=device)
    at = torch.cat([torch.zeros_like(last[:, None]), scored.gather(1, kept)], dim=1)  # [B, N]
    laws = adjusted_probs(_proposing(torch.cat(fed_logits, dim=1)), sampling, validate=False)  # [B, scored, V]
    laws = laws.gather(1, at.clamp(min=0)[..., None].expand(-1, -1, laws.shape[-1]))  # [B, N, V]
    q = torch.where((at >= 0)[..., None], laws, 0.0)
    return (torch.cat([last[:, None], tokens.gather(1, kept)], dim=1),
            torch.cat([torch.full_like(last[:, None], -1), tree_parents], dim=1), q)


def _row_children(parents: torch.Tensor, width: int) -> torch.Tensor:
    """``[B, N, width]`` each row's child ids in numbering order (their rank), -1 where none, from ``parents``."""
    batch, size = parents.shape
    rows = torch.arange(batch, device=parents.device)
    table = torch.full((batch, size, width), -1, dtype=torch.int64, device=parents.device)
    filled = torch.zeros(batch, size, dtype=torch.int64, device=parents.device)
    for child in range(1, size):
        parent = parents[:, child]
        table[rows, parent, filled[rows, parent]] = child
        filled[rows, parent] += 1
    return table


@dataclass
class TreeState:
    """Between iterations: each model's state holding the committed sequence but its last token, ``last: [B]``;
    before the first, the target's holds nothing and ``target_unfed`` the prompt tokens its first call carries."""

    target_state: object
    draft_state: object
    last: torch.Tensor
    target_unfed: Unfed | None = None


def prompt_chain(pending: Unfed, tokens: torch.Tensor, parents: torch.Tensor) -> tuple:
    """A tree's nodes ``tokens, parents: [B, N]`` after the prompt tokens ``pending`` (P = its width) in one tree:
    (tokens, parents ``[B, P + N]``, ``lead: [B, P]``). Row b's prompt is a chain in nodes P - counts[b] .. P - 1
    (each under the one before, the first a root), the tree follows at P + its indices with its root under the
    chain's last node; nodes before the chain are roots of their own that nothing sees and nothing keeps. ``lead``
    holds the chain's node indices first (a path's start, for ``commit_path``)."""
    width, device = pending.tokens.shape[1], tokens.device
    index = torch.arange(width, device=device)
    start = width - pending.counts[:, None]  # [B, 1], each row's first prompt node
    body = (index[None, :] - start).clamp(min=0)  # [B, P], the prompt token each node holds
    chain_tokens = pending.tokens.gather(1, body.clamp(max=width - 1))
    chain_parents = torch.where(index[None, :] > start, index[None, :] - 1, -1)
    root = torch.where(pending.counts > 0, width - 1, -1)[:, None]  # [B, 1], the tree root's parent
    tree_parents = torch.where(parents < 0, root, parents + width)
    lead = torch.where(index[None, :] < pending.counts[:, None], index[None, :] + start, 0)
    return torch.cat([chain_tokens, tokens], dim=1), torch.cat([chain_parents, tree_parents], dim=1), lead


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
        if not hasattr(model, "forward_tree"):
            raise ValueError(f"the tree decoder needs tree attention in the {role} (TinyGPT, a Hugging Face "
                             f"model or a history draft), got {type(model).__name__}")
    if config is None or config.verifier != "target-only":
        return
    tree = config.tree
    widest = tree.branching if isinstance(tree, DynamicTree) else max(len(tree.children(n)) for n in range(tree.size))
    if widest > target.vocab_size:
        raise ValueError(f"the tree's {widest} top-k candidates per node exceed the vocabulary of "
                         f"{target.vocab_size} tokens")


def start_tree(target, draft, prompts: list[list[int]], room: int) -> TreeState:
    """Prefill the draft with each prompt but its last token, which the target's first call carries; both with
    ``room`` more tokens."""
    last = torch.tensor([prompt[-1] for prompt in prompts], device=target.device)
    return TreeState(new_state(target, prompts, room), prefill(draft, prompts, room=room), last,
                     unfed(prompts, target.device))


class TreeStep:
    """One iteration in named phases: ``children`` (drafting a node's children), ``verify_node`` (the verifier at
    one node), ``bonus_law`` (the law at a leaf or after the deepest accepted node); calling it runs the
    iteration and updates the state in place. The planted-bug decoders of ``decoders.audit.mutants`` override
    one phase each."""

    def children(self, logits, q, count: int, verifier: str, randomness: Randomness) -> torch.Tensor:
        return _draft_children(logits, q, count, verifier, randomness)

    def verify_node(self, p, q, children, tokens, verifier: str, randomness: Randomness):
        return _verify_node(p, q, children, tokens, verifier, randomness, self.residual)

    def residual(self, r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The law after a rejection by RRS: norm((r - q)+)."""
        return _residual(r, q)

    def score(self, target, tokens: torch.Tensor, target_state, parents: torch.Tensor, keep: int) -> torch.Tensor:
        """The target's logits ``[B, keep, V]`` of the last ``keep`` nodes, in one call."""
        return target.forward_tree(tokens, target_state, parents, keep=keep)

    def bonus_law(self, p: torch.Tensor, logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
        """The law at a node whose walk ends without a rejection there: p (``logits`` are the raw ones)."""
        return p

    def __call__(self, target, draft, state: TreeState, config: TreeConfig, randomness: Randomness,
                 timer: PhaseTimer | None = None) -> TreeOutcome:
        """One iteration (module docstring); updates ``state`` in place."""
        timer = timer or PhaseTimer(target.device, profile=False)
        tree, batch = config.tree, len(state.last)
        rows = torch.arange(batch, device=target.device)
        dynamic = isinstance(tree, DynamicTree)
        with timer.phase("draft"):
            if dynamic:  # each row's own tree
                tokens, parents, q = _draft_dynamic(draft, state.draft_state, state.last, tree, config.sampling)
                children = _row_children(parents, tree.branching)  # [B, N, width]
            else:
                tokens, q = _draft_tree(draft, state.draft_state, state.last, config, randomness, self.children)
                parents = torch.tensor(tree.parents, device=target.device).expand(batch, -1)
                children = _children_table(tree, target.device).expand(batch, -1, -1)  # [B, N, width]
        with timer.phase("verify"):
            lead = None
            if state.target_unfed is not None:  # the first call: the prompt, then the tree
                scored, parents, lead = prompt_chain(state.target_unfed, tokens, parents)
            logits = self.score(target, tokens if lead is None else scored, state.target_state, parents, tree.size)
            p = adjusted_probs(logits, config.sampling, validate=False)
            check_probs(p, models={"target": p})
        with timer.phase("accept"):
            node = torch.zeros(batch, dtype=torch.int64, device=target.device)
            path, ranks = [node], []
            weights = torch.zeros_like(p[:, 0])
            walking = torch.ones(batch, dtype=torch.bool, device=target.device)
            for _ in range(tree.depth):
                kids = torch.where(walking[:, None], children[rows, node], -1)  # [B, width]; stopped rows draw nothing
                rank, residual = self.verify_node(p[rows, node], q[rows, node], kids,
                                                  tokens.gather(1, kids.clamp(min=0)), config.verifier, randomness)
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
            path, ranks = torch.stack(path, dim=1), torch.stack(ranks, dim=1)  # [B, depth + 1], [B, depth]
            accepted = ranks.gt(0).sum(dim=1)
        with timer.phase("correct"):
            last = randomness.categorical(weights)
            if lead is None:
                target.commit_path(state.target_state, path, accepted + 1)
            else:  # the prompt's chain, then the accepted path
                counts = state.target_unfed.counts
                chain = torch.cat([lead, torch.zeros_like(path)], dim=1)  # [B, P + depth + 1]
                after = counts[:, None] + torch.arange(path.shape[1], device=path.device)  # [B, depth + 1]
                chain.scatter_(1, after, path + lead.shape[1])
                target.commit_path(state.target_state, chain, counts + accepted + 1)
                state.target_unfed = None
            if dynamic:  # the draft scored other nodes than it kept: drop them, then append the accepted path
                draft.truncate(state.draft_state, state.draft_state.lengths)
                getattr(draft, "append", draft.forward)(tokens.gather(1, path), state.draft_state, accepted + 1)
            else:
                draft.commit_path(state.draft_state, path, accepted + 1)
            new = tokens.gather(1, path)  # [B, depth + 1]: the root, then the path
            new = torch.cat([new[:, 1:], last[:, None]], dim=1)
            new.scatter_(1, accepted[:, None], last[:, None])
            state.last = last
        return TreeOutcome(new, accepted, ranks)


REFERENCE_TREE_STEP = TreeStep()


@torch.inference_mode()
def generate_tree(target, draft, prompts, *, max_new_tokens: int, config: TreeConfig, randomness: Randomness,
                  eos: int | None = None, profile: bool = False, step: TreeStep = REFERENCE_TREE_STEP) -> Generation:
    """Tree speculative decoding of up to ``max_new_tokens`` per row. Both models need ``forward_tree`` and
    ``commit_path`` (TinyGPT, the Hugging Face adapter); ``step`` is the iteration (the audits plant bugs)."""
    if not isinstance(config, TreeConfig):
        raise ValueError(f"config must be a TreeConfig, got {type(config).__name__}")
    check_tree_models(target, draft, config)
    prompts = as_prompts(prompts, target.vocab_size, eos)
    room = tree_room(config, max_new_tokens)
    check_room(target, prompts, room, "max_new_tokens + tree nodes + 1")
    check_room(draft, prompts, room, "max_new_tokens + tree nodes + 1")
    output = Output(len(prompts), max_new_tokens, eos)
    timer = PhaseTimer(target.device, profile)
    target, draft = timer.watch(target), timer.watch(draft)
    with timer.phase("prefill"):
        state = start_tree(target, draft, prompts, room)
    accepted_log, ranks_log = [], []
    while not output.finished:
        active = [b for b, done in enumerate(output.done) if not done]
        if len(active) < len(prompts):  # finished rows restart empty: their work is discarded
            done = torch.tensor(output.done, device=target.device)
            park(target, state.target_state, done), park(draft, state.draft_state, done)
        outcome = step(target, draft, state, config, randomness, timer)
        counts, tokens, ranks = outcome.accepted.tolist(), outcome.tokens.tolist(), outcome.ranks.tolist()
        accepted_log.append(tuple(counts[b] for b in active))
        ranks_log.append(tuple(tuple(ranks[b][:counts[b]]) for b in active))
        for b in active:
            output.extend(b, tokens[b][:counts[b] + 1])
    iterations = len(accepted_log)
    stats = DecodeStats(iterations, iterations, iterations * config.tree.depth, tuple(accepted_log), (),
                        timer.finish(), accepted_ranks=tuple(ranks_log))
    return Generation(tuple(tuple(row) for row in output.rows), stats)


def tree_acceptance(stats: DecodeStats, tree: Tree) -> dict:
    """Tokens per target call, and the acceptance per depth (P(depth d accepted | depth d - 1 was)) and per child
    rank (how often the accepted child had that rank, over the walks that reached a node with children)."""
    walks = [ranks for iteration in stats.accepted_ranks for ranks in iteration]
    per_depth = []
    for d in range(1, tree.depth + 1):
        reached = sum(1 for ranks in walks if len(ranks) >= d - 1)
        per_depth.append(sum(1 for ranks in walks if len(ranks) >= d) / reached if reached else 0.0)
    width = tree.branching if isinstance(tree, DynamicTree) else \
        max(len(tree.children(node)) for node in range(tree.size))
    chosen = [rank for ranks in walks for rank in ranks]
    tries = sum(len(ranks) + 1 for ranks in walks)  # every accepted step, and the step that stopped
    per_rank = [chosen.count(r) / tries if tries else 0.0 for r in range(1, width + 1)]
    return {"tokens_per_target_call": stats.mean_tokens_per_iteration, "acceptance_per_depth": per_depth,
            "rank_frequencies": per_rank}
