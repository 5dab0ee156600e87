"""Blockwise parallel decoding (Stern et al. 2018; docs/theory.md §6) with a combined scoring-and-proposal model.

``BlockwiseGPT`` puts k heads on a ``TinyGPT``: head 1 is the base model's own output, heads 2..k share
one feed-forward layer (hidden k * d_hidden, output k * d_model) with a residual connection from the
decoder output to each of the k outputs, and the base's vocabulary projection. One model call per
iteration both verifies the proposed block and proposes the next one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from decoders._loop import begin, decode, park, prefill
from decoders.models.tinygpt import TinyGPT
from decoders.results import DecodeStats, Generation
from decoders.sampling import GREEDY, check_probs
from plumbing.validation import as_non_negative_int, as_positive_int, positive_int_fields

__all__ = ["BlockwiseGPT", "BlockwiseConfig", "CRITERIA", "generate_blockwise"]

CRITERIA = ("exact", "top_k", "distance")


class BlockwiseGPT(nn.Module):
    """A ``TinyGPT`` with ``heads`` proposal heads; ``head_logits`` returns ``[B, S, k, V]``."""

    def __init__(self, base: TinyGPT, heads: int, d_hidden: int | None = None) -> None:
        super().__init__()
        as_positive_int("heads", heads)
        d_model = base.config.d_model
        d_hidden = d_hidden or 4 * d_model
        self.base, self.heads = base, heads
        self.vocab_size, self.max_context = base.vocab_size, base.max_context
        self.proposal = nn.Sequential(
            nn.Linear(d_model, heads * d_hidden), nn.ReLU(), nn.Linear(heads * d_hidden, heads * d_model)
        )

    @property
    def device(self) -> torch.device:
        return self.base.device

    def new_state(self, batch_size: int, capacity: int | None = None):
        return self.base.new_state(batch_size, capacity)

    def truncate(self, state, lengths) -> None:
        self.base.truncate(state, lengths)

    def forward(self, tokens, state, counts=None, keep: int = 0) -> torch.Tensor:
        """The base model's logits (head 1), so the model also serves as an ordinary target."""
        return self.base(tokens, state, counts, keep)

    @torch.no_grad()
    def initialize_proposal(self, generator: torch.Generator, *, std: float = 0.02) -> "BlockwiseGPT":
        """Seeded proposal layers from an explicit CPU ``generator``: weights N(0, std^2), biases 0."""
        for name, parameter in self.proposal.named_parameters():
            parameter.copy_(
                torch.zeros_like(parameter)
                if name.endswith("bias")
                else torch.randn(parameter.shape, generator=generator) * std
            )
        return self

    def head_logits(self, tokens, state, counts=None) -> torch.Tensor:
        """Logits of every head at every new position: ``[B, S, k, V]``; head 1 is the base model."""
        return self.logits_of_hidden(self.base.hidden(tokens, state, counts))

    def logits_of_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """The heads' logits ``[B, S, k, V]`` from the base's final-layer states ``[B, S, D]``."""
        batch, new, width = hidden.shape
        outputs = hidden[:, :, None, :] + self.proposal(hidden).view(batch, new, self.heads, width)  # residual
        outputs = torch.cat([hidden[:, :, None, :], outputs[:, :, 1:]], dim=2)  # head 1 = the base output
        return self.base.head(outputs)


@dataclass(frozen=True)
class BlockwiseConfig:
    """Acceptance of proposals: "exact" (equal to the base's greedy token), "top_k" (among its ``top_k``
    most likely tokens) or "distance" (|proposal - greedy| <= ``epsilon`` for ordinal tokens); the first
    ``min_block_size`` tokens of a block are always accepted. ``block_size`` k uses the model's first k heads
    (default all of them; the model call still computes every head)."""

    criterion: str = "exact"
    top_k: int = 1
    epsilon: int = 0
    min_block_size: int = 1
    block_size: int | None = None

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}")
        positive_int_fields(self, ("top_k", "min_block_size") + (() if self.block_size is None else ("block_size",)))
        as_non_negative_int("epsilon", self.epsilon)


