"""The registry of drafts (docs/extending.md): every draft a command names is one ``register_draft(DraftKind(...))``,
and the lists the commands offer, their help, the default drafts, the Spec-Bench table's drafts and the error for
an unknown name are generated from ``DRAFT_KINDS``. A name no kind takes is a model of ``decoders.zoo.load_named``:
a real model, a GGUF file, a model file in the zoo's format or a local Hugging Face directory.

Where a kind is offered (``DraftKind.offered``): ``SHIPPED``, beside the shipped target (it reads the corpus's
characters); ``FROM_TARGET``, built from the run's target, whatever it is (its vocabulary, tokenizer or weights);
``TINY``, beside the audits' tiny seeded targets (``decoders.audit.setups``, which registers the tiny-only ones).
A kind trained for one real target names it (``only_target``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from decoders import zoo
from decoders.autoregressive import generate_autoregressive
from decoders.models.corpus import VOCAB_SIZE, encode_text, load_corpus, split_text
from decoders.models.hf import HFCausalLM, layer_skip
from decoders.models.history import CopyDraft, NGramModel, SparseNGramModel, UniformModel
from decoders.randomness import TorchRandomness
from decoders.sampling import Sampling
from plumbing.registry import register

__all__ = [
    "SHIPPED",
    "FROM_TARGET",
    "TINY",
    "DraftContext",
    "DraftKind",
    "DRAFT_KINDS",
    "register_draft",
    "draft_kind",
    "draft_names",
    "own_tokenizer_drafts",
    "spec_bench_drafts",
    "build_draft",
    "open_draft",
]

SHIPPED, FROM_TARGET, TINY = "shipped", "from target", "tiny"


@dataclass(frozen=True)
class DraftContext:
    """What a draft is built for: the run's ``target`` model (None: the shipped target's characters) and its
    ``tokenizer`` (None: the corpus's characters), on ``device`` in ``dtype``; ``tiny``: one of the audits' tiny
    targets, which has no text (the ngram draft fits on its samples, drawn with ``seed``)."""

    target: object | None = None
    tokenizer: object | None = None
    device: torch.device | str = "cpu"
    dtype: torch.dtype = torch.float32
    seed: int = 1
    tiny: bool = False

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE if self.target is None else self.target.vocab_size


@dataclass(frozen=True)
class DraftKind:
    """One draft. ``name``: how a command names it (with ``argument``, written ``name:ARGUMENT``, e.g. layerskip:K);
    ``build(name as given, DraftContext)``: the model (a ValueError, one line at the CLI, for a bad argument or a
    target it cannot serve); ``offered``: where it is offered (module docstring); ``only_target``: the one real
    target it reads; ``own_tokenizer_default``: among the default drafts of a target with its own tokenizer;
    ``spec_bench``: (the name as the table writes it, the gammas it sweeps) when it is a row of the Spec-Bench table
    on SmolLM2; ``description``: one line for docs."""

    name: str
    build: Callable[[str, DraftContext], object]
    offered: frozenset
    description: str
    argument: str | None = None
    only_target: str | None = None
    own_tokenizer_default: bool = False
    spec_bench: tuple | None = None

    @property
    def usage(self) -> str:
        return self.name if self.argument is None else f"{self.name}:{self.argument}"

    def matches(self, name) -> bool:
        return name == self.name if self.argument is None else str(name).startswith(self.name + ":")

    def reads_target_tokens(self) -> bool:
        """Whether the draft reads the run's target's tokens (else the corpus's characters)."""
        return FROM_TARGET in self.offered or self.only_target is not None


#: Every registered kind by name, in the order they are listed.
DRAFT_KINDS: dict[str, DraftKind] = {}


def register_draft(kind: DraftKind) -> DraftKind:
    """Adds ``kind`` (a name already registered is a ValueError); returns it."""
    return register(DRAFT_KINDS, kind, "draft kind")


def draft_kind(name) -> DraftKind | None:
    """The kind that takes ``name``, or None (a path)."""
    return next((kind for kind in DRAFT_KINDS.values() if kind.matches(name)), None)


def draft_names(offered: str) -> tuple:
    """The usages of the kinds offered where ``offered`` says (``SHIPPED``, ``FROM_TARGET`` or ``TINY``)."""
    return tuple(kind.usage for kind in DRAFT_KINDS.values() if offered in kind.offered)


def own_tokenizer_drafts() -> tuple:
    """The default drafts of a target with its own tokenizer."""
    return tuple(kind.name for kind in DRAFT_KINDS.values() if kind.own_tokenizer_default)


def spec_bench_drafts(target: str | None) -> dict:
    """The Spec-Bench table's drafts and their gammas: every row on SmolLM2; on another target with a tokenizer,
    those built from the target's text alone (no weights of a given shape, no target of their own)."""
    rows = [kind for kind in DRAFT_KINDS.values() if kind.spec_bench is not None]
    if target != "smollm2":
        rows = [kind for kind in rows if FROM_TARGET in kind.offered and kind.argument is None]
    return {kind.spec_bench[0]: tuple(kind.spec_bench[1]) for kind in rows}


def _listing() -> str:
    return ", ".join(
        kind.usage + (f" (with --target {kind.only_target})" if kind.only_target else "")
        for kind in DRAFT_KINDS.values()
        if kind.offered - {TINY} or kind.only_target
    )


def build_draft(name, context: DraftContext, offered: str | None = None):
    """The draft ``name`` for ``context``; a name no kind (offered where ``offered`` says) takes is a ValueError
    naming those that are."""
    kind = draft_kind(name)
    if kind is None or offered is not None and offered not in kind.offered:
        names = draft_names(offered) if offered is not None else tuple(DRAFT_KINDS)
        raise ValueError(f"draft must be one of {', '.join(names)}, got {name!r}")
    return kind.build(str(name), context)


def open_draft(
    name_or_path: str,
    *,
    target: tuple | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple:
    """(model, tokenizer) of the draft ``name_or_path`` for the run's ``target`` (model, tokenizer): a registered
    kind, else a model ``decoders.zoo.load_named`` loads. The tokenizer is None where the draft reads the corpus's
    characters."""
    model, tokenizer = target if target is not None else (None, None)
    kind = draft_kind(name_or_path)
    if kind is not None and (kind.offered - {TINY} or kind.only_target):  # the tiny-only ones need a tiny target
        draft = kind.build(str(name_or_path), DraftContext(model, tokenizer, device, dtype))
        return draft, tokenizer if kind.reads_target_tokens() else None
    if kind is not None or not zoo.is_loadable(name_or_path):
        raise ValueError(
            f"draft {name_or_path!r} is not a draft we build ({_listing()}), a real model "
            f"({', '.join(zoo.REAL_MODELS)}), a GGUF file, a model file or a local Hugging Face model "
            f"directory (nothing is downloaded)"
        )
    return zoo.load_named(name_or_path, role="draft", device=device, dtype=dtype)


# --- the built-in drafts --------------------------------------------------------------------------------------


def _shipped(name: str, context: DraftContext):
    return zoo.load_draft(name, device=context.device, dtype=context.dtype)


def _copy(name: str, context: DraftContext):
    """Ours (the latest earlier occurrence) or transformers' prompt lookup (the earliest; docs/theory.md §11)."""
    return CopyDraft(
        context.vocab_size, occurrence=name.partition(":")[2] or "latest", device=context.device, dtype=context.dtype
    )


def _uniform(name: str, context: DraftContext):
    return UniformModel(context.vocab_size, device=context.device, dtype=context.dtype)


#: The ngram draft beside a target with text: contexts of up to two tokens, fitted on this many characters of the
#: corpus's training split in the target's tokens.
NGRAM_ORDER, NGRAM_FIT_CHARACTERS = 3, 1_000_000


def _ngram(name: str, context: DraftContext):
    """An n-gram model of the target's text: the corpus in its tokens; a tiny target's own samples (a bigram of
    8 x V rows of 24 tokens, seeded), since it has no text."""
    if context.tiny:
        target, vocab_size = context.target, context.vocab_size
        prompts = [[token] for token in range(vocab_size)] * 8
        samples = generate_autoregressive(
            target,
            prompts,
            max_new_tokens=24,
            sampling=Sampling(1.0),
            randomness=TorchRandomness(torch.Generator().manual_seed(context.seed)),
        )
        fitted = NGramModel.fit([prompt + list(row) for prompt, row in zip(prompts, samples.tokens)], vocab_size, 2)
        return NGramModel(fitted.table.to(context.dtype), fitted.order)
    stream = (
        load_corpus().train
        if context.tokenizer is None
        else encode_text(context.tokenizer, split_text(False, max_characters=NGRAM_FIT_CHARACTERS))
    )
    return SparseNGramModel.fit(stream, context.vocab_size, NGRAM_ORDER, device=context.device, dtype=context.dtype)


def _layer_skip(name: str, context: DraftContext):
    """The target's first K layers and its head (docs/theory.md §11)."""

    if not isinstance(context.target, HFCausalLM):
        raise ValueError(
            f"draft {name!r}: layer skipping needs a Hugging Face or GGUF target, got {type(context.target).__name__}"
        )
    layers = name.partition(":")[2]
    if not layers.isdigit():
        raise ValueError(f"draft {name!r}: give the layers to keep as layerskip:K, K an integer")
    return layer_skip(context.target, int(layers))


def _real_draft(name: str, context: DraftContext):
    return zoo.real_draft(context.tokenizer, context.device, context.dtype)


for _kind in (
    DraftKind("transformer", _shipped, frozenset({SHIPPED}), "a TinyGPT 11x smaller than the shipped target"),
    DraftKind("distilled", _shipped, frozenset({SHIPPED}), "the transformer fine-tuned on the target's samples"),
    DraftKind("bigram", _shipped, frozenset({SHIPPED}), "a bigram fitted on the corpus"),
    DraftKind("unigram", _shipped, frozenset({SHIPPED}), "a unigram fitted on the corpus"),
    DraftKind(
        "copy",
        _copy,
        frozenset({SHIPPED, FROM_TARGET, TINY}),
        "prompt lookup: the latest earlier occurrence",
        own_tokenizer_default=True,
        spec_bench=("copy", (2, 4, 6)),
    ),
    DraftKind(
        "copy:earliest",
        _copy,
        frozenset({FROM_TARGET}),
        "transformers' prompt lookup: the earliest occurrence",
        spec_bench=("copy:earliest", (2, 4, 6)),
    ),
    DraftKind(
        "ngram",
        _ngram,
        frozenset({FROM_TARGET, TINY}),
        "an n-gram model of the target's text",
        own_tokenizer_default=True,
        spec_bench=("ngram", (1, 3)),
    ),
    DraftKind(
        zoo.REAL_DRAFT_NAME,
        _real_draft,
        frozenset(),
        f"a 2-layer TinyGPT distilled from {zoo.REAL_DRAFT_TARGET}",
        only_target=zoo.REAL_DRAFT_TARGET,
        spec_bench=(zoo.REAL_DRAFT_NAME, (1, 2)),
    ),
    DraftKind(
        "layerskip",
        _layer_skip,
        frozenset({FROM_TARGET}),
        "the target's first K layers",
        argument="K",
        spec_bench=("layerskip:24", (1, 2)),
    ),
    DraftKind(
        "random",
        _uniform,
        frozenset({SHIPPED, FROM_TARGET, TINY}),
        "uniform over the vocabulary",
        own_tokenizer_default=True,
    ),
):
    register_draft(_kind)
