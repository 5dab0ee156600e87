"""Planted-bug speculative decoders: each overrides one phase of ``SpeculativeStep``, or the randomness
source the decoder draws from, with a mistake that real implementations make. The audits must catch every
one (tests/decoders/audit/test_audit.py). The tree decoders' planted bugs: ``decoders.audit.tree_mutants``.

Each ``Mutant`` names the sampling under which its bug changes the output law (a q computed at another
temperature is harmless at temperature 1, filtering is harmless without top-k) and the exact method that
can see it (``decoders.audit.runs.METHODS``): the prefix DP sees bugs within one iteration; state carried
between iterations needs whole runs; a coupling between the rows of a batch needs whole runs of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable

import torch

from decoders.audit.mirostat_mutants import BonusMovedTwice, MovedByTargetDraw, MovedUnderDraftLaw, NeverRestored
from decoders.grammar import GrammarSpec
from decoders.randomness import Randomness
from decoders.sampling import History, Sampling, adjusted_probs
from decoders.speculative import REFERENCE_STEP, SpeculativeStep
from decoders.verification import draft_ratio

__all__ = ["Mutant", "MUTANTS", "EXACT_SIZES", "mutant", "OneUniformPerRow"]

WRONG_LENIENCE = 0.5


class ResidualFromTarget(SpeculativeStep):
    def next_weights(self, p, q, accepted, proposed):
        return p[torch.arange(len(accepted), device=p.device), accepted]  # p instead of norm(max(0, p - q))


class InvertedRatio(SpeculativeStep):
    def ratio(self, p, q, drafted, proposed):
        q_in_place_of_p = torch.cat([q, p[:, -1:]], dim=1)  # [B, gamma + 1, V], read where p is read
        return draft_ratio(q_in_place_of_p, p[:, :-1], drafted, proposed)  # q / p instead of p / q


class DraftTestedAtTemperatureOne(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        sampled = adjusted_probs(logits, sampling, validate=False)
        return sampled, adjusted_probs(logits, replace(sampling, temperature=1.0), validate=False)


class FilterOnTargetOnly(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        sampled = adjusted_probs(logits, sampling, validate=False)
        return sampled, adjusted_probs(logits, Sampling(sampling.temperature), validate=False)  # unfiltered q tested


class NoRollback(SpeculativeStep):
    def room(self, config, max_new_tokens):
        return (max_new_tokens + 1) * (config.gamma + 1)  # every iteration leaves gamma + 1 tokens behind

    def rollback(self, target, draft, committed, held_target, held_draft, accepted, gamma):
        pass  # rejected tokens stay in both caches


class VerifiedOnePositionLate(SpeculativeStep):
    def ratio(self, p, q, drafted, proposed):
        return draft_ratio(torch.cat([p[:, 1:], p[:, -1:]], dim=1), q, drafted, proposed)  # p_{i+1}(x_i)


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


class CopiesPreviousToken(SpeculativeStep):
    def correct(self, weights, drafted, proposed, accepted, randomness):
        drawn = super().correct(weights, drafted, proposed, accepted, randomness)
        previous = drafted[torch.arange(len(accepted), device=drafted.device), (accepted - 1).clamp(min=0)]
        return torch.where(accepted > 0, previous, drawn)  # read one position early


class BonusFromLastDraftPosition(SpeculativeStep):
    def next_weights(self, p, q, accepted, proposed):
        return super().next_weights(p, q, accepted.clamp(max=q.shape[1] - 1), proposed)  # position gamma, not gamma + 1


class BatchMinimumRollback(SpeculativeStep):
    def accept(self, ratio, proposed, config, randomness):
        accepted = super().accept(ratio, proposed, config, randomness)
        return accepted.min().expand_as(accepted)  # every row cut back to the batch's fewest accepted tokens


class OneUniformPerRow:
    """A randomness source with one uniform U per row that answers every draw of the row by inverse CDF at
    U, as a cached draw or shared random state does. It is built from U's conditional law, so it runs over
    any ``Randomness`` (seeded draws for the statistical audit, the exact audit's enumerator): given the
    outcomes so far U is uniform on [low, high); a draw cuts that interval at the draw's CDF values, picks a
    piece with probability proportional to its length (one draw of ``inner``) and keeps it. Every draw has
    its batch first (``[N, ...]``), as the decoders' draws do."""

    def __init__(self, inner: Randomness) -> None:
        self.inner = inner
        self.low: torch.Tensor | None = None  # [N] float64
        self.high: torch.Tensor | None = None

    def _uniform(self, cuts: torch.Tensor) -> torch.Tensor:
        """``cuts: [N, K]`` points in [0, 1] -> U's value for this draw ``[N]``, inside the piece drawn."""
        if self.low is None:
            self.low, self.high = torch.zeros_like(cuts[:, 0]), torch.ones_like(cuts[:, 0])
        inside = torch.minimum(torch.maximum(cuts, self.low[:, None]), self.high[:, None])
        edges = torch.cat([self.low[:, None], inside, self.high[:, None]], dim=1).sort(dim=1).values  # [N, K + 2]
        piece = self.inner.categorical(edges.diff(dim=1))  # [N], by length: empty pieces are never drawn
        rows = torch.arange(len(piece), device=piece.device)
        self.low, self.high = edges[rows, piece], edges[rows, piece + 1]
        return (self.low + self.high) / 2

    def categorical(self, probs: torch.Tensor) -> torch.Tensor:
        flat = probs.reshape(probs.shape[0], -1, probs.shape[-1]).to(torch.float64)  # [N, m, V]
        cdf = flat.cumsum(dim=-1) / flat.sum(dim=-1, keepdim=True)
        u = self._uniform(cdf.flatten(1))  # [N]
        index = (cdf <= u[:, None, None]).sum(dim=-1)  # [N, m], the first CDF entry above u
        return index.clamp(max=probs.shape[-1] - 1).reshape(probs.shape[:-1])

    def bernoulli(self, probs: torch.Tensor) -> torch.Tensor:
        p = probs.reshape(probs.shape[0], -1).to(torch.float64).clamp(0.0, 1.0)  # [N, m]
        return (self._uniform(p)[:, None] < p).reshape(probs.shape)


def _same_source(randomness: Randomness) -> Randomness:
    return randomness


class PolicyPeeks(SpeculativeStep):
    """A draft-length rule that reads the target's p of the current iteration: it stops drafting before the first
    token the target likes less than the draft (p(x) < q(x)), the rejection it foresaw."""

    def ratio(self, p, q, drafted, proposed):
        ratio = super().ratio(p, q, drafted, proposed)
        self.kept = proposed & (ratio >= 1).cummin(dim=1).values  # the drafts before the first p < q
        return ratio

    def accept(self, ratio, proposed, config, randomness):
        return super().accept(ratio, self.kept, config, randomness)

    def next_weights(self, p, q, accepted, proposed):
        return super().next_weights(p, q, accepted, self.kept)


class SamplingDropped(SpeculativeStep):
    """Sampling settings ``off`` (field -> the value the bug leaves in its place, mostly the neutral one) in
    verification, and in drafting too unless ``target_only``: the target's law, or both, without them."""

    def __init__(self, target_only: bool, **off) -> None:
        self.target_only, self.off = target_only, off

    def _without(self, config):
        return replace(config, sampling=replace(config.sampling, **self.off))

    def draft(self, draft, committed, config, randomness):
        return super().draft(draft, committed, config if self.target_only else self._without(config), randomness)

    def verify(self, target, committed, drafted, proposed, config):
        return super().verify(target, committed, drafted, proposed, self._without(config))


@dataclass(frozen=True)
class GrammarAtFirstPositionOnly(History):
    """A history whose grammar constrains the first position of a path only (``along``)."""

    def along(self, path):
        walked = super().along(path)
        return replace(walked, allowed=torch.cat([walked.allowed[:, :1], torch.ones_like(walked.allowed[:, 1:])], 1))


class GrammarSkippedInsideDraftWindow(SpeculativeStep):
    def verify(self, target, committed, drafted, proposed, config):
        history = committed.history
        committed.history = GrammarAtFirstPositionOnly(*(getattr(history, f.name) for f in fields(history)))
        try:
            return super().verify(target, committed, drafted, proposed, config)
        finally:
            committed.history = history


class PenaltyCountsLastTokenOnly(SpeculativeStep):
    def count(self, history, drafted, tokens, accepted, p):
        last = tokens.gather(1, accepted[:, None])  # [B, 1]: one token per iteration enters the counts
        return history.plus(last, laws=p.gather(1, accepted[:, None, None].expand(-1, -1, p.shape[-1])))


class PenaltyCountsProposals(SpeculativeStep):
    def count(self, history, drafted, tokens, accepted, p):
        proposed = history.plus(drafted, laws=p[:, :-1])  # every draft, rejected ones too
        return super().count(proposed, drafted, tokens, accepted, p)  # and the accepted ones (again) with the last


class RecoverySharesDraftNoise(SpeculativeStep):
    """The token after a rejection is drawn with the noise that drew the rejected draft token. Both draws are inverse
    CDFs at one uniform U_i per position, sampled exactly through U_i's conditional law: given the draft token x_i,
    U_i is uniform on [F_q(x_i) - q(x_i), F_q(x_i)), and the residual's token is the piece of that interval its CDF
    cuts that U_i falls in (one categorical over the pieces' lengths)."""

    def draft(self, draft, committed, config, randomness):
        drafted, q, proposed = super().draft(draft, committed, config, randomness)
        high = q.cumsum(dim=-1).gather(2, drafted[..., None])[..., 0]  # [B, k], F_q(x_i)
        self.noise = (high - q.gather(2, drafted[..., None])[..., 0], high)  # the interval U_i lies in
        return drafted, q, proposed

    def correct(self, weights, drafted, proposed, accepted, randomness):
        rejected = accepted < proposed.sum(dim=1)  # [B]
        at = accepted.clamp(max=drafted.shape[1] - 1)[:, None]
        low, high = (bound.gather(1, at) for bound in self.noise)  # [B, 1] each
        law = weights / weights.sum(dim=-1, keepdim=True)  # [B, V], the residual
        cdf = law.cumsum(dim=-1)
        shared = (torch.minimum(cdf, high) - torch.maximum(cdf - law, low)).clamp(min=0.0)  # [B, V]: [low, high) cut
        return randomness.categorical(torch.where(rejected[:, None], shared, weights))


class QFromRawLogits(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        sampled = adjusted_probs(logits, sampling, validate=False)
        return sampled, torch.softmax(logits.to(sampled.dtype), dim=-1)  # no temperature, no filter in q


class DraftSampledInBfloat16(SpeculativeStep):
    def draft_probs(self, logits, sampling):
        rounded = logits.to(torch.bfloat16).to(logits.dtype)  # the native-dtype path the draw goes through
        return adjusted_probs(rounded, sampling, validate=False), adjusted_probs(logits, sampling, validate=False)


class TargetZeroedByRecovery(SpeculativeStep):
    def ratio(self, p, q, drafted, proposed):
        p[:, :-1].scatter_(2, drafted[..., None], 0.0)  # p(x_i) zeroed in place, before the accept test reads it
        return super().ratio(p, q, drafted, proposed)


class BatchRowsMisordered(SpeculativeStep):
    def verify(self, target, committed, drafted, proposed, config):
        return super().verify(target, committed, drafted, proposed, config).roll(1, dims=0)  # row b gets b - 1's p


class UnseededRowsGreedy(SpeculativeStep):
    """Rows 1, 3, ... of a batch are the requests without a seed beside seeded ones: their noise is applied to a
    copy, so their token after a rejection (and bonus) is the argmax of its law."""

    def correct(self, weights, drafted, proposed, accepted, randomness):
        sampled = super().correct(weights, drafted, proposed, accepted, randomness)
        unseeded = torch.arange(len(sampled), device=sampled.device) % 2 == 1
        return torch.where(unseeded, weights.argmax(dim=-1), sampled)


NO_PENALTIES = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


@dataclass(frozen=True)
class Mutant:
    """A planted bug: the iteration ``step`` runs over ``source(randomness)``."""

    name: str
    bug: str
    step: SpeculativeStep = REFERENCE_STEP
    shows_with: Sampling = Sampling(1.0)
    exact: str = "dp"  # the exact method that sees it
    source: Callable[[Randomness], Randomness] = _same_source
    shipped: str = ""  # where an engine shipped it: its tracker's issue or PR
    audit: tuple = ()  # `spectheory audit` flags beyond its sampling and method's sizes that it needs to show


#: The smallest settings at which whole runs show every bug of their method (docs/project.md, "What CI runs"): they
#: branch on every draw, so V, gamma and the horizon set the cost. A batch runs two copies of one prompt, so its rows
#: differ from the second token on; V = 2 with the prompt [0, 1] shows the batch bugs in 241 branches (V = 3: 4,921).
EXACT_SIZES = {
    "whole-run": dict(vocabulary=3, gamma=1, horizon=3),
    "batch": dict(vocabulary=2, gamma=1, horizon=2, prompt=(0, 1)),
}

#: Mirostat 2 whose truncation moves within a few tokens on the exact audit's models (docs/theory-sampling.md §14).
MIROSTAT_SHOWN = Sampling(1.0, mirostat=2, mirostat_tau=1.5, mirostat_eta=2.0)

#: A grammar over the letters of the exact audit's vocabularies (token 0 "a", 1 "b"), ended by token 2.
GRAMMAR_SHOWN = Sampling(1.0, stop=(2,), grammar=GrammarSpec("regex", "(ab|ba)+"))

MUTANTS = (
    Mutant(
        "residual-from-p",
        "after a rejection the next token is drawn from p, not norm(max(0, p - q))",
        ResidualFromTarget(),
    ),
    Mutant("ratio-q-over-p", "the accept probability is min(1, q/p) instead of min(1, p/q)", InvertedRatio()),
    Mutant(
        "q-at-temperature-1",
        "the accept test uses the draft's softmax at temperature 1 while the draft samples at 0.7",
        DraftTestedAtTemperatureOne(),
        Sampling(0.7),
    ),
    Mutant(
        "filter-on-target-only",
        "top-k is applied to the draft's sampling but not to the q of the accept test",
        FilterOnTargetOnly(),
        Sampling(1.0, top_k=2),
    ),
    Mutant("no-rollback", "rejected tokens are never cut from the caches", NoRollback(), exact="whole-run"),
    Mutant("verify-one-late", "x_i is tested against p_{i+1} instead of p_i", VerifiedOnePositionLate()),
    Mutant(
        "rejected-token-kept",
        "after a rejection the rejected draft token is emitted instead of a residual sample",
        RejectedTokenKept(),
    ),
    Mutant("one-uniform", "one uniform is reused for every position of an iteration", OneUniformReused()),
    Mutant(
        "bonus-from-draft",
        "after full acceptance the bonus token is drawn from the draft's last q, not from p_{gamma+1}",
        BonusFromDraft(),
    ),
    Mutant("silent-lenience", f"lenience {WRONG_LENIENCE} is applied while the configuration says 1", SilentLenience()),
    Mutant(
        "uniform-per-row",
        "one uniform per row answers every draw of the row, across iterations (a cached draw, shared random state)",
        exact="whole-run",
        source=OneUniformPerRow,
    ),
    Mutant(
        "copies-previous",
        "after an accepted draft token the next token repeats the one before it (an "
        "off-by-one in the position read) instead of the residual or bonus sample",
        CopiesPreviousToken(),
    ),
    Mutant(
        "bonus-from-last-draft-position",
        "after full acceptance the bonus token is drawn from the residual at "
        "the last draft position, not from p_{gamma+1}",
        BonusFromLastDraftPosition(),
    ),
    Mutant(
        "policy-peeks",
        "a draft-length policy stops before the first draft the target likes less than the "
        "draft (it read p of the current iteration)",
        PolicyPeeks(),
    ),
    Mutant(
        "batch-min-rollback",
        "every row of the batch is cut back to the batch's fewest accepted tokens, and "
        "the token after them drawn as if rejected there",
        BatchMinimumRollback(),
        exact="batch",
    ),
    # Sampling parameters under speculation (docs/theory-sampling.md §14): bugs engines have shipped, by tracker number.
    Mutant(
        "penalties-ignored",
        "repetition, presence and frequency penalties silently ignored by the speculative path, draft and target",
        SamplingDropped(False, **NO_PENALTIES),
        Sampling(1.0, repetition_penalty=2.0, frequency_penalty=0.5),
        shipped="TensorRT-LLM PR 17701",
    ),
    Mutant(
        "frequency-penalty-ignored",
        "the frequency penalty has no effect with speculation",
        SamplingDropped(False, frequency_penalty=0.0),
        Sampling(1.0, frequency_penalty=1.0),
        shipped="vLLM issue 18902",
    ),
    Mutant(
        "penalty-last-token-only",
        "only the last token of each iteration enters the penalty counts, so a "
        "frequency penalty acts at about 1/L of its value",
        PenaltyCountsLastTokenOnly(),
        Sampling(1.0, frequency_penalty=1.0),
        exact="whole-run",
        shipped="SGLang PR 33643",
    ),
    Mutant(
        "penalty-counts-proposals",
        "every proposed draft enters the penalty counts, rejected ones too, and the accepted ones twice",
        PenaltyCountsProposals(),
        Sampling(1.0, presence_penalty=1.0),
        exact="whole-run",
        shipped="vmlx-swift issue 357",
    ),
    Mutant(
        "logit-bias-ignored-in-verification",
        "the target's law in verification leaves out the logit bias",
        SamplingDropped(True, logit_bias=()),
        Sampling(1.0, logit_bias=((0, 2.0),)),
        shipped="SGLang PR 22049",
    ),
    Mutant(
        "min-p-ignored-in-verification",
        "min-p is not applied to the target in verification",
        SamplingDropped(True, min_p=None),
        Sampling(1.0, min_p=0.3),
        shipped="SGLang PR 36173",
    ),
    Mutant(
        "top-p-ignored-in-verification",
        "top-p is not applied to the target in batch verification",
        SamplingDropped(True, top_p=None),
        Sampling(1.0, top_p=0.8),
        shipped="MLC-LLM PR 2940",
    ),
    Mutant(
        "grammar-ignored-with-speculation",
        "the grammar (JSON schema, regex, EBNF) is silently dropped by the speculative path, draft and target",
        SamplingDropped(False, grammar=None),
        GRAMMAR_SHOWN,
        shipped="lmdeploy issue 4551, fixed by PR 4559",
    ),
    Mutant(
        "grammar-skipped-inside-draft-window",
        "verification applies the grammar's mask at the first position of "
        "the draft window only: the drafts after it are not checked against the grammar",
        GrammarSkippedInsideDraftWindow(),
        GRAMMAR_SHOWN,
        shipped="vLLM issue 34650, fixed by PR 44297",
    ),
    Mutant(
        "unset-temperature-greedy",
        "a request that sets top-k but leaves the temperature unset is decoded "
        "greedily by the speculative path, so top-k has no effect",
        SamplingDropped(False, temperature=0.0),
        Sampling(1.0, top_k=3),
        shipped="TensorRT-LLM PR 19390",
    ),
    # Randomness, draft laws and batches (docs/theory-sampling.md §14): the same trackers' other bugs.
    Mutant(
        "recovery-shares-draft-noise",
        "the token after a rejection is drawn with the same noise that drew the "
        "rejected draft token (one uniform, inverse CDF; the engine shared Gumbel noise), biased toward the "
        "draft",
        RecoverySharesDraftNoise(),
        shipped="vLLM PR 47386, fixed by PR 54282",
    ),
    Mutant(
        "q-from-raw-logits",
        "the draft samples after temperature and top-k, but the q it returns for the accept "
        "test is the softmax of its raw logits",
        QFromRawLogits(),
        Sampling(0.7, top_k=3),
        shipped="transformers issue 47932",
    ),
    Mutant(
        "draft-sampled-in-bfloat16",
        "the draft token is drawn from bfloat16 logits while the accept test and the residual use the float32 q",
        DraftSampledInBfloat16(),
        shipped="DeepSpec issue 31",
    ),
    Mutant(
        "target-zeroed-by-recovery",
        "computing the recovery law zeroes p(x_i) in the target's probabilities in "
        "place, before the accept test reads them: no draft is ever accepted",
        TargetZeroedByRecovery(),
        shipped="vLLM-Ascend PR 2881",
    ),
    Mutant(
        "batch-rows-misordered",
        "verification reads each row's target probabilities from the row before it "
        "in the batch, so tokens leak between requests",
        BatchRowsMisordered(),
        exact="batch",
        shipped="vLLM PR 14645",
    ),
    Mutant(
        "mixed-seeds-unseeded-rows-greedy",
        "in a batch mixing requests with and without a seed, the unseeded "
        "rows' sampling noise lands on a copy, so their token after a rejection is the argmax of the residual",
        UnseededRowsGreedy(),
        exact="batch",
        shipped="vLLM issue 9441, fixed by PR 10863",
    ),
    # Samplers with a state (decoders.audit.mirostat_mutants): Mirostat's mu moved by the wrong token or law.
    Mutant(
        "mirostat-moved-by-target-draw",
        "Mirostat's state moves at each drafted position by a token the target's "
        "chain draws itself, independent of the token emitted there",
        MovedByTargetDraw(),
        MIROSTAT_SHOWN,
        "whole-run",
        shipped="llama.cpp's rejection path, docs/upstream/llama-server-mirostat.md",
    ),
    Mutant(
        "mirostat-moved-under-q",
        "Mirostat's state moves by each accepted draft's surprise under the draft's q, not the target's p",
        MovedUnderDraftLaw(),
        MIROSTAT_SHOWN,
        "whole-run",
    ),
    Mutant(
        "mirostat-never-restored",
        "Mirostat's state moves along every draft in verification and is not restored after a rejection",
        NeverRestored(),
        MIROSTAT_SHOWN,
        "whole-run",
    ),
    Mutant(
        "mirostat-bonus-moved-twice",
        "after full acceptance Mirostat's state moves twice by the bonus token",
        BonusMovedTwice(),
        MIROSTAT_SHOWN,
        "whole-run",
        audit=("--target", "order0", "--draft", "close", "--vocabulary", "4"),
    ),  # full acceptance is frequent
)


def mutant(name: str) -> Mutant:
    """The mutant called ``name``; a ValueError lists the names otherwise."""
    for candidate in MUTANTS:
        if candidate.name == name:
            return candidate
    raise ValueError(f"mutant must be one of {[m.name for m in MUTANTS]}, got {name!r}")
