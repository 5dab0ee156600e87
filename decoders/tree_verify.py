"""Verifying one node's children against the target (docs/theory.md §12): the rules of ``spectheory.multidraft``
(target-only, RRS with and without replacement, K-SEQ) on tensors, batch first, every draw through ``Randomness``
so that the exact audit enumerates it."""

from __future__ import annotations

import torch

from decoders.randomness import Randomness

__all__ = ["verify_node", "residual", "normalised", "kseq_rho"]


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


def residual(residual: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm((r - q)+): the law after a rejection (rows without mass are left to the caller)."""
    return normalised((residual - q).clamp(min=0.0))


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
        return rank, torch.where(beta > 0, (p - c * a).clamp(min=0.0), p)
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
            excess = residual_after(residual, q_j)
            keep = missed[:, None] & (excess.sum(dim=-1, keepdim=True) > 0)
            residual = torch.where(keep, excess, residual)
            if verifier == "rrs-without-replacement":
                draft[rows[missed], x[missed]] = 0.0
    return rank, residual
