"""Mirostat 1 and 2 as llama.cpp defines them (src/llama-sampler.cpp, docs/theory-sampling.md §14): samplers with a
state, mu, per row. mu starts at 2 tau; at each position the law (after temperature and any filter before) is truncated
by mu, renormalised, a token is drawn, and mu moves by that token's surprise in bits: mu <- mu - eta (-log2 p(x) - tau),
p the truncated law. Under speculation the state follows the *emitted* tokens alone (docs/theory-sampling.md §14): a
drafted position's law uses mu after the drafts before it, and a rejected draft never moves it.

- Mirostat 2 keeps the tokens whose surprise is at most mu (the most likely one always).
- Mirostat 1 estimates the Zipf exponent s from the m most likely tokens, sets
  k = ((s - 1) 2^mu / (1 - V^-(s - 1)))^(1/s) and keeps the max(floor(k), 1) most likely tokens (V: the vocabulary).
  Its candidates are the tokens of positive probability (a filter before it leaves zeros where llama.cpp shrinks the
  candidate list; a probability that underflows to 0 counts as filtered, where llama.cpp would read log(p / 0)).

``Mirostat`` holds the settings; its methods are functions of tensors: ``truncated`` (one law), ``moved`` (the
state after a token), ``walked`` (the laws at the nodes of a path or a tree, each at the state after its
ancestors). The state itself travels in ``decoders.sampler_state.History``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["VERSIONS", "Mirostat"]

VERSIONS = (0, 1, 2)  # 0: off


def _kept_by_rank(ordered: torch.Tensor, mu: torch.Tensor, version: int, m: int, vocab_size: int) -> torch.Tensor:
    """Which of the sorted probabilities ``ordered: [..., V]`` (descending) Mirostat ``version`` keeps at state
    ``mu: [...]`` -> bool ``[..., V]``."""
    if version == 2:
        kept = -torch.log2(ordered) <= mu[..., None]
        kept[..., 0] = True
        return kept
    # Mirostat 1: least squares of log(p_i / p_i+1) on log((i + 2) / (i + 1)) over the m most likely candidates.
    count = (ordered > 0).sum(dim=-1, keepdim=True)  # [..., 1], the candidates (filters before leave zeros)
    i = torch.arange(ordered.shape[-1] - 1, device=ordered.device)
    used = i < torch.clamp(count - 1, max=m - 1)  # [..., V - 1]
    t = torch.log((i + 2.0) / (i + 1.0)).to(ordered.dtype)
    b = torch.where(used, torch.log(ordered[..., :-1] / ordered[..., 1:]), 0.0)
    s_hat = (t * b).sum(dim=-1) / (t * t * used).sum(dim=-1)
    epsilon = s_hat - 1
    k = ((epsilon * torch.exp2(mu)) / (1 - float(vocab_size) ** -epsilon)) ** (1 / s_hat)
    k = torch.nan_to_num(k, nan=float(vocab_size)).clamp(1, vocab_size).floor()  # one candidate: s_hat is 0/0
    return torch.arange(ordered.shape[-1], device=ordered.device) < k[..., None]


@dataclass(frozen=True)
class Mirostat:
    """Mirostat ``version`` (1 or 2) with target surprise ``tau`` (bits), learning rate ``eta`` and, for version 1,
    the ``m`` most likely tokens its estimate reads (``Sampling.mirostat_sampler`` makes one)."""

    version: int
    tau: float
    eta: float
    m: int = 100

    @property
    def initial(self) -> float:
        """mu before the first generated token: 2 tau (llama.cpp's ``llama_sampler_init_mirostat``)."""
        return 2.0 * self.tau

    def truncated(self, probs: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        """``probs: [..., V]`` truncated at state ``mu: [...]`` and renormalised. Ties in the ranking go to the lower
        token id (llama.cpp's partial sort leaves them unspecified)."""
        ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        kept = torch.zeros_like(probs, dtype=torch.bool).scatter(
            -1, order, _kept_by_rank(ordered, mu.to(probs.dtype), self.version, self.m, probs.shape[-1])
        )
        law = probs.masked_fill(~kept, 0.0)
        return law / law.sum(dim=-1, keepdim=True)

    def moved(self, mu: torch.Tensor, law: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        """The state after ``token: [...]`` drawn from the truncated ``law: [..., V]`` at state ``mu: [...]``."""
        surprise = -torch.log2(law.gather(-1, token[..., None])[..., 0].to(mu.dtype))
        return mu - self.eta * (surprise - self.tau)

    def walked(
        self, probs: torch.Tensor, mu: torch.Tensor, tokens: torch.Tensor, parents: torch.Tensor
    ) -> torch.Tensor:
        """The truncated laws ``[B, N, V]`` at the nodes of ``probs: [B, N, V]``: node n's state is ``mu: [B]`` (or
        ``[1]``) where ``parents[:, n] < 0`` (a root), else its parent's state moved by ``tokens[:, n]`` under the
        parent's law (``tokens, parents: [B, N]``; parents come before their children). A chain's path is the tree
        whose node s + 1 has parent s."""
        batch, nodes = parents.shape
        rows = torch.arange(batch, device=probs.device)
        laws, states = torch.empty_like(probs), torch.empty(batch, nodes, dtype=probs.dtype, device=probs.device)
        start = mu.to(probs.dtype).expand(batch)
        for n in range(nodes):
            parent = parents[:, n].clamp(min=0)
            after = self.moved(states[rows, parent], laws[rows, parent], tokens[:, n]) if n else start
            states[:, n] = torch.where(parents[:, n] < 0, start, after)
            laws[:, n] = self.truncated(probs[:, n], states[:, n])
        return laws
