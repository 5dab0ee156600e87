"""Planted-bug tree decoders (docs/theory-trees.md §12): each overrides one phase of ``TreeStep`` with a mistake that
engines and public re-implementations have shipped. The audits must catch every one
(tests/decoders/test_tree_decoder.py, tests/cli/test_audit_command.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders._loop import forward_after
from decoders.sampling import Sampling
from decoders.tree import TreeStep
from decoders.verification import excess

__all__ = ["TreeMutant", "TREE_MUTANTS", "tree_mutant"]


class CandidatesAgainstDraft(TreeStep):
    def verify_node(self, p, q, children, tokens, verifier, randomness):
        return super().verify_node(p, q, children, tokens, "rrs", randomness)  # min(1, p / q) for top-k candidates


class SiblingsSortedByDraft(TreeStep):
    def verify_node(self, p, q, children, tokens, verifier, randomness):
        order = torch.argsort(-q.gather(1, tokens), dim=1, stable=True)  # by their draft probability: token-dependent
        rank, residual = super().verify_node(
            p, q, children.gather(1, order), tokens.gather(1, order), verifier, randomness
        )
        original = order.gather(1, (rank - 1).clamp(min=0)[:, None])[:, 0] + 1
        return torch.where(rank > 0, original, 0), residual


class DuplicatesSkipped(TreeStep):
    def verify_node(self, p, q, children, tokens, verifier, randomness):
        earlier = (tokens[:, :, None] == tokens[:, None, :]).tril(diagonal=-1).any(dim=2)  # [B, c]: seen before
        return super().verify_node(p, q, torch.where(earlier, -1, children), tokens, verifier, randomness)


class ResidualNotRenormalised(TreeStep):
    def residual(self, r, q):
        return excess(r, q)  # (r - q)+ tested as if it were a law


class GreedyAcceptanceAtTemperature(TreeStep):
    def verify_node(self, p, q, children, tokens, verifier, randomness):
        match = (tokens == p.argmax(dim=-1, keepdim=True)) & (children >= 0)  # argmax, whatever the temperature
        rank = torch.where(match.any(dim=1), match.to(torch.int64).argmax(dim=1) + 1, 0)
        return rank, p  # and a stochastic token after it


class BonusFromRawLogits(TreeStep):
    def bonus_law(self, p, logits, sampling):
        return torch.softmax(logits.to(p.dtype), dim=-1)  # no temperature, no top-k or top-p


class FlatPositions(TreeStep):
    def score(self, target, tokens, target_state, parents, pending):
        def flat(nodes, state, node_parents, keep):
            index = state.lengths[:, None] + torch.arange(nodes.shape[1], device=nodes.device)  # node index
            return target.forward_tree(nodes, state, node_parents, positions=index, keep=keep)  # not prefix + depth

        return forward_after(target, tokens, target_state, pending, parents, tree_call=flat)


@dataclass(frozen=True)
class TreeMutant:
    """A planted tree bug: ``step`` run with ``verifier`` under ``shows_with``; ``engine`` names where it shipped.
    ``audit`` holds the `spectheory audit` flags (models, tree, horizon) under which the statistical audit at
    n = 20,000 sees it (p < 1e-4); where the target is tiny the exact audit uses them too."""

    name: str
    bug: str
    engine: str
    step: TreeStep
    verifier: str
    shows_with: Sampling = Sampling(1.0)
    audit: tuple = ("--draft", "tinygpt", "--tree", "parents:-1,0,0,0,1", "--horizon", "3")


#: i.i.d. siblings often repeat, and p exceeds q on several tokens: the residual's updates matter
_CLOSE_DRAFT_TREE = ("--draft", "close", "--tree", "kary:2:2", "--horizon", "2")


TREE_MUTANTS = (
    TreeMutant(
        "tree-candidates-vs-draft",
        "deterministic top-k candidates accepted with min(1, p/q) against the draft's q",
        "public re-implementations of top-k tree verification",
        CandidatesAgainstDraft(),
        "target-only",
    ),
    TreeMutant(
        "tree-sorted-siblings",
        "i.i.d. siblings verified in the order of their draft probability",
        "tree verifiers that sort candidates by score before testing them",
        SiblingsSortedByDraft(),
        "rrs",
    ),
    TreeMutant(
        "tree-skip-duplicates",
        "duplicate i.i.d. siblings skipped without updating the residual",
        "deduplicated candidate sets in multi-draft samplers",
        DuplicatesSkipped(),
        "rrs",
        audit=_CLOSE_DRAFT_TREE,
    ),
    TreeMutant(
        "tree-residual-unnormalised",
        "the residual (r - q)+ is not renormalised between siblings",
        "public RRS re-implementations",
        ResidualNotRenormalised(),
        "rrs",
        audit=_CLOSE_DRAFT_TREE,
    ),
    TreeMutant(
        "tree-greedy-at-temperature",
        "the argmax is accepted at T > 0, then a stochastic token drawn",
        "an unmerged vLLM tree sampler; SGLang's EAGLE verification on ROCm",
        GreedyAcceptanceAtTemperature(),
        "target-only",
        Sampling(0.7),
    ),
    TreeMutant(
        "tree-bonus-raw-logits",
        "the bonus token drawn from the raw logits (no temperature, no top-p)",
        "EAGLE before April 2025 (commit bf10ac5)",
        BonusFromRawLogits(),
        "target-only",
        Sampling(0.7),
    ),
    TreeMutant(
        "tree-flat-positions",
        "tree nodes at position prefix + node index instead of prefix + depth",
        "tree attention with rotary positions taken from the flat token order",
        FlatPositions(),
        "target-only",
        audit=("--target", "shipped", "--tree", "kary:4:1", "--horizon", "2"),
    ),  # trained positions
)


def tree_mutant(name: str) -> TreeMutant:
    """The tree mutant called ``name``; a ValueError lists the names otherwise."""
    for candidate in TREE_MUTANTS:
        if candidate.name == name:
            return candidate
    raise ValueError(f"tree mutant must be one of {[m.name for m in TREE_MUTANTS]}, got {name!r}")
