"""Speculative decoding (Leviathan et al. Algorithm 1; block verification of Sun et al., docs/theory.md §1, §5).

One iteration (``SpeculativeStep``) drafts gamma tokens, verifies them in one target call, accepts and corrects, then
cuts both caches back. The invariants between iterations, per row with committed sequence S: the target's state holds S
without its last token (before the first iteration it holds nothing: its first verify call carries the prompt,
``Committed.target_unfed``, as transformers' first call does); the draft's holds S without its last ``draft_pending`` (1
or 2) tokens -- 2 after an iteration that accepted every draft token, since the last draft token was sampled but never
fed to the draft. A draft may propose fewer than gamma tokens by returning all -inf logits at a position (the copy
draft); the token after its last proposal then comes from the target's distribution, as a bonus token does, and the
target call verifies only up to the longest row's proposals (an iteration where the copy draft finds no match costs one
autoregressive step).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import torch

from decoders._loop import (
    Committed,
    PhaseTimer,
    begin,
    check_models,
    decode,
    feed_draft,
    forward_after,
    host_read,
    keep_nodes,
    park_committed,
    room_for,
    start,
)
from decoders.models.protocol import fixed_widths
from decoders.policies import DraftPolicy, seen_law
from decoders.randomness import Randomness
from decoders.results import DecodeStats, Generation
from decoders.sampling import History, Sampling, adjusted_probs, processed_logits, proposes
from decoders.verification import CHAIN_VERIFIERS, accept_block, accept_tokens, draft_ratio, next_token_law
from plumbing.validation import as_positive_int

# Committed and start live in decoders._loop, shared with the tree decoder
__all__ = [
    "CHAIN_VERIFIERS",
    "SpeculativeConfig",
    "Committed",
    "StepOutcome",
    "SpeculativeStep",
    "REFERENCE_STEP",
    "start",
    "generate_speculative",
    "refuse_inexact",
]


@dataclass(frozen=True)
class SpeculativeConfig:
    """gamma >= 1 draft tokens per iteration; lenience l in (0, 1] (token verifier only); the verifier. With a
    draft-length ``policy`` (``decoders.policies``) gamma is the most an iteration drafts and the policy decides,
    row by row, how many up to it (docs/theory.md §13)."""

    gamma: int
    sampling: Sampling
    lenience: float = 1.0
    verifier: str = "token"
    policy: DraftPolicy | None = None

    def __post_init__(self) -> None:
        as_positive_int("gamma", self.gamma)
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must be a Sampling, got {type(self.sampling).__name__}")
        if not isinstance(self.lenience, (int, float)) or not 0 < self.lenience <= 1:
            raise ValueError(f"lenience must be in (0, 1], got {self.lenience!r}")
        if self.verifier not in CHAIN_VERIFIERS:
            raise ValueError(f"verifier must be one of {CHAIN_VERIFIERS}, got {self.verifier!r}")
        if self.verifier == "block" and self.lenience != 1:
            raise ValueError(f"lenience must be 1 with the block verifier, got {self.lenience!r}")
        if self.policy is not None and not isinstance(self.policy, DraftPolicy):
            raise ValueError(f"policy must be a decoders.policies.DraftPolicy, got {type(self.policy).__name__}")
        if self.policy is not None and self.verifier != "token":
            raise ValueError(f"a draft-length policy needs the token verifier, got {self.verifier!r}")

    def afresh(self) -> "SpeculativeConfig":
        """This config with a new copy of its policy, as a new decoder would hold: a policy may carry state from one
        call to the next (transformers' heuristic length does), which runs of unrelated branches must not share."""
        return self if self.policy is None else replace(self, policy=copy.deepcopy(self.policy))


@dataclass(frozen=True)
class StepOutcome:
    """One iteration of k drafts (gamma, or fewer under a policy): ``tokens: [B, k + 1]`` of which the first
    ``accepted + 1`` are new; the ``proposed`` mask ``[B, k]``; the target's ``p: [B, k + 1, V]`` and the draft's
    ``q: [B, k, V]`` adjusted distributions."""

    tokens: torch.Tensor
    accepted: torch.Tensor
    proposed: torch.Tensor
    p: torch.Tensor
    q: torch.Tensor


def _verified_betas(overlaps: list, accepted: list, proposed: list, active: list) -> tuple:
    """beta = sum min(p, q) at the verified positions (proposed, up to the first rejection) of the rows still
    generating, iteration by iteration, row by row, position by position; from each iteration's ``overlaps``
    ``[B, gamma]``, ``accepted`` ``[B]``, ``proposed`` ``[B, gamma]`` and host list of active rows."""
    overlap, proposed = torch.stack(overlaps), torch.stack(proposed)  # [I, B, gamma]
    positions = torch.arange(overlap.shape[-1], device=overlap.device)
    live = torch.zeros(overlap.shape[:2], dtype=torch.bool)  # [I, B]
    for i, rows in enumerate(active):
        live[i, rows] = True
    verified = (positions <= torch.stack(accepted)[..., None]) & proposed & live.to(overlap.device)[..., None]
    return tuple(overlap[verified].tolist())


def _token_zero(like: torch.Tensor) -> torch.Tensor:
    """The law of token 0 for sure, shaped like ``like`` ``[B, V]``."""
    return torch.nn.functional.one_hot(
        torch.zeros(len(like), dtype=torch.int64, device=like.device), like.shape[-1]
    ).to(like.dtype)


class _Lanes:
    """Which rows draft at each position of an iteration: without a draft-length policy, every row drafts gamma
    tokens, and each method here is a no-op (the default, with no host read); ``_PolicyLanes`` is a policy's."""

    @staticmethod
    def of(config: SpeculativeConfig, committed: Committed, logits: torch.Tensor) -> "_Lanes":
        """The lanes of this iteration under ``config``'s policy, if any (``logits: [B, V]`` give batch and device)."""
        return _NO_POLICY if config.policy is None else _PolicyLanes(config, committed, logits)

    def any_drafting(self) -> bool:
        """Whether any row drafts the next position (the loop stops when none does)."""
        return True

    def law(self, sample_from: torch.Tensor) -> torch.Tensor:
        """The law each row draws its draft token from ``[B, V]``."""
        return sample_from

    def drafted(self, position: int, logits: torch.Tensor, q: torch.Tensor, token: torch.Tensor, greedy: bool) -> None:
        """After drafting ``position`` with the draft's floored ``logits`` and law ``q`` ``[B, V]``, and ``token``
        ``[B]``."""

    def pad_draws(self, randomness: Randomness, drawn: int, like: torch.Tensor) -> None:
        """Draws left to make after ``drawn`` positions (none: every row drew gamma)."""

    def proposed(self, proposes: torch.Tensor) -> torch.Tensor:
        """The proposed mask ``[B, k]`` from the draft's own (``decoders.sampling.proposes``)."""
        return proposes


_NO_POLICY = _Lanes()


class _PolicyLanes(_Lanes):
    """A draft-length policy's lanes (docs/theory.md §13): the policy sets each row's limit, reads the draft's law
    after each position and stops rows; the loop ends once no row drafts (one host read per position).

    The exact audit's replay, in one place: the audit enumerates every draw of a step by replaying scripts of draws,
    so each row must make the same draws whatever the batch does. A stopped row therefore draws token 0 for sure
    (``law``), and once every row has stopped the draws left, up to gamma, are made of token 0 (``pad_draws``):
    every row makes gamma draws a sampled iteration, whatever its policy decided."""

    def __init__(self, config: SpeculativeConfig, committed: Committed, logits: torch.Tensor) -> None:
        self.policy, self.state, self.gamma = config.policy, committed.policy_state, config.gamma
        self.limit = self.policy.limit(self.state, len(logits), logits.device).clamp(max=config.gamma)  # [B]
        self.drafting = self.limit > 0  # [B]
        self.live = []  # [B] per position: the rows that drafted it

    def any_drafting(self) -> bool:
        return bool(self.drafting.any())  # the host read

    def law(self, sample_from):
        return torch.where(self.drafting[:, None], sample_from, _token_zero(sample_from))

    def drafted(self, position, logits, q, token, greedy):
        self.live.append(self.drafting)  # the draft's side only: its law here and the token it drew
        seen = seen_law(logits, q, greedy)
        keep = self.policy.keep(self.state, position, seen, token)
        self.drafting = self.drafting & keep & (position + 1 < self.limit)

    def pad_draws(self, randomness, drawn, like):
        for _ in range(self.gamma - drawn):
            randomness.categorical(_token_zero(like))

    def proposed(self, proposes):
        return proposes & torch.stack(self.live, 1)


class SpeculativeStep:
    """One iteration of Algorithm 1 (or block verification) in named phases: ``draft``, ``verify``,
    ``accept`` and ``correct``, then ``rollback``. Calling it runs the iteration and updates ``committed``
    in place. The planted-bug decoders of ``decoders.audit.mutants`` override one phase each. ``preserves_law`` is
    False for a step that is not a sampler (``decoders.timing``), which the audits refuse."""

    preserves_law = True

    def room(self, config: SpeculativeConfig, max_new_tokens: int) -> int:
        """Tokens each state must hold beyond its prompt: the new tokens and one iteration's overshoot."""
        return room_for(max_new_tokens, config.gamma)

    def draft_probs(self, logits: torch.Tensor, sampling: Sampling) -> tuple[torch.Tensor, torch.Tensor]:
        """The draft's distribution to sample from and the q the accept test uses: the same one. # [..., V] each
        (At temperature 0 the draw is the argmax, as ``adjusted_probs`` defines it; only q is read then.) The
        logits come biased and penalised (``processed_logits``), ``sampling`` is the rest (``Sampling.warping``)."""
        q = adjusted_probs(logits, sampling, validate=False)
        return q, q

    def draft(self, draft, committed: Committed, config: SpeculativeConfig, randomness: Randomness):
        """Tokens ``[B, k]``, the q of the accept test ``[B, k, V]``, the proposed mask ``[B, k]``; k = gamma, or with
        a policy the most any row drafts (``_Lanes``). A row's proposals end at its first all -inf logits or where its
        policy stops; later positions hold dummy draws (never tested). The logits are biased and penalised first, by
        the counts along the drafted path."""
        logits = feed_draft(draft, committed)  # [B, V], after the last committed token
        greedy, floor = config.sampling.greedy, torch.finfo(logits.dtype).min
        sampling, history = config.sampling.warping, committed.history
        lanes = _Lanes.of(config, committed, logits)
        tokens, dists, raw = [], [], []
        for i in range(config.gamma):
            if i:
                if not lanes.any_drafting():
                    break
                logits = draft.forward(tokens[-1][:, None], committed.draft_state)[:, 0]  # [B, V]
                history = None if history is None else history.plus(tokens[-1][:, None])
            logits = processed_logits(logits, config.sampling, history)  # all -inf stays all -inf: no proposal
            if greedy:  # the one-hot law's token (the draw); its q is built for every position at once, below
                tokens.append(logits.argmax(dim=-1))
            else:  # the floor turns all -inf (no proposal) into a uniform dummy law; other -inf stay impossible
                sample_from, q = self.draft_probs(logits.clamp(min=floor), sampling)
                tokens.append(randomness.categorical(lanes.law(sample_from))), dists.append(q)
            raw.append(logits)
            lanes.drafted(i, logits.clamp(min=floor), dists[-1] if dists else logits, tokens[-1], greedy)
        if not greedy:
            lanes.pad_draws(randomness, len(tokens), dists[-1])
        raw = torch.stack(raw, 1)  # [B, k, V]
        q = self.draft_probs(raw.clamp(min=floor), sampling)[1] if greedy else torch.stack(dists, 1)
        # Proposals are a prefix, up to a row's first all -inf logits (NaN logits propose: the loop reports them)
        # or its policy's stop; after it, tokens and q are dummies that are never tested.
        proposed = lanes.proposed(proposes(raw))
        return torch.stack(tokens, 1), q, proposed.cummin(dim=1).values

    def verify(
        self, target, committed: Committed, drafted: torch.Tensor, proposed: torch.Tensor, config: SpeculativeConfig
    ) -> torch.Tensor:
        """One target call on the last committed token and the drafts, after the prompt at the first iteration: all k
        where the target has ``fixed_widths`` (no host read, one compiled shape a gamma), else up to the longest
        row's proposals (one read). p ``[B, k + 1, V]``, whose positions after a row's m proposals repeat position
        m + 1 (never tested or drawn from). Penalties count the committed tokens and the drafts before each
        position."""
        drafts, proposals = drafted.shape[1], proposed.sum(dim=1, keepdim=True)  # [B, 1]
        width = drafts + 1 if fixed_widths(target) else int(proposals.max()) + 1  # the read, where widths vary
        feed = torch.cat([committed.tail[:, 1:], drafted[:, : width - 1]], dim=1)  # [B, width]
        logits = forward_after(target, feed, committed.target_state, committed.target_unfed)
        committed.target_unfed = None
        history = None if committed.history is None else committed.history.along(drafted[:, : width - 1])
        p = adjusted_probs(logits, config.sampling, validate=False, history=history)  # [B, width, V]
        at = torch.minimum(torch.arange(drafts + 1, device=p.device), proposals)  # [B, k + 1]
        return p.gather(1, at[..., None].expand(-1, -1, p.shape[-1]))

    def ratio(self, p, q, drafted, proposed) -> torch.Tensor:
        """p_i(x_i) / q_i(x_i) at the proposed positions, 0 elsewhere. # [B, gamma]"""
        return draft_ratio(p, q, drafted, proposed)

    def accept(self, ratio, proposed, config: SpeculativeConfig, randomness: Randomness) -> torch.Tensor:
        """Token verification (``decoders.verification.accept_tokens``) at gamma's shape -> accepted ``[B]``."""
        return accept_tokens(ratio, proposed, config.lenience, config.gamma, randomness)

    def next_weights(self, p, q, accepted, proposed) -> torch.Tensor:
        """The law of the token after the accepted ones (``decoders.verification.next_token_law``). # [B, V]"""
        return next_token_law(p, q, accepted, proposed)

    def correct(self, weights, drafted, proposed, accepted, randomness: Randomness) -> torch.Tensor:
        """The token after the accepted ones, drawn from ``weights``. # [B]"""
        return randomness.categorical(weights)

    def count(
        self, history: History, drafted: torch.Tensor, tokens: torch.Tensor, accepted: torch.Tensor, p: torch.Tensor
    ) -> History:
        """The sampler's state after an iteration: ``history`` plus each row's new tokens, the first ``accepted + 1``
        of ``tokens: [B, k + 1]``, Mirostat moved by each under its law in ``p: [B, k + 1, V]``; the ``drafted``
        ``[B, k]`` that were rejected never enter it."""
        new = torch.arange(tokens.shape[1], device=tokens.device) <= accepted[:, None]  # [B, k + 1]
        return history.plus(tokens, new, laws=p)

    def rollback(self, target, draft, committed: Committed, held_target, held_draft, accepted, gamma: int) -> None:
        """Cut both states back to the invariants of ``Committed`` (both calls were causal: ``keep_nodes``
        truncates)."""
        keep_nodes(target, committed.target_state, held_target, accepted + 1)
        keep_nodes(draft, committed.draft_state, held_draft, committed.draft_pending + accepted.clamp(max=gamma - 1))

    def __call__(
        self,
        target,
        draft,
        committed: Committed,
        config: SpeculativeConfig,
        randomness: Randomness,
        timer: PhaseTimer | None = None,
    ) -> StepOutcome:
        timer = timer or PhaseTimer(target.device, profile=False)
        if config.policy is not None and committed.policy_state is None:
            committed.policy_state = config.policy.start(len(committed.tail), target.device)
        held_draft = committed.draft_state.lengths  # [B], S without its pending tail (the invariant)
        held_target = committed.target_state.lengths  # [B], S without its last token (never changed in place)
        if committed.target_unfed is not None:  # the first iteration: the prompt is still to come
            held_target = held_target + committed.target_unfed.counts
        with timer.phase("draft"):
            drafted, q, proposed = self.draft(draft, committed, config, randomness)
            drafts = drafted.shape[1]  # this iteration's drafts: config.gamma, or fewer under a policy
        with timer.phase("verify"):
            p = self.verify(target, committed, drafted, proposed, config)
        with timer.phase("accept"):
            ratio = self.ratio(p, q, drafted, proposed)
            if config.verifier == "token":
                accepted = self.accept(ratio, proposed, config, randomness)
                weights = self.next_weights(p, q, accepted, proposed)
            else:
                accepted, weights = accept_block(p, q, ratio, proposed, randomness)
        with timer.phase("correct"):
            last = self.correct(weights, drafted, proposed, accepted, randomness)  # [B]
            # The old last token, then the new ones: the accepted drafts and ``last`` after them.
            emitted = torch.cat([committed.tail[:, 1:], drafted, last[:, None]], dim=1)  # [B, drafts + 2]
            emitted.scatter_(1, (accepted + 1)[:, None], last[:, None])
            self.rollback(target, draft, committed, held_target, held_draft, accepted, drafts)
            committed.tail = emitted.gather(1, torch.stack([accepted, accepted + 1], dim=1))  # the last two
            committed.draft_pending = torch.where(accepted == drafts, 2, 1)
            if committed.history is not None:
                committed.history = self.count(committed.history, drafted, emitted[:, 1:], accepted, p)
            if config.policy is not None:
                config.policy.update(committed.policy_state, proposed.sum(dim=1), accepted)
        return StepOutcome(emitted[:, 1:], accepted, proposed, p, q)


REFERENCE_STEP = SpeculativeStep()


def refuse_inexact(step) -> None:
    """A ``ValueError`` for a step that declares it does not preserve the target's law: auditing it says nothing."""
    if not getattr(step, "preserves_law", True):
        raise ValueError(
            f"{step!r} does not preserve the target's law (timing-only acceptance, docs/gpu.md): it is "
            f"not a sampler, and the audits refuse it"
        )


@torch.inference_mode()
def generate_speculative(
    target,
    draft,
    prompts,
    *,
    max_new_tokens: int,
    config: SpeculativeConfig,
    randomness: Randomness,
    eos: int | None = None,
    profile: bool = False,
    step: SpeculativeStep = REFERENCE_STEP,
) -> Generation:
    """Speculative decoding of up to ``max_new_tokens`` per row; rows may accept different numbers of tokens.
    ``step`` is the iteration to repeat (the audits pass planted-bug variants)."""
    check_models(target, draft)
    if not isinstance(config, SpeculativeConfig):
        raise ValueError(f"config must be a SpeculativeConfig, got {type(config).__name__}")
    room = step.room(config, max_new_tokens)
    run = begin(
        (target, draft),
        prompts,
        max_new_tokens=max_new_tokens,
        room=room,
        sampling=config.sampling,
        eos=eos,
        needed=f"max_new_tokens and one iteration's overshoot, {max_new_tokens} + {room - max_new_tokens}",
        profile=profile,
    )
    (target, draft), timer = run.models, run.timer
    with timer.phase("prefill"):
        committed = start(target, draft, run.prompts, room, run.history)
    accepted_log, proposed_log, actives, outcomes = [], [], [], {"overlaps": [], "accepted": [], "proposed": []}
    draft_calls = 0

    def iterate(active: list) -> list:
        nonlocal draft_calls
        outcome = step(target, draft, committed, config, randomness, timer)
        overlap = torch.minimum(outcome.p[:, :-1], outcome.q).sum(dim=-1)  # [B, k]; NaN where p or q is
        short = config.gamma - overlap.shape[1]  # a policy drafted fewer: pad to gamma, never verified
        draft_calls += overlap.shape[1]
        counts, tokens = host_read(
            [torch.stack([outcome.accepted, outcome.proposed.sum(dim=1)], 1), outcome.tokens],
            (overlap, outcome.p[:, -1]),
            {"target": outcome.p, "draft": outcome.q},
            (committed.target_state, committed.draft_state),
        )  # all of p and q checked
        accepted, proposed_counts = [row[0] for row in counts], [row[1] for row in counts]
        accepted_log.append(tuple(accepted[b] for b in active))
        proposed_log.append(tuple(proposed_counts[b] for b in active))
        actives.append(active)
        proposed = outcome.proposed
        if short:
            overlap, proposed = (torch.nn.functional.pad(x, (0, short)) for x in (overlap, proposed))
        outcomes["overlaps"].append(overlap)
        outcomes["accepted"].append(outcome.accepted), outcomes["proposed"].append(proposed)
        return [row[: count + 1] for row, count in zip(tokens, accepted)]

    decode(run.output, iterate, lambda done: park_committed(target, draft, committed, done))
    stats = DecodeStats(
        iterations=len(accepted_log),
        target_calls=len(accepted_log),
        draft_calls=draft_calls,
        accepted_per_iteration=tuple(accepted_log),
        betas=_verified_betas(**outcomes, active=actives),
        seconds=timer.finish(),
        proposed_per_iteration=tuple(proposed_log),
    )
    return run.generation(stats)