def _agrees(proposals: torch.Tensor, logits: torch.Tensor, config: BlockwiseConfig) -> torch.Tensor:
    """Whether each proposal ``[B, k - 1]`` passes the criterion against base logits ``[B, k - 1, V]``."""
    greedy = logits.argmax(dim=-1)
    if config.criterion == "exact":
        return proposals == greedy
    if config.criterion == "distance":
        return (proposals - greedy).abs() <= config.epsilon
    top = torch.topk(logits, min(config.top_k, logits.shape[-1]), dim=-1).indices
    return (top == proposals[..., None]).any(dim=-1)


@torch.inference_mode()
def generate_blockwise(
    model: BlockwiseGPT,
    prompts,
    *,
    max_new_tokens: int,
    config: BlockwiseConfig = BlockwiseConfig(),
    eos: int | None = None,
    profile: bool = False,
) -> Generation:
    """Greedy blockwise parallel decoding; with the exact criterion the output is the base's greedy decoding.

    Each iteration feeds the proposed block [y_1, y_2..y_k] (y_1 is the base's greedy token, certain),
    accepts y_1 and the longest run of proposals passing the criterion (at least ``min_block_size``
    tokens), and reads the next block from the outputs at the last accepted position.
    """
    k = config.block_size or model.heads
    if k > model.heads:
        raise ValueError(f"block_size must be at most heads = {model.heads}, got {k}")
    if config.min_block_size > k:
        raise ValueError(f"min_block_size must be at most the block size {k}, got {config.min_block_size}")
    run = begin(
        (model,),
        prompts,
        max_new_tokens=max_new_tokens,
        room=max_new_tokens + model.heads,
        needed="max_new_tokens + heads",
        sampling=GREEDY,
        eos=eos,
        profile=profile,
    )
    (model,), prompts, timer = run.models, run.prompts, run.timer
    batch = len(prompts)
    rows = torch.arange(batch, device=model.device)
    with timer.phase("prefill"):
        state = prefill(model, prompts, room=max_new_tokens + model.heads)
        last = torch.tensor([[prompt[-1]] for prompt in prompts], device=model.device)
        heads = model.head_logits(last, state)[:, 0, :k]  # [B, k, V] after the prompt
    check_probs(heads)  # NaN logits (e.g. weights), checked once: argmax would read NaN as the largest logit
    block = heads.argmax(dim=-1)  # [B, k], y_1 certain, y_2..y_k proposed
    accepted_log, calls = [], 1

    def iterate(active: list) -> list:
        nonlocal block, calls
        held = state.lengths.clone()
        with timer.phase("verify"):
            heads = model.head_logits(block, state)[:, :, :k]  # [B, k, k, V], one call: verify and propose
            calls += 1
            passes = _agrees(block[:, 1:], heads[:, :-1, 0], config)  # proposal i+1 vs base after position i
            passes[:, : config.min_block_size - 1] = True
            size = 1 + passes.cummin(dim=1).values.sum(dim=1)  # [B], accepted block size
            model.truncate(state, held + size)
            block_tokens = block.tolist()
            block = heads[rows, size - 1].argmax(dim=-1)  # the next block, from the last accepted position
        sizes = size.tolist()
        accepted_log.append(tuple(sizes[b] - 1 for b in active))
        return [tokens[:count] for tokens, count in zip(block_tokens, sizes)]

    decode(run.output, iterate, lambda done: park(model, state, torch.tensor(done, device=model.device)))
    stats = DecodeStats(
        iterations=len(accepted_log),
        target_calls=calls,
        draft_calls=0,
        accepted_per_iteration=tuple(accepted_log),
        betas=(),
        seconds=timer.finish(),
    )
    return run.generation(stats)
