"""The randomness interface every decoder draws through (docs/theory.md §7).

Decoders never call the global RNG: they take a ``Randomness`` and ask it for ``categorical`` and
``bernoulli`` draws. ``TorchRandomness`` is the production implementation over an explicit
``torch.Generator`` on the models' device; the exact audit (decoders.audit) supplies another that
enumerates every outcome with its probability.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["Randomness", "TorchRandomness", "seeded"]


class Randomness(Protocol):
    def categorical(self, probs: torch.Tensor) -> torch.Tensor:
        """One index per row of ``probs: [..., V]`` (rows sum to 1, or to any positive total) -> ``[...]`` int64."""

    def bernoulli(self, probs: torch.Tensor) -> torch.Tensor:
        """``probs: [...]`` in [0, 1] -> bool ``[...]``, True with the given probability."""


class TorchRandomness:
    """Draws from an explicit ``torch.Generator`` by inverse CDF (no ``multinomial``, no global state)."""

    def __init__(self, generator: torch.Generator) -> None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.generator = generator

    def _uniform(self, shape, like: torch.Tensor) -> torch.Tensor:
        # drawn where the generator lives (a CPU generator serves a model on CUDA: the audits seed one generator
        # for every device), then moved; on one device the stream is the generator's own
        uniform = torch.rand(shape, generator=self.generator, device=self.generator.device, dtype=torch.float64)
        return uniform.to(like.device)

    def categorical(self, probs: torch.Tensor) -> torch.Tensor:
        cdf = torch.cumsum(probs, dim=-1, dtype=torch.float64)  # [..., V]
        u = self._uniform(cdf.shape[:-1] + (1,), cdf).mul_(cdf[..., -1:])  # [..., 1], uniform on [0, total)
        index = torch.searchsorted(cdf, u, right=True)[..., 0]  # first CDF entry > u
        return index.clamp_(max=probs.shape[-1] - 1)

    def bernoulli(self, probs: torch.Tensor) -> torch.Tensor:
        return self._uniform(probs.shape, probs) < probs


def seeded(seed: int, device: torch.device | str = "cpu") -> TorchRandomness:
    """A ``TorchRandomness`` over a fresh generator on ``device`` seeded with ``seed`` (for the edges: CLI, tests)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return TorchRandomness(generator)
