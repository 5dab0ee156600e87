"""Verification, every rule in one place (docs/theory.md §1, §5, docs/theory-trees.md §12): pure functions over tensors,
batch first, every draw through ``Randomness`` (so the exact audit enumerates it), no model calls. The chain decoder's
token verification (Algorithm 1 with lenience) and block verification (Sun et al.), and the tree decoders' multi-draft
rules at one node: target-only, RRS with and without replacement, K-SEQ (``spectheory.multidraft`` has their closed
forms in numpy, the independent oracle the tests hold these against)."""

from __future__ import annotations

import torch

from decoders.randomness import Randomness
from spectheory.block_verification import CHAIN_VERIFIERS
from spectheory.multidraft import TREE_RULES

__all__ = [
    "CHAIN_VERIFIERS",
    "TREE_VERIFIERS",
    "token_at",
    "draft_ratio",
    "accept_tokens",
    "next_token_law",
    "accept_block",
    "normalised",
    "excess",
    "residual",
    "kseq_rho",
    "verify_node",
]

#: The tree decoders' verifiers, by name (the chain's are ``CHAIN_VERIFIERS``: token and block).
TREE_VERIFIERS = tuple(sorted(TREE_RULES))


def token_at(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Each row's position ``index[b]`` of ``x: [B, S, V]`` -> ``[B, V]``."""
    return x.gather(1, index[:, None, None].expand(-1, 1, x.shape[-1]))[:, 0]


def draft_ratio(p, q, drafted, proposed) -> torch.Tensor:
    """P_i(x_i) / Q_i(x_i) at the proposed positions, 0 elsewhere.  # [B, gamma]"""
    p_x = torch.gather(p[:, :-1], 2, drafted[..., None])[..., 0]
    q_x = torch.gather(q, 2, drafted[..., None])[..., 0]  # > 0 where proposed: x_i was drawn from q_i
    return torch.where(proposed, p_x / q_x, 0.0)  # elsewhere 0 (where 0 / 0 would be NaN)


def accept_tokens(ratio, proposed, lenience: float, gamma: int, randomness: Randomness) -> torch.Tensor:
    """Token verification (Algorithm 1, with lenience l): accept x_i with min(1, p_i(x_i) / (l q_i(x_i))) up to the
    first rejection -> accepted ``[B]``. ``ratio``, ``proposed`` ``[B, k]``; k < gamma (a policy drafted fewer) is
    padded to gamma, so that every iteration makes gamma draws."""
    ratio = ratio if lenience == 1 else ratio / lenience
    short = gamma - ratio.shape[1]
    if short:
        ratio, proposed = (torch.nn.functional.pad(x, (0, short)) for x in (ratio, proposed))
    accepted = randomness.bernoulli(ratio.clamp(max=1.0)) & proposed  # [B, gamma]
    return accepted.cummin(dim=1).values.sum(dim=1)  # the accepted run before the first rejection


def next_token_law(p, q, accepted, proposed) -> torch.Tensor:
    """The law of the token after the ``accepted`` ones (unnormalised): excess(p, q) at a rejection, p after every
    proposal was accepted, and p where rounding left the excess no mass. # [B, V]"""
    rejected = accepted < proposed.sum(dim=1)  # [B]; proposals are a prefix, so it stopped at a rejection
    p_next = token_at(p, accepted)  # [B, V]
    q_next = token_at(q, accepted.clamp(max=q.shape[1] - 1))  # [B, V], used only where rejected
    left = excess(p_next, torch.where(rejected[:, None], q_next, 0.0))
    return torch.where(left.sum(dim=-1, keepdim=True) <= 0, p_next, left)


def accept_block(p, q, ratio, proposed, randomness: Randomness) -> tuple[torch.Tensor, torch.Tensor]:
    """Block verification (Sun et al.) over each row's m proposed tokens: tau ``[B]`` and the weights of
    the next token's law ``[B, V]`` (docs/theory.md §5, with gamma = m per row)."""
    batch, gamma = ratio.shape
    m = proposed.sum(dim=1)  # [B], proposals are a prefix
    path = [torch.ones(batch, dtype=p.dtype, device=p.device)]  # p_0..p_gamma
    for i in range(gamma):
        path.append(torch.clamp(path[-1] * ratio[:, i], max=1.0))
    path = torch.stack(path, dim=1)  # [B, gamma + 1]
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)  # [B, gamma + 1, V], Q_{gamma+1} := 0
    leftover = excess(path[..., None] * p, q_padded)  # [B, gamma + 1, V], max(0, p_i P_{i+1} - Q_{i+1})
    mass = leftover.sum(dim=-1)  # [B, gamma + 1], Z_{i+1}
    denominator = mass + 1 - path
    stop = torch.where(denominator > 0, mass / denominator.clamp(min=torch.finfo(p.dtype).tiny), 1.0)
    index = torch.arange(gamma + 1, device=p.device)
    stop = torch.where(index == m[:, None], path, stop)  # h_m = p_m
    stop = torch.where(index > m[:, None], 0.0, stop)
    hits = randomness.bernoulli(stop[:, 1:])  # [B, gamma], h_1..h_gamma
    hits = torch.cat([torch.ones_like(hits[:, :1]), hits], dim=1)  # h_0 = 1: tau = 0 when nothing later hits
    tau = gamma - torch.argmax(hits.flip(1).to(torch.int64), dim=1)  # the largest hit
    rows = torch.arange(batch, device=p.device)
    residual = leftover[rows, tau]
    # tau < m with no leftover mass has probability 0; rounding can still pick it: fall back to P_{tau+1}.
    use_residual = (tau < m) & (residual.sum(dim=-1) > 0)
    return tau, torch.where(use_residual[:, None], residual, p[rows, tau])


