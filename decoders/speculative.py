"""Speculative decoding (Leviathan et al. Algorithm 1; block verification of Sun et al., docs/theory.md §1, §5).

One iteration (``SpeculativeStep``) drafts gamma tokens, verifies them in one target call, accepts
and corrects, then cuts both caches back. The invariants between iterations, per row with committed
sequence S: the target's state holds S without its last token; the draft's holds S without its last
``draft_pending`` (1 or 2) tokens -- 2 after an iteration that accepted every draft token, since the
last draft token was sampled but never fed to the draft. A draft may propose fewer than gamma tokens
by returning all -inf logits at a position (the copy draft); the token after its last proposal then
comes from the target's distribution, as a bonus token does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders._loop import Output, PhaseTimer, as_prompts, check_models, check_room, park, prefill
from decoders.randomness import Randomness
from decoders.results import DecodeStats, Generation
from decoders.sampling import Sampling, adjusted_probs, check_probs, proposes
from spectheory.block_verification import VERIFIERS
from spectheory.validation import as_positive_int

__all__ = ["VERIFIERS", "SpeculativeConfig", "Committed", "StepOutcome", "SpeculativeStep", "REFERENCE_STEP", "start",
           "generate_speculative"]


@dataclass(frozen=True)
class SpeculativeConfig:
    """gamma >= 1 draft tokens per iteration; lenience l in (0, 1] (token verifier only); the verifier."""

    gamma: int
    sampling: Sampling
    lenience: float = 1.0
    verifier: str = "token"

    def __post_init__(self) -> None:
        as_positive_int("gamma", self.gamma)
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must be a Sampling, got {type(self.sampling).__name__}")
        if not isinstance(self.lenience, (int, float)) or not 0 < self.lenience <= 1:
            raise ValueError(f"lenience must be in (0, 1], got {self.lenience!r}")
        if self.verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {VERIFIERS}, got {self.verifier!r}")
        if self.verifier == "block" and self.lenience != 1:
            raise ValueError(f"lenience must be 1 with the block verifier, got {self.lenience!r}")


@dataclass
class Committed:
    """Decoding state between iterations: both models' states, the last two committed tokens of each
    row (``tail: [B, 2]``, the earlier one only meaningful where ``draft_pending`` is 2)."""

    target_state: object
    draft_state: object
    tail: torch.Tensor
    draft_pending: torch.Tensor


@dataclass(frozen=True)
class StepOutcome:
    """One iteration: ``tokens: [B, gamma + 1]`` of which the first ``accepted + 1`` are new; ``betas``
    at the verified proposed positions (``[B, gamma]``, NaN elsewhere); the target's ``p: [B, gamma + 1, V]``
    and the draft's ``q: [B, gamma, V]`` adjusted distributions."""

    tokens: torch.Tensor
    accepted: torch.Tensor
    betas: torch.Tensor
    p: torch.Tensor
    q: torch.Tensor


def _draft_ratio(p, q, drafted, proposed) -> torch.Tensor:
    """P_i(x_i) / Q_i(x_i) at the proposed positions, 0 elsewhere.  # [B, gamma]"""
    p_x = torch.gather(p[:, :-1], 2, drafted[..., None])[..., 0]
    q_x = torch.gather(q, 2, drafted[..., None])[..., 0]  # > 0 where proposed: x_i was drawn from q_i
    return torch.where(proposed, p_x / q_x.clamp(min=torch.finfo(q_x.dtype).tiny), 0.0)


def _accept_block(p, q, ratio, proposed, randomness: Randomness) -> tuple[torch.Tensor, torch.Tensor]:
    """Block verification (Sun et al.) over each row's m proposed tokens: tau ``[B]`` and the weights of
    the next token's law ``[B, V]`` (docs/theory.md §5, with gamma = m per row)."""
    batch, gamma = ratio.shape
    m = proposed.sum(dim=1)  # [B], proposals are a prefix
    path = [torch.ones(batch, dtype=p.dtype, device=p.device)]  # p_0..p_gamma
    for i in range(gamma):
        path.append(torch.clamp(path[-1] * ratio[:, i], max=1.0))
    path = torch.stack(path, dim=1)  # [B, gamma + 1]
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)  # [B, gamma + 1, V], Q_{gamma+1} := 0
    leftover = (path[..., None] * p - q_padded).clamp(min=0.0)  # [B, gamma + 1, V], max(0, p_i P_{i+1} - Q_{i+1})
    excess = leftover.sum(dim=-1)  # [B, gamma + 1], Z_{i+1}
    denominator = excess + 1 - path
    stop = torch.where(denominator > 0, excess / denominator.clamp(min=torch.finfo(p.dtype).tiny), 1.0)
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


