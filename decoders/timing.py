"""Timing-only acceptance (docs/gpu.md, "Timing-only acceptance"): a chain step that accepts each draft token with
probability alpha whatever p and q say, so that a pair of random-weight models has the cost structure of a trained
pair with that alpha (vLLM's synthetic rejection sampler plays the same part). It is NOT a sampler: its output law
is not the target's, and the audits refuse it (``decoders.speculative.refuse_inexact``)."""

from __future__ import annotations

import torch

from decoders.speculative import SpeculativeStep
from decoders.verification import token_at
from plumbing.validation import as_probability

__all__ = ["TimingOnlyStep"]


class TimingOnlyStep(SpeculativeStep):
    """Algorithm 1's phases with the accept probability replaced by ``alpha`` at every proposed position and the
    token after the accepted ones drawn from p there (no residual): token verification only."""

    preserves_law = False

    def __init__(self, alpha: float) -> None:
        self.alpha = float(as_probability("alpha", alpha))

    def __repr__(self) -> str:
        return f"TimingOnlyStep(alpha={self.alpha:g})"

    def ratio(self, p, q, drafted, proposed) -> torch.Tensor:
        """alpha at the proposed positions, 0 elsewhere. # [B, gamma]"""
        return torch.where(proposed, self.alpha, 0.0).to(p.dtype)

    def next_weights(self, p, q, accepted, proposed) -> torch.Tensor:
        """p at the first position not accepted. # [B, V]"""
        return token_at(p, accepted)

    def __call__(self, target, draft, committed, config, randomness, timer=None):
        if config.verifier != "token" or config.lenience != 1:
            raise ValueError(
                f"timing-only acceptance replaces token verification: it needs verifier 'token' and "
                f"lenience 1, got {config.verifier!r} and {config.lenience:g}"
            )
        return super().__call__(target, draft, committed, config, randomness, timer)
