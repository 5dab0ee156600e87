"""Planted-bug speculative decoders: each overrides one phase of ``SpeculativeStep`` with a mistake that
real implementations make. The audits must catch every one (tests/test_audit.py).

Each ``Mutant`` names the sampling under which its bug changes the output law: a q computed at another
temperature is harmless at temperature 1, filtering is harmless without top-k.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from decoders.sampling import Sampling, adjusted_probs
from decoders.speculative import SpeculativeStep, _draft_ratio

__all__ = ["Mutant", "MUTANTS", "mutant"]

WRONG_LENIENCE = 0.5


class ResidualFromTarget(SpeculativeStep):
    def next_weights(self, p, q, accepted, proposed):
        return p[torch.arange(len(accepted), device=p.device), accepted]  # p instead of norm(max(0, p - q))


class InvertedRatio(SpeculativeStep):
    def ratio(self, p, q, drafted, proposed):
        q_in_place_of_p = torch.cat([q, p[:, -1:]], dim=1)  # [B, gamma + 1, V], read where p is read
        return _draft_ratio(q_in_place_of_p, p[:, :-1], drafted, proposed)  # q / p instead of p / q


class DraftTestedAtTemperatureOne(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        sampled = adjusted_probs(logits, sampling, validate=False)
        return sampled, adjusted_probs(logits, replace(sampling, temperature=1.0), validate=False)


class FilterOnTargetOnly(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        sampled = adjusted_probs(logits, sampling, validate=False)
        return sampled, adjusted_probs(logits, Sampling(sampling.temperature), validate=False)  # unfiltered q tested


class NoRollback(SpeculativeStep):
    def rollback(self, target, draft, committed, held_target, held_draft, accepted, gamma):
        pass  # rejected tokens stay in both caches


class VerifiedOnePositionLate(SpeculativeStep):
    def ratio(self, p, q, drafted, proposed):
        return _draft_ratio(torch.cat([p[:, 1:], p[:, -1:]], dim=1), q, drafted, proposed)  # p_{i+1}(x_i)


class RejectedTokenKept(SpeculativeStep):
    def correct(self, weights, drafted, proposed, accepted, randomness):
        gamma = drafted.shape[1]
        rows = torch.arange(len(accepted), device=drafted.device)
        at = accepted.clamp(max=gamma - 1)
        rejected = (accepted < gamma) & proposed[rows, at]
        return torch.where(rejected, drafted[rows, at], randomness.categorical(weights))


class OneUniformReused(SpeculativeStep):
    def accept(self, ratio, proposed, config, randomness):
        """Accept x_i while u < min(1, ratio_i) with one u for all i: P(at least k) = min over i <= k."""
        running = torch.cummin((ratio / config.lenience).clamp(max=1.0), dim=1).values  # [B, gamma]
        at_least = torch.cat([torch.ones_like(running[:, :1]), running, torch.zeros_like(running[:, :1])], dim=1)
        return randomness.categorical(at_least[:, :-1] - at_least[:, 1:])  # [B], P(exactly k) for k = 0..gamma


class BonusFromDraft(SpeculativeStep):
    def next_weights(self, p, q, accepted, proposed):
        weights = super().next_weights(p, q, accepted, proposed)
        return torch.where((accepted == q.shape[1])[:, None], q[:, -1], weights)  # the draft's last q, not p_{gamma+1}


class SilentLenience(SpeculativeStep):
    def accept(self, ratio, proposed, config, randomness):
        return super().accept(ratio, proposed, replace(config, lenience=WRONG_LENIENCE), randomness)


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    step: SpeculativeStep
    shows_with: Sampling = Sampling(1.0)


MUTANTS = (
    Mutant("residual-from-p", "after a rejection the next token is drawn from p, not norm(max(0, p - q))",
           ResidualFromTarget()),
    Mutant("ratio-q-over-p", "the accept probability is min(1, q/p) instead of min(1, p/q)", InvertedRatio()),
    Mutant("q-at-temperature-1", "the accept test uses the draft's softmax at temperature 1 while the draft "
           "samples at 0.7", DraftTestedAtTemperatureOne(), Sampling(0.7)),
    Mutant("filter-on-target-only", "top-k is applied to the draft's sampling but not to the q of the accept "
           "test", FilterOnTargetOnly(), Sampling(1.0, top_k=2)),
    Mutant("no-rollback", "rejected tokens are never cut from the caches", NoRollback()),
    Mutant("verify-one-late", "x_i is tested against p_{i+1} instead of p_i", VerifiedOnePositionLate()),
    Mutant("rejected-token-kept", "after a rejection the rejected draft token is emitted instead of a "
           "residual sample", RejectedTokenKept()),
    Mutant("one-uniform", "one uniform is reused for every position of an iteration", OneUniformReused()),
    Mutant("bonus-from-draft", "after full acceptance the bonus token is drawn from the draft's last q, not "
           "from p_{gamma+1}", BonusFromDraft()),
    Mutant("silent-lenience", f"lenience {WRONG_LENIENCE} is applied while the configuration says 1",
           SilentLenience()),
)


def mutant(name: str) -> Mutant:
    """The mutant called ``name``; a ValueError lists the names otherwise."""
    for candidate in MUTANTS:
        if candidate.name == name:
            return candidate
    raise ValueError(f"mutant must be one of {[m.name for m in MUTANTS]}, got {name!r}")
