"""Planted bugs in how a speculative decoder carries Mirostat's state (docs/theory-sampling.md §14): each moves mu by
the wrong token, under the wrong law, or the wrong number of times; the tokens and the penalties' counts stay right. The
state crosses iterations, so whole runs see every one (``Mutant.exact = "whole-run"``); ``decoders.audit.
mutants.MUTANTS`` lists them with the sampling they show under.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from decoders.speculative import SpeculativeStep

__all__ = ["MovedByTargetDraw", "MovedUnderDraftLaw", "NeverRestored", "BonusMovedTwice"]


def _positions(tokens: torch.Tensor) -> torch.Tensor:
    return torch.arange(tokens.shape[1], device=tokens.device)  # [k + 1]


class MovedByTargetDraw(SpeculativeStep):
    """llama.cpp's rejection path (``common_sampler_sample_and_accept_n_rejection``, common/sampling.cpp): at each
    drafted position it examines, the target's sampler chain draws a token of its own, y_i ~ p_i, to read p_i, and
    Mirostat moves by y_i; the token emitted there is the draft (accepted) or a residual draw. So p_i+1 is truncated
    at a state moved by y_i, and after the iteration mu has moved by the y's (and by the bonus token, which the
    chain draws itself)."""

    def draft(self, draft, committed, config, randomness):
        self.randomness = randomness
        return super().draft(draft, committed, config, randomness)

    def verify(self, target, committed, drafted, proposed, config):
        base = super().verify(
            target, committed, drafted, proposed, replace(config, sampling=replace(config.sampling, mirostat=0))
        )  # [B, k + 1, V], the law before Mirostat
        mirostat, mu = committed.history.mirostat, committed.history.mu.expand(len(base))
        laws, drawn = torch.empty_like(base), []
        for i in range(base.shape[1]):
            laws[:, i] = mirostat.truncated(base[:, i], mu)
            if i < drafted.shape[1]:
                drawn.append(self.randomness.categorical(laws[:, i]))  # the chain's own draw at a drafted position
                mu = mirostat.moved(mu, laws[:, i], drawn[-1])
        self.drawn = torch.stack(drawn, dim=1)  # [B, k]
        return laws

    def count(self, history, drafted, tokens, accepted, p):
        counted = super().count(history, drafted, tokens, accepted, p)
        own = torch.cat([self.drawn, tokens[:, drafted.shape[1] :]], dim=1)  # the y's, then the bonus
        return replace(counted, mu=history.plus(own, _positions(tokens) <= accepted[:, None], laws=p).mu)


class MovedUnderDraftLaw(SpeculativeStep):
    """After an iteration mu moves by each accepted draft's surprise under the draft's q instead of the target's
    p (the token after them under p)."""

    def draft(self, draft, committed, config, randomness):
        drafted, self.q, proposed = super().draft(draft, committed, config, randomness)
        return drafted, self.q, proposed

    def count(self, history, drafted, tokens, accepted, p):
        counted = super().count(history, drafted, tokens, accepted, p)
        drafts = (_positions(tokens) < accepted[:, None])[..., None]  # [B, k + 1, 1]
        laws = torch.where(drafts, torch.cat([self.q.to(p.dtype), p[:, -1:]], dim=1), p)
        return replace(counted, mu=history.plus(tokens, _positions(tokens) <= accepted[:, None], laws=laws).mu)


class NeverRestored(SpeculativeStep):
    """mu moves along every draft as verification walked them, and is not restored after a rejection: the rejected
    drafts move it and the residual token does not (the bonus token does, after full acceptance)."""

    def count(self, history, drafted, tokens, accepted, p):
        counted = super().count(history, drafted, tokens, accepted, p)
        gamma = drafted.shape[1]
        walked = torch.cat([drafted, tokens[:, gamma:]], dim=1)  # [B, k + 1]
        keep = (_positions(tokens) < gamma) | (accepted[:, None] == gamma)
        return replace(counted, mu=history.plus(walked, keep, laws=p).mu)


class BonusMovedTwice(SpeculativeStep):
    """After full acceptance mu moves twice by the bonus token (its update run once when drawn, once when
    committed)."""

    def count(self, history, drafted, tokens, accepted, p):
        counted = super().count(history, drafted, tokens, accepted, p)
        gamma = drafted.shape[1]
        again = counted.plus(tokens[:, gamma:], (accepted == gamma)[:, None], laws=p[:, gamma:])
        return replace(counted, mu=again.mu)