class SpeculativeStep:
    """One iteration of Algorithm 1 (or block verification) in named phases: ``draft``, ``verify``,
    ``accept`` and ``correct``, then ``rollback``. Calling it runs the iteration and updates ``committed``
    in place. The planted-bug decoders of ``decoders.audit.mutants`` override one phase each."""

    def room(self, config: SpeculativeConfig, max_new_tokens: int) -> int:
        """Tokens each state must hold beyond its prompt: the new tokens and one iteration's overshoot."""
        return max_new_tokens + config.gamma + 1

    def draft_probs(self, logits: torch.Tensor, sampling: Sampling) -> tuple[torch.Tensor, torch.Tensor]:
        """The draft's distribution to sample from and the q the accept test uses: the same one. # [B, V] each"""
        q = adjusted_probs(logits, sampling, validate=False)
        return q, q

    def draft(self, draft, committed: Committed, config: SpeculativeConfig, randomness: Randomness):
        """Tokens ``[B, gamma]``, the q of the accept test ``[B, gamma, V]``, the proposed mask ``[B, gamma]``."""
        pending = committed.draft_pending
        first = torch.where((pending == 2)[:, None], committed.tail,
                            torch.stack([committed.tail[:, 1], committed.tail[:, 0]], dim=1))
        feed, counts = first, pending
        tokens, dists, proposed = [], [], []
        still = torch.ones_like(pending, dtype=torch.bool)
        rows = torch.arange(len(counts), device=counts.device)
        for _ in range(config.gamma):
            logits = draft.forward(feed, committed.draft_state, counts)[rows, counts - 1]  # [B, V], after the last fed token
            still = still & proposes(logits)  # all -inf: no proposal (NaN is an error, below)
            logits = torch.where(still[:, None], logits, torch.zeros_like(logits))  # a dummy row where none
            sample_from, q = self.draft_probs(logits, config.sampling)
            token = randomness.categorical(sample_from)
            tokens.append(token), dists.append(q), proposed.append(still)
            feed, counts = token[:, None], torch.ones_like(counts)
        return torch.stack(tokens, 1), torch.stack(dists, 1), torch.stack(proposed, 1)

    def verify(self, target, committed: Committed, drafted: torch.Tensor, config: SpeculativeConfig) -> torch.Tensor:
        """One target call on the last committed token and the drafts: p ``[B, gamma + 1, V]``."""
        feed = torch.cat([committed.tail[:, 1:], drafted], dim=1)  # [B, gamma + 1]
        return adjusted_probs(target.forward(feed, committed.target_state), config.sampling, validate=False)

    def ratio(self, p, q, drafted, proposed) -> torch.Tensor:
        """p_i(x_i) / q_i(x_i) at the proposed positions, 0 elsewhere. # [B, gamma]"""
        return _draft_ratio(p, q, drafted, proposed)

    def accept(self, ratio, proposed, config: SpeculativeConfig, randomness: Randomness) -> torch.Tensor:
        """Token verification: accept x_i with min(1, p_i(x_i) / (l q_i(x_i))) up to the first rejection -> ``[B]``."""
        accepted = randomness.bernoulli((ratio / config.lenience).clamp(max=1.0)) & proposed  # [B, gamma]
        return torch.cumprod(accepted.to(torch.int64), dim=1).sum(dim=1)

    def next_weights(self, p, q, accepted, proposed) -> torch.Tensor:
        """The law of the token after the accepted ones: norm(max(0, p - q)) after a rejection, else p. # [B, V]"""
        gamma = q.shape[1]
        rows = torch.arange(len(accepted), device=p.device)
        at = accepted.clamp(max=gamma - 1)
        rejected = (accepted < gamma) & proposed[rows, at]
        residual = (p[rows, accepted] - torch.where(rejected[:, None], q[rows, at], 0.0)).clamp(min=0.0)
        empty = residual.sum(dim=-1, keepdim=True) <= 0  # rounding left no residual mass: fall back to p
        return torch.where(empty, p[rows, accepted], residual)

    def correct(self, weights, drafted, proposed, accepted, randomness: Randomness) -> torch.Tensor:
        """The token after the accepted ones, drawn from ``weights``. # [B]"""
        return randomness.categorical(weights)

    def rollback(self, target, draft, committed: Committed, held_target, held_draft, accepted, gamma: int) -> None:
        """Cut both states back to the invariants of the module docstring."""
        target.truncate(committed.target_state, held_target + 1 + accepted)
        draft.truncate(committed.draft_state, held_draft + committed.draft_pending + accepted.clamp(max=gamma - 1))

    def __call__(self, target, draft, committed: Committed, config: SpeculativeConfig, randomness: Randomness,
                 timer: PhaseTimer | None = None) -> StepOutcome:
        timer = timer or PhaseTimer(target.device, profile=False)
        batch, gamma = committed.tail.shape[0], config.gamma
        rows = torch.arange(batch, device=committed.tail.device)
        held_draft = committed.draft_state.lengths.clone()  # [B], S without its pending tail (the invariant)
        held_target = committed.target_state.lengths.clone()  # [B], S without its last token
        with timer.phase("draft"):
            drafted, q, proposed = self.draft(draft, committed, config, randomness)
        with timer.phase("verify"):
            p = self.verify(target, committed, drafted, config)
        with timer.phase("accept"):
            ratio = self.ratio(p, q, drafted, proposed)
            if config.verifier == "token":
                accepted = self.accept(ratio, proposed, config, randomness)
                weights = self.next_weights(p, q, accepted, proposed)
            else:
                accepted, weights = _accept_block(p, q, ratio, proposed, randomness)
            decided = (torch.arange(gamma, device=p.device) < (accepted + 1)[:, None]) & proposed
            betas = torch.where(decided, torch.minimum(p[:, :-1], q).sum(dim=-1), float("nan"))
        with timer.phase("correct"):
            last = self.correct(weights, drafted, proposed, accepted, randomness)  # [B]
            tokens = torch.cat([drafted, torch.zeros_like(drafted[:, :1])], dim=1)
            tokens[rows, accepted] = last
            self.rollback(target, draft, committed, held_target, held_draft, accepted, gamma)
            previous = torch.where(accepted > 0, drafted[rows, (accepted - 1).clamp(min=0)], committed.tail[:, 1])
            committed.tail = torch.stack([previous, last], dim=1)
            committed.draft_pending = 1 + (accepted == gamma).to(torch.int64)
        return StepOutcome(tokens, accepted, betas, p, q)


