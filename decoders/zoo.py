"""The shipped target and drafts: the recipes that trained them, and loading them by name.

The weights live in ``decoders/models/weights/`` inside the package: float16 tensors and plain-value configurations
read with ``torch.load(weights_only=True)`` (no arbitrary unpickling), 14.1 MB in all, with
``manifest.json`` recording how each model was trained (steps, seconds, held-out loss, corpus fingerprint,
torch version). ``spectheory train`` reruns a recipe and exports into a zoo directory.

Models: ``target`` (TinyGPT, 4.8M parameters), the drafts with weights — ``transformer`` (TinyGPT 11x smaller),
``distilled`` (the same, fine-tuned on the target's samples), ``bigram``, ``unigram`` (fitted on the corpus) and
``REAL_DRAFT_NAME`` (SmolLM2's) — and ``heads`` (Stern et al.'s proposal heads over the frozen target, a
``BlockwiseGPT``). Drafts are named through their registry, ``decoders.drafts``, which builds these from here.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from decoders.blockwise import BlockwiseGPT
from decoders.models import call_widths
from decoders.models.corpus import VOCAB_SIZE, character_tokenizer, encode_text, load_corpus, split_text
from decoders.models.gguf import REAL_MODELS, is_gguf_file, load_gguf, real_model_path
from decoders.models.hf import is_model_directory, load_directory
from decoders.models.history import NGramModel
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.sampling import Sampling
from decoders.training import (
    HeadsConfig,
    TrainConfig,
    TrainResult,
    read_entries,
    save_atomically,
    target_samples,
    tinygpt_of,
    train_language_model,
    train_proposal_heads,
)
from plumbing.outputs import strict_loads, write_atomically, write_text

__all__ = [
    "ZOO",
    "TARGET",
    "DRAFT",
    "DISTILLATION",
    "HEADS",
    "NGRAMS",
    "TRAINABLE",
    "load_target",
    "load_draft",
    "load_blockwise",
    "load_pair",
    "load_file",
    "load_named",
    "is_loadable",
    "manifest",
    "train",
    "training_order",
    "REAL_MODELS",
    "REAL_DRAFT_NAME",
    "REAL_DRAFT_TARGET",
    "real_model_path",
    "real_draft",
    "own_tokenizer",
]

ZOO = Path(__file__).parent / "models" / "weights"

TARGET = TrainConfig(
    TinyGPTConfig(VOCAB_SIZE, d_model=256, n_layer=6, n_head=4, max_context=256),
    steps=3600,
    batch_size=16,
    context=256,
    learning_rate=2e-3,
    warmup_steps=100,
    eval_every=200,
)
DRAFT = TrainConfig(
    TinyGPTConfig(VOCAB_SIZE, d_model=128, n_layer=2, n_head=4, max_context=256),
    steps=3000,
    batch_size=16,
    context=256,
    learning_rate=3e-3,
    warmup_steps=100,
    eval_every=250,
)


@dataclass(frozen=True)
class Distillation:
    """Sequence-level distillation: ``samples`` rows of ``length`` tokens, each a ``prompt_length`` window of
    the training text continued by the target at ``temperature``; the draft is fine-tuned on them."""

    samples: int
    length: int
    prompt_length: int
    temperature: float
    seed: int
    schedule: TrainConfig


DISTILLATION = Distillation(
    samples=4096,
    length=256,
    prompt_length=32,
    temperature=1.0,
    seed=2,  # the full context
    schedule=replace(DRAFT, steps=1500, context=255, learning_rate=1e-3, seed=3),
)
HEADS = HeadsConfig(
    heads=4,
    d_hidden=256,
    schedule=TrainConfig(
        TARGET.model, steps=600, batch_size=16, context=256, learning_rate=1e-3, warmup_steps=50, eval_every=200
    ),
)
NGRAMS = {"unigram": 1, "bigram": 2}  # name -> n
NGRAM_SMOOTHING = 0.1

#: A small draft in a real model's tokenizer (docs/theory.md §11): a 2-layer TinyGPT over the whole vocabulary,
#: trained on the corpus's training split in that model's tokens, then fine-tuned on the model's own samples
#: (sequence-level distillation). Time-boxed for a 2-core CPU: about 15 minutes in all.
REAL_DRAFT_NAME, REAL_DRAFT_TARGET = "smollm2-draft", "smollm2"
REAL_DRAFT_CHARACTERS = 2_000_000  # of the training split; the held-out loss reads 200,000 of the held-out one
REAL_DRAFT = TrainConfig(
    TinyGPTConfig(VOCAB_SIZE, d_model=48, n_layer=2, n_head=4, max_context=256),
    steps=400,
    batch_size=8,
    context=128,
    learning_rate=3e-3,
    warmup_steps=40,
    eval_every=100,
    eval_batches=4,
)
REAL_DISTILLATION = Distillation(
    samples=256,
    length=128,
    prompt_length=32,
    temperature=1.0,
    seed=2,
    schedule=replace(REAL_DRAFT, steps=150, context=127, learning_rate=1e-3, seed=3),
)
TRAINABLE = ("ngrams", "transformer", "target", "distilled", "heads", REAL_DRAFT_NAME)  # in dependency order


def training_order(names) -> list:
    """``names`` (of ``TRAINABLE``, or "all") once each, in the order their dependencies need."""
    chosen = set(TRAINABLE if "all" in names else names)
    unknown = chosen - set(TRAINABLE)
    if unknown:
        raise ValueError(f"models must be among {TRAINABLE} or all, got {sorted(unknown)}")
    return [name for name in TRAINABLE if name in chosen]


def _read(name: str, zoo: Path, device) -> dict:
    path = Path(zoo) / f"{name}.pt"
    if not path.exists():
        raise ValueError(f"no shipped model {name!r} in {zoo}: train it with `spectheory train {name}`")
    return read_entries(path, "model file", device)


def _tinygpt(name: str, zoo: Path, device, dtype):
    """The zoo's model ``name``: a TinyGPT or an n-gram model."""
    return _model(_read(name, zoo, device), device, dtype, f"model file {name!r}")