def normalised(rows: torch.Tensor) -> torch.Tensor:
    return rows / rows.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(rows.dtype).tiny)


def kseq_rho(p, q, count: torch.Tensor, steps: int = 60) -> torch.Tensor:
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


def excess(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """(r - q)+, unnormalised: the mass a rejection of a draw from q leaves of the law r (docs/theory.md §1)."""
    return (r - q).clamp(min=0.0)


def residual(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm((r - q)+): the law after a rejection (rows without mass are left to the caller)."""
    return normalised(excess(r, q))


def verify_node(p, q, children, tokens, verifier: str, randomness: Randomness, residual_after=residual):
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
        rho = kseq_rho(p, q, count.clamp(min=1))
        a = torch.minimum(q, p / rho[:, None])
        beta = a.sum(dim=-1, keepdim=True)
        for j in range(width):
            x = tokens[:, j]
            chance = torch.where(valid[:, j] & (rank == 0), (p[rows, x] / (rho * q[rows, x])).clamp(max=1.0), 0.0)
            rank = torch.where(randomness.bernoulli(chance), j + 1, rank)
        missed = (1 - beta) ** count[:, None]
        c = torch.where(beta > 0, (1 - missed) / beta.clamp(min=1e-300), 0.0)
        return rank, torch.where(beta > 0, excess(p, c * a), p)
    draft = q.clone()
    for j in range(width):
        x = tokens[:, j]
        live = valid[:, j] & (rank == 0)
        if verifier == "target-only":
            chance = residual[rows, x] / residual.sum(dim=-1).clamp(min=torch.finfo(p.dtype).tiny)
        else:
            q_j = normalised(draft)
            drafted = q_j[rows, x]  # 0 only for a repeat once q's support was used up: never accepted
            chance = torch.where(drafted > 0, residual[rows, x] / drafted.clamp(min=torch.finfo(p.dtype).tiny), 0.0)
            chance = chance.clamp(max=1.0)
        hit = randomness.bernoulli(torch.where(live, chance, 0.0))
        rank = torch.where(hit, j + 1, rank)
        missed = live & ~hit
        if verifier == "target-only":
            residual[rows[missed], x[missed]] = 0.0
        else:
            after = residual_after(residual, q_j)
            keep = missed[:, None] & (after.sum(dim=-1, keepdim=True) > 0)
            residual = torch.where(keep, after, residual)
            if verifier == "rrs-without-replacement":
                draft[rows[missed], x[missed]] = 0.0
    return rank, residual
