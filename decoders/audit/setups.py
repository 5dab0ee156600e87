"""What the audits run on: tiny seeded float64 models, and decoders wrapped as black-box samplers.

The tiny models are small enough for exact enumeration (vocabulary <= 5) and have peaked, varied
conditionals, so that a wrong sampler moves visible mass. Everything is float64: the exact audit compares
laws to 1e-9, beyond float32's resolution. The "order0" target's conditionals do not depend on the prefix
(bugs that couple positions cannot hide behind the target's own dependence there), and the "close" draft
is a perturbed copy of its target that accepts most draft tokens, so that the paths after a fully
accepted iteration are exercised often.
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import functools
from typing import Callable, Sequence

import torch

from decoders.drafts import TINY, DraftContext, DraftKind, build_draft, register_draft
from decoders.models.history import TabularModel
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.progress import progress_bar
from decoders.randomness import Randomness, TorchRandomness
from decoders.sampling import stop_padded
from decoders.speculative import (
    REFERENCE_STEP,
    SpeculativeConfig,
    SpeculativeStep,
    generate_speculative,
    refuse_inexact,
)
from plumbing.validation import as_int

__all__ = ["TARGETS", "tiny_target", "tiny_draft", "sampler", "speculative_run", "stop_padding"]

TARGETS = ("tabular", "tinygpt", "order0")
MAX_VOCABULARY = 64  # the tiny models
EMBEDDING_STD = 0.3  # peaked but varied conditionals at this size (a fresh TinyGPT's are nearly uniform)
ORDER0_SHARPNESS = 1.0  # logits N(0, 1): the order-0 table's seed-0 conditional is far from one-hot
CLOSE_LOGIT_STD = 1.0  # the close draft of a table: its logits plus N(0, 1) noise
CLOSE_WEIGHT_STD = 0.15  # the close draft of a TinyGPT: its weights plus N(0, 0.15^2) noise


def _tiny_gpt(vocab_size: int, seed: int, d_model: int, dtype: torch.dtype) -> TinyGPT:
    model = TinyGPT(TinyGPTConfig(vocab_size, d_model=d_model, n_layer=1, n_head=2, max_context=64))
    generator = torch.Generator().manual_seed(seed)
    model.initialize(generator)
    with torch.no_grad():
        model.embed.weight.copy_(torch.randn(model.embed.weight.shape, generator=generator) * EMBEDDING_STD)
    return model.to(dtype).eval()


def _check_vocabulary(vocab_size: int) -> None:
    as_int("vocab_size", vocab_size, low=2, high=MAX_VOCABULARY)


def tiny_target(kind: str, vocab_size: int, seed: int = 0, dtype: torch.dtype = torch.float64):
    """A tabular (order 2), TinyGPT or order-0 tabular target; float32 suffices for statistical audits and
    is faster."""
    _check_vocabulary(vocab_size)
    if kind == "tabular":
        return TabularModel.random(torch.Generator().manual_seed(seed), vocab_size, 2, dtype=dtype)
    if kind == "order0":
        return TabularModel.random(
            torch.Generator().manual_seed(seed), vocab_size, 0, sharpness=ORDER0_SHARPNESS, dtype=dtype
        )
    if kind == "tinygpt":
        return _tiny_gpt(vocab_size, seed, 16, dtype)
    raise ValueError(f"target must be one of {TARGETS}, got {kind!r}")


def tiny_draft(kind: str, target, seed: int = 1, dtype: torch.dtype = torch.float64):
    """The draft ``kind`` of ``draft_names(TINY)`` for ``target`` (``decoders.drafts``): an order-1 table, a smaller
    TinyGPT, a bigram fitted on the target's samples, the copy draft (prompt lookup), the uniform random draft, a
    close copy of the target, or one a user registered."""
    return build_draft(kind, DraftContext(target, None, target.device, dtype, seed, tiny=True), offered=TINY)


def _tabular(name: str, context: DraftContext):
    return TabularModel.random(torch.Generator().manual_seed(context.seed), context.vocab_size, 1, dtype=context.dtype)


def _tinygpt(name: str, context: DraftContext):
    return _tiny_gpt(context.vocab_size, context.seed, 8, context.dtype)


def _close(name: str, context: DraftContext):
    return _close_draft(context.target, torch.Generator().manual_seed(context.seed), context.dtype)


@torch.no_grad()
def _close_draft(target, generator: torch.Generator, dtype: torch.dtype):
    """The target with seeded noise on its logit table or its weights (acceptance in the module docstring
    of tests/decoders/audit/test_audit.py)."""
    if isinstance(target, TabularModel):
        noise = torch.randn(target.table.shape, generator=generator, dtype=torch.float64)
        return TabularModel((target.table.to(torch.float64) + CLOSE_LOGIT_STD * noise).to(dtype), target.order)
    if isinstance(target, TinyGPT):
        draft = copy.deepcopy(target).to(torch.float64)
        for parameter in draft.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * CLOSE_WEIGHT_STD)
        return draft.to(dtype).eval()
    raise ValueError(f"the close draft needs a tabular or TinyGPT target, got {type(target).__name__}")


def speculative_run(
    target,
    draft,
    prompt: Sequence[int],
    config: SpeculativeConfig,
    horizon: int,
    *,
    step: SpeculativeStep = REFERENCE_STEP,
    source: Callable[[Randomness], Randomness] | None = None,
) -> Callable[[list, Randomness], tuple]:
    """``generate(prompts, randomness) -> token rows``: speculative decoding of ``horizon`` tokens per row,
    drawing from ``source(randomness)`` when a source is given (a planted randomness bug); a step that is not a
    sampler is refused."""
    refuse_inexact(step)

    def generate(prompts, randomness):  # a draft-length policy starts afresh in each run, as in a new decoder
        return generate_speculative(
            target,
            draft,
            prompts,
            max_new_tokens=horizon,
            config=config.afresh(),
            randomness=randomness if source is None else source(randomness),
            step=step,
        ).tokens

    return generate


def stop_padding(generate: Callable[[list, Randomness], tuple], horizon: int, stop: tuple) -> Callable:
    """``generate`` whose rows that ended at a ``stop`` token are padded with it to ``horizon``, as the audits' laws
    write them (``decoders.sampling.stop_padded``)."""
    return lambda prompts, randomness: [stop_padded(row, horizon, stop) for row in generate(prompts, randomness)]


def sampler(
    generate: Callable[[list, Randomness], tuple],
    prompt: Sequence[int],
    horizon: int,
    *,
    batch: int = 8192,
    progress: bool | None = None,
    stop: tuple = (),
) -> Callable[[int, torch.Generator], torch.Tensor]:
    """``sample(n, generator) -> [n, horizon]``: ``generate`` run in batches of ``batch`` copies of the prompt; a row
    that ended at a ``stop`` token is padded with it (``decoders.sampling.stop_padded``)."""

    def sample(n: int, generator: torch.Generator) -> torch.Tensor:
        randomness = TorchRandomness(generator)
        rows = torch.empty(n, horizon, dtype=torch.int64)  # allocated once: no small objects between batches' tensors
        with progress_bar(progress, total=n, desc="sampling", unit="seq") as bar:
            for begin in range(0, n, batch):
                size = min(batch, n - begin)
                rows[begin : begin + size] = torch.tensor(
                    stop_padding(generate, horizon, stop)([list(prompt)] * size, randomness), dtype=torch.int64
                )
                bar.update(size)
                release_freed_memory()
        return rows

    return sample


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_freed_memory() -> None:
    """Hands the heap's freed pages back to the system (glibc's ``malloc_trim``; nothing where the C library has
    none). Between batches: their large temporaries otherwise leave the heap fragmented and resident memory
    creeps up batch after batch (SmolLM2's JSON-schema audit, docs/measuring.md: 2.0 GB after 120 batches of 42
    rows, against 1.5 GB when trimmed)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


for _kind in (
    DraftKind("tabular", _tabular, frozenset({TINY}), "a random order-1 table"),
    DraftKind("tinygpt", _tinygpt, frozenset({TINY}), "a smaller random TinyGPT"),
    DraftKind("close", _close, frozenset({TINY}), "the target with seeded noise: accepts most tokens"),
):
    register_draft(_kind)