def _model(entries: dict, device, dtype, source: str):
    """The TinyGPT or n-gram model of a zoo file's ``entries``; what does not fit is a ValueError naming ``source``."""
    if "config" in entries:
        return tinygpt_of(entries["config"], entries.get("weights"), source).to(device=device, dtype=dtype).eval()
    if "table" in entries:
        try:
            table = entries["table"]
            return NGramModel(
                table.to(dtype) if isinstance(table, torch.Tensor) else table, entries.get("order"), device=device
            )
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None
    raise ValueError(
        f"{source}: a model file holds a TinyGPT (config, weights) or an n-gram table (table, order), "
        f"got keys {sorted(map(str, entries))}"
    )


def load_file(path, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
    """A TinyGPT or n-gram model from a file in the zoo's format (e.g. written by ``spectheory train --zoo``)."""
    return _model(read_entries(path, "model file", device), device, dtype, f"model file {str(path)!r}")


def is_loadable(name_or_path) -> bool:
    """Whether ``load_named`` reads ``name_or_path`` as a model rather than a shipped name: a real model of
    ``REAL_MODELS``, a GGUF file, a local Hugging Face model directory or an existing model file."""

    return (
        name_or_path in REAL_MODELS
        or is_gguf_file(name_or_path)
        or is_model_directory(name_or_path)
        or Path(name_or_path).exists()
    )


def load_named(
    name_or_path: str | None,
    *,
    role: str,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    timed: bool = True,
) -> tuple:
    """(model, tokenizer) of the shipped target (``name_or_path`` None or "target", ``role`` "target"), a real model of
    ``REAL_MODELS`` (``smollm2``), a GGUF file, a model file in the zoo's format, or a local Hugging Face model
    directory; drafts by name come from their registry (``decoders.drafts.open_draft``, which reads the others
    here). The tokenizer is None where the model reads the corpus's character ids: the shipped target, zoo files
    and directories whose tokenizer is the corpus's characters (``spectheory export-hf`` writes such directories).
    A real target's calls are padded to the widths this machine computes cheaper (``call_widths``: measured, 10 s for
    SmolLM2) unless ``timed`` is False: a caller that times none of its calls (an audit, a diverge, training) reads
    the same logits unpadded."""
    if role == "target" and name_or_path in (None, "target"):
        return load_target(device=device, dtype=dtype), None

    path = Path(real_model_path(name_or_path) if name_or_path in REAL_MODELS else name_or_path)
    if name_or_path in REAL_MODELS or is_gguf_file(name_or_path):
        model, tokenizer = load_gguf(path, device=device, dtype=dtype)
    elif is_model_directory(name_or_path):
        model, tokenizer = load_directory(name_or_path, device=device, dtype=dtype)
    elif not path.exists():
        raise ValueError(
            f"{role} {name_or_path!r} is not a shipped model (target, {', '.join(REAL_MODELS)}), a GGUF "
            f"file, a model file or a local Hugging Face model directory (nothing is downloaded)"
        )
    else:
        return load_file(name_or_path, device=device, dtype=dtype), None
    if role == "target" and timed:  # its verify calls: padded to cheaper widths where this machine has them
        call_widths.pad_cheapest_widths(model, source=f"{path.resolve()}@{path.stat().st_mtime_ns}")
    return model, own_tokenizer(tokenizer)


def own_tokenizer(tokenizer):
    """None for the corpus's character tokenizer (``spectheory export-hf``'s), else ``tokenizer``."""

    return None if tokenizer.get_vocab() == character_tokenizer().get_vocab() else tokenizer


def load_target(*, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, zoo: Path = ZOO) -> TinyGPT:
    """The shipped target TinyGPT on ``device`` in ``dtype`` (stored as float16)."""
    return _tinygpt("target", zoo, device, dtype)


def load_draft(name: str, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, zoo: Path = ZOO):
    """A draft with weights in the zoo (transformer, distilled, bigram, unigram) by name, on ``device``."""
    return _tinygpt(name, zoo, device, dtype)


def load_pair(
    draft: str = "transformer",
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    zoo: Path = ZOO,
) -> tuple:
    """(target, draft) for the speculative decoders."""
    return load_target(device=device, dtype=dtype, zoo=zoo), load_draft(draft, device=device, dtype=dtype, zoo=zoo)


def load_blockwise(
    *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, zoo: Path = ZOO
) -> BlockwiseGPT:
    """The target with its trained proposal heads (Stern et al.)."""
    entries = _read("heads", zoo, device)
    model = BlockwiseGPT(load_target(device=device, dtype=dtype, zoo=zoo), entries["heads"], entries["d_hidden"])
    model.proposal.load_state_dict(entries["weights"])
    return model.to(device=device, dtype=dtype).eval()


def manifest(zoo: Path = ZOO) -> dict:
    """How each shipped model was trained: ``{name: {...}}`` from ``manifest.json`` (empty if none)."""
    path = Path(zoo) / "manifest.json"
    return strict_loads(path.read_text()) if path.exists() else {}


def _export(name: str, entries: dict, record: dict, zoo: Path) -> None:
    """Write ``{name}.pt`` atomically and its ``manifest.json`` entry (size, SHA-256 and ``record``)."""
    path = Path(zoo) / f"{name}.pt"
    save_atomically(path, entries)
    data = path.read_bytes()
    book = manifest(zoo)
    book[name] = dict(
        record,
        file=path.name,
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        torch=torch.__version__,
        python=platform.python_version(),
    )
    write_text(Path(zoo) / "manifest.json", json.dumps(book, indent=1, sort_keys=True, allow_nan=False) + "\n")


def _training_record(result: TrainResult, config, corpus, parameters: int) -> dict:
    return {
        "config": asdict(config),
        "parameters": parameters,
        "steps": result.steps,
        "seconds_this_run": round(result.seconds, 1),
        "held_out_losses": [list(e) for e in result.held_out_losses],
        "final_held_out_loss_nats_per_char": result.held_out_losses[-1][1] if result.held_out_losses else None,
        "corpus_fingerprint": corpus.fingerprint,
    }


def _half(module: torch.nn.Module) -> dict:
    """``module``'s state as float16 CPU tensors (how the zoo stores weights)."""
    return {key: value.detach().to("cpu", torch.float16) for key, value in module.state_dict().items()}


def _export_tinygpt(
    name: str,
    model: TinyGPT,
    result: TrainResult,
    config,
    corpus,
    zoo: Path,
    *,
    entries: dict | None = None,
    record: dict | None = None,
) -> None:
    """Export a trained TinyGPT (float16, tied head) with ``entries`` added to its file and ``record`` to its
    manifest entry."""
    weights = _half(model)
    weights["head.weight"] = weights["embed.weight"]  # tied: one tensor in the file
    parameters = sum(p.numel() for p in model.parameters())
    _export(
        name,
        {"config": model.config.as_dict(), "weights": weights, **(entries or {})},
        dict(_training_record(result, config, corpus, parameters), **(record or {})),
        zoo,
    )


def train(
    name: str,
    *,
    work: Path,
    zoo: Path = ZOO,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    until: int | None = None,
) -> dict:
    """Run the recipe of ``name`` (one of ``TRAINABLE``), resuming from checkpoints in ``work``, and export
    the model into ``zoo`` once training is complete. Returns the manifest entries written (none while
    ``until`` stops training early)."""
    if name not in TRAINABLE:
        raise ValueError(f"name must be one of {TRAINABLE}, got {name!r}")
    corpus, work = load_corpus(), Path(work)
    if name in ("target", "transformer"):
        config = TARGET if name == "target" else DRAFT
        model, result = train_language_model(
            config,
            corpus.train,
            corpus.held_out,
            checkpoint=work / f"{name}.pt",
            device=device,
            progress=progress,
            until=until,
        )
        if result.steps < config.steps:
            return {}
        _export_tinygpt(name, model, result, config, corpus, zoo)
    elif name == "distilled":
        samples = _distillation_samples(corpus.train, work, zoo, device, progress)
        schedule = DISTILLATION.schedule
        model, result = train_language_model(
            schedule,
            samples,
            corpus.held_out,
            checkpoint=work / "distilled.pt",
            device=device,
            progress=progress,
            until=until,
            initial=load_draft("transformer", zoo=zoo),
        )
        if result.steps < schedule.steps:
            return {}
        _export_tinygpt(name, model, result, DISTILLATION, corpus, zoo)
    elif name == REAL_DRAFT_NAME:
        return _train_real_draft(work, zoo, device, progress, until, corpus)
    elif name == "heads":
        base = load_target(device=device, zoo=zoo)
        model, result = train_proposal_heads(
            HEADS,
            base,
            corpus.train,
            corpus.held_out,
            checkpoint=work / "heads.pt",
            device=device,
            progress=progress,
            until=until,
        )
        if result.steps < HEADS.schedule.steps:
            return {}
        _export(
            "heads",
            {"heads": HEADS.heads, "d_hidden": HEADS.d_hidden, "weights": _half(model.proposal)},
            _training_record(result, HEADS, corpus, sum(p.numel() for p in model.proposal.parameters())),
            zoo,
        )
    else:
        for ngram, n in NGRAMS.items():
            model = NGramModel.fit(
                [torch.from_numpy(corpus.train.astype(np.int64))], VOCAB_SIZE, n, smoothing=NGRAM_SMOOTHING
            )
            _export(
                ngram,
                {"order": model.order, "table": model.table.to(torch.float32)},
                {
                    "n": n,
                    "smoothing": NGRAM_SMOOTHING,
                    "parameters": model.table.numel(),
                    "corpus_fingerprint": corpus.fingerprint,
                },
                zoo,
            )
        return {ngram: manifest(zoo)[ngram] for ngram in NGRAMS}
    return {name: manifest(zoo)[name]}


def _distillation_samples(stream: np.ndarray, work: Path, zoo: Path, device, progress) -> np.ndarray:
    """The shipped target's samples for distillation, cached in ``work``."""
    return _cached_samples(
        Path(work) / "distillation_samples.npy",
        lambda: load_target(device=device, zoo=zoo),
        stream,
        DISTILLATION,
        progress,
    )


def _cached_samples(path: Path, target, stream: np.ndarray, recipe: Distillation, progress) -> np.ndarray:
    """``recipe``'s samples of ``target()`` (called only when they are not cached at ``path``: they take
    minutes to draw)."""
    if path.exists():
        return np.load(path)
    samples = target_samples(
        target(),
        stream,
        count=recipe.samples,
        length=recipe.length,
        prompt_length=recipe.prompt_length,
        sampling=Sampling(temperature=recipe.temperature),
        seed=recipe.seed,
        progress=progress,
    )
    write_atomically(path, lambda temporary: _save_array(temporary, samples))
    return samples


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of a tokenizer's vocabulary (token -> id, sorted): what a draft trained in it records."""
    return hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()


def _real_draft_data(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The training and held-out streams in ``tokenizer``'s ids (``REAL_DRAFT_CHARACTERS``, 200,000 held out)."""

    train = np.array(encode_text(tokenizer, split_text(False, max_characters=REAL_DRAFT_CHARACTERS)), dtype=np.int32)
    held_out = np.array(encode_text(tokenizer, split_text(True, max_characters=200_000)), dtype=np.int32)
    return train, held_out


def _train_real_draft(work: Path, zoo: Path, device, progress, until, corpus) -> dict:
    """``REAL_DRAFT_NAME``: the corpus phase, then distillation on the real target's samples; exported with the
    tokenizer's fingerprint, which loading checks against the run's target."""
    target, tokenizer = load_named(REAL_DRAFT_TARGET, role="target", device=device, timed=False)
    train_stream, held_out = _real_draft_data(tokenizer)
    config = replace(REAL_DRAFT, model=replace(REAL_DRAFT.model, vocab_size=target.vocab_size))
    base, result = train_language_model(
        config,
        train_stream,
        held_out,
        checkpoint=work / f"{REAL_DRAFT_NAME}-corpus.pt",
        device=device,
        progress=progress,
        until=until,
    )
    if result.steps < config.steps:
        return {}
    samples = _cached_samples(
        work / f"{REAL_DRAFT_NAME}-samples.npy", lambda: target, train_stream, REAL_DISTILLATION, progress
    )
    schedule = replace(REAL_DISTILLATION.schedule, model=config.model)
    model, result = train_language_model(
        schedule,
        samples,
        held_out,
        checkpoint=work / f"{REAL_DRAFT_NAME}.pt",
        device=device,
        progress=progress,
        until=until,
        initial=base,
    )
    if result.steps < schedule.steps:
        return {}
    fingerprint = tokenizer_fingerprint(tokenizer)
    _export_tinygpt(
        REAL_DRAFT_NAME,
        model,
        result,
        REAL_DISTILLATION,
        corpus,
        zoo,
        entries={"tokenizer_fingerprint": fingerprint},
        record={"target": REAL_DRAFT_TARGET, "tokenizer_fingerprint": fingerprint, "corpus_phase": asdict(config)},
    )
    return {REAL_DRAFT_NAME: manifest(zoo)[REAL_DRAFT_NAME]}


def real_draft(tokenizer, device, dtype, zoo: Path = ZOO) -> TinyGPT:
    """``REAL_DRAFT_NAME`` for the run's target's ``tokenizer``, which must be the one it was trained in."""
    entries = _read(REAL_DRAFT_NAME, zoo, device)
    if tokenizer is None or tokenizer_fingerprint(tokenizer) != entries.get("tokenizer_fingerprint"):
        raise ValueError(
            f"draft {REAL_DRAFT_NAME!r} reads {REAL_DRAFT_TARGET}'s tokens: use it with --target {REAL_DRAFT_TARGET}"
        )
    return _model(entries, device, dtype, f"model file {REAL_DRAFT_NAME!r}")


def _save_array(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as handle:  # a handle: np.save would append ".npy" to the temporary name
        np.save(handle, array)