REFERENCE_STEP = SpeculativeStep()


def start(target, draft, prompts: list[list[int]], room: int | None = None) -> Committed:
    """Prefill both models: the target and the draft hold each prompt but its last token, with space for
    ``room`` more tokens (None: each model's context)."""
    tail = torch.tensor([[prompt[-2] if len(prompt) > 1 else 0, prompt[-1]] for prompt in prompts], device=target.device)
    return Committed(prefill(target, prompts, room=room), prefill(draft, prompts, room=room), tail,
                     torch.ones(len(prompts), dtype=torch.int64, device=target.device))


@torch.no_grad()
def generate_speculative(target, draft, prompts, *, max_new_tokens: int, config: SpeculativeConfig,
                         randomness: Randomness, eos: int | None = None, profile: bool = False,
                         step: SpeculativeStep = REFERENCE_STEP) -> Generation:
    """Speculative decoding of up to ``max_new_tokens`` per row; rows may accept different numbers of tokens.
    ``step`` is the iteration to repeat (the audits pass planted-bug variants)."""
    check_models(target, draft)
    if not isinstance(config, SpeculativeConfig):
        raise ValueError(f"config must be a SpeculativeConfig, got {type(config).__name__}")
    prompts = as_prompts(prompts, target.vocab_size, eos)
    room = step.room(config, max_new_tokens)
    check_room(target, prompts, room, "max_new_tokens + gamma + 1")
    check_room(draft, prompts, room, "max_new_tokens + gamma + 1")
    output = Output(len(prompts), max_new_tokens, eos)
    timer = PhaseTimer(target.device, profile)
    with timer.phase("prefill"):
        committed = start(target, draft, prompts, room)
    accepted_log, betas, iterations = [], [], 0
    while not output.finished:
        active = [b for b, done in enumerate(output.done) if not done]
        if len(active) < len(prompts):  # only once some row has finished: no extra work while all rows generate
            done = torch.tensor(output.done, device=target.device)
            park(target, committed.target_state, done), park(draft, committed.draft_state, done)
        outcome = step(target, draft, committed, config, randomness, timer)
        iterations += 1
        accepted = outcome.accepted.tolist()
        check_probs(outcome.p, outcome.q)
        tokens = outcome.tokens.tolist()
        row_betas = outcome.betas.tolist()
        accepted_log.append(tuple(accepted[b] for b in active))
        for b in active:
            output.extend(b, tokens[b][:accepted[b] + 1])
            betas.extend(value for value in row_betas[b] if value == value)  # drop NaN
    stats = DecodeStats(iterations, iterations, iterations * config.gamma, tuple(accepted_log), tuple(betas),
                        timer.finish())
    return Generation(tuple(tuple(row) for row in output.rows), stats)
