"""EAGLE-2's dynamic draft tree (docs/theory-trees.md §12): grown anew each iteration, row by row, from the draft's
confidence; the tree decoder (``decoders.tree``) verifies it with the target-only rule."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.sampling import Sampling, adjusted_probs, proposes
from plumbing.validation import as_int, as_positive_int

__all__ = ["DynamicTree", "draft_dynamic", "row_children", "proposing", "confidence"]


@dataclass(frozen=True)
class DynamicTree:
    """EAGLE-2's draft tree, grown anew each iteration from the draft's confidence (docs/theory-trees.md §12): the
    root's ``branching`` most likely tokens are depth 1; at each next depth, up to ``depth``, the ``branching`` nodes of
    the depth before with the largest cumulative draft log-probability are expanded into their ``branching`` most likely
    tokens; then every drafted node is reranked by cumulative log-probability and the best ``budget`` - 1 kept under the
    root. Its shape is a function of the draft alone, so any verifier that is exact for deterministic candidates
    (``target-only``) stays exact; rows of a batch grow different trees."""

    branching: int
    depth: int
    budget: int

    def __post_init__(self) -> None:
        as_positive_int("branching", self.branching), as_positive_int("depth", self.depth)
        drafted = self.branching + (self.depth - 1) * self.branching**2
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


def proposing(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` ``[..., V]``, uniform (zeros) where the draft proposes nothing (all -inf)."""
    return torch.where(proposes(logits)[..., None], logits, torch.zeros_like(logits))


def confidence(logits: torch.Tensor) -> torch.Tensor:
    """The draft's log-probabilities ``[..., V]`` of raw ``logits``: EAGLE-2's confidence."""
    return torch.log_softmax(proposing(logits), dim=-1)


def draft_dynamic(draft, state, root: torch.Tensor, last: torch.Tensor, spec: DynamicTree, sampling: Sampling) -> tuple:
    """EAGLE-2's tree per row (``DynamicTree``) from the draft's logits after the committed sequence (``root: [B, V]``;
    the state holds that sequence): tokens ``[B, N]`` (node 0 the last committed token), parents ``[B, N]`` (nodes
    numbered depth by depth, siblings by descending confidence: their verification order), each node's draft law ``[B,
    N, V]`` (zero where the draft did not expand it: never read) and each node's confidence ``[B, N]``, the cumulative
    draft log-probability of its path (0 at the root; the forecast's input, ``decoders.bench.forecast.dynamic``). The
    scored nodes stay in the state, beyond the committed sequence."""
    batch, k, device = len(last), spec.branching, last.device
    rows = torch.arange(batch, device=device)[:, None]
    logits = root[:, None]  # [B, 1, V]
    scores, tokens = torch.topk(confidence(logits[:, 0]), k, dim=-1)  # [B, k], depth 1
    drafted = {
        "tokens": [tokens],
        "scores": [scores],
        "parents": [torch.full_like(tokens, -1)],
        "depths": [torch.ones_like(tokens)],
    }
    fed_logits, fed_candidates = [logits], []  # the draft's logits at the nodes it scored, and which they were
    frontier, fed, held = torch.arange(k, device=device).expand(batch, -1), torch.full_like(tokens, -1), 0
    for depth in range(2, spec.depth + 1):  # feed the frontier, draft its children, keep the best k as the next one
        logits = draft.forward_tree(tokens, state, fed)  # [B, k, V]; ``fed``: their parents among the scored nodes
        # (-1: the committed sequence)
        fed_logits.append(logits), fed_candidates.append(frontier)
        top, children = torch.topk(confidence(logits), k, dim=-1)  # [B, k, k]
        child_scores = (scores[..., None] + top).flatten(1)  # [B, k * k]
        count = sum(c.shape[1] for c in drafted["tokens"])
        drafted["tokens"].append(children.flatten(1)), drafted["scores"].append(child_scores)
        drafted["parents"].append(frontier.repeat_interleave(k, dim=1))
        drafted["depths"].append(torch.full_like(child_scores, depth, dtype=torch.int64))
        scores, best = torch.topk(child_scores, k, dim=-1)  # [B, k]
        tokens, frontier = children.flatten(1).gather(1, best), count + best
        fed, held = held + best // k, held + k
    tokens, scores, parents, depths = (
        torch.cat(drafted[key], dim=1) for key in ("tokens", "scores", "parents", "depths")
    )
    # the best budget - 1; a stable sort keeps an ancestor (never less likely, drafted earlier) before its nodes
    kept = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, : spec.budget - 1]  # [B, N - 1]
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
    laws = adjusted_probs(proposing(torch.cat(fed_logits, dim=1)), sampling, validate=False)  # [B, scored, V]
    laws = laws.gather(1, at.clamp(min=0)[..., None].expand(-1, -1, laws.shape[-1]))  # [B, N, V]
    q = torch.where((at >= 0)[..., None], laws, 0.0)
    return (
        torch.cat([last[:, None], tokens.gather(1, kept)], dim=1),
        torch.cat([torch.full_like(last[:, None], -1), tree_parents], dim=1),
        q,
        torch.cat([torch.zeros_like(scores[:, :1]), scores.gather(1, kept)], dim=1),
    )


def row_children(parents: torch.Tensor, width: int) -> torch.Tensor:
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
