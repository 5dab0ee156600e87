"""Training TinyGPT language models on the stdlib corpus: seeded, resumable, with a progress bar.

``train_language_model`` runs AdamW with linear warm-up and cosine decay on random windows of the
training stream, evaluates the held-out loss (nats per character) every ``eval_every`` steps and, given
a checkpoint path, saves there and resumes from it. Checkpoints hold tensors and plain values only and
are read with ``torch.load(weights_only=True)``: no arbitrary unpickling.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from decoders.autoregressive import generate_autoregressive
from decoders.blockwise import BlockwiseGPT
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.progress import progress_bar
from decoders.randomness import TorchRandomness
from decoders.sampling import Sampling
from plumbing.outputs import write_atomically
from plumbing.validation import as_positive_int, positive_int_fields

__all__ = [
    "TrainConfig",
    "TrainResult",
    "HeadsConfig",
    "train_language_model",
    "train_proposal_heads",
    "target_samples",
    "held_out_loss",
    "load_checkpoint",
    "read_entries",
    "save_atomically",
    "tinygpt_of",
]


@dataclass(frozen=True)
class TrainConfig:
    model: TinyGPTConfig
    steps: int
    batch_size: int = 32
    context: int = 128  # characters per training window
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.1
    seed: int = 0
    eval_every: int = 250
    eval_batches: int = 8

    def __post_init__(self) -> None:
        positive_int_fields(self, ("steps", "batch_size", "context", "eval_every", "eval_batches"))
        if self.context > self.model.max_context:
            raise ValueError(
                f"context must be at most the model's max_context {self.model.max_context}, got {self.context}"
            )
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TrainResult:
    steps: int
    seconds: float
    train_losses: tuple = field(repr=False)  # (step, mean training loss since the last evaluation)
    held_out_losses: tuple = ()  # (step, held-out loss in nats per character)


def _windows(data: np.ndarray, count: int, context: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` random windows of ``context + 1`` tokens, ``[count, context + 1]`` int64, from one stream
    ``[N]`` or from the rows of ``[R, L]`` (samples: a window never crosses from one row into the next)."""
    offsets = np.arange(context + 1)
    if data.ndim == 1:
        starts = torch.randint(0, len(data) - context - 1, (count,), generator=generator).numpy()
        windows = data[starts[:, None] + offsets]
    else:
        rows = torch.randint(0, data.shape[0], (count,), generator=generator).numpy()
        starts = torch.randint(0, data.shape[1] - context, (count,), generator=generator).numpy()
        windows = data[rows[:, None], starts[:, None] + offsets]
    return torch.from_numpy(windows.astype(np.int64))  # only the windows are widened, not the whole stream


def _learning_rate(config: TrainConfig, step: int) -> float:
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.learning_rate * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def _loss(model: TinyGPT, windows: torch.Tensor) -> torch.Tensor:
    windows = windows.to(model.device)
    logits = model.training_logits(windows[:, :-1])  # [B, C, V]
    return F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten())


def _heads_loss(model: BlockwiseGPT, windows: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of proposal heads 2..k, head i predicting the token i positions ahead."""
    windows = windows.to(model.device)
    with torch.no_grad():
        hidden = model.base.training_hidden(windows[:, :-1])  # [B, C, D], the frozen base
    logits = model.logits_of_hidden(hidden)  # [B, C, k, V]
    losses = [
        F.cross_entropy(logits[:, :-i, i].flatten(0, 1).float(), windows[:, 1 + i :].flatten())
        for i in range(1, model.heads)
    ]
    return sum(losses) / len(losses)


@torch.no_grad()
def _held_out(loss_of, stream: np.ndarray, context: int, batches: int, batch_size: int, seed: int = 1234) -> float:
    generator = torch.Generator().manual_seed(seed)
    return sum(float(loss_of(_windows(stream, batch_size, context, generator))) for _ in range(batches)) / batches


def held_out_loss(
    model: TinyGPT, stream: np.ndarray, context: int, batches: int, batch_size: int, seed: int = 1234
) -> float:
    """Mean cross-entropy in nats per character on fixed random windows of ``stream``."""
    model.eval()
    return _held_out(partial(_loss, model), stream, context, batches, batch_size, seed)


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> tuple[TinyGPT, dict]:
    """A TinyGPT and the checkpoint's other entries (config, step, ...) from a ``train_language_model`` checkpoint."""
    state = read_entries(path, "checkpoint", device)
    model = tinygpt_of(state.get("model_config"), state.get("model"), f"checkpoint {str(path)!r}")
    return model.to(device).eval(), state


def _check_data(config: TrainConfig, train: np.ndarray, held_out: np.ndarray) -> None:
    """Streams need more than ``context + 1`` tokens, sample rows at least ``context + 1``."""
    for name, data in (("train", train), ("held_out", held_out)):
        if data.ndim not in (1, 2) or data.shape[-1] < config.context + 1 + (data.ndim == 1):
            raise ValueError(
                f"{name} must be a stream [N] or rows [R, L] holding windows of context + 1 = "
                f"{config.context + 1} tokens, got shape {data.shape}"
            )


def train_language_model(
    config: TrainConfig,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    checkpoint: Path | None = None,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    until: int | None = None,
    initial: TinyGPT | None = None,
) -> tuple[TinyGPT, TrainResult]:
    """Train (or resume, when ``checkpoint`` exists with the same configuration) a TinyGPT on ``train``
    (a token stream ``[N]`` or samples ``[R, L]``), scoring ``held_out``. ``initial`` starts from its
    weights instead of the seeded initialisation (fine-tuning); ``until`` stops after that many steps in
    all, so that long training can be spread over several runs."""
    _check_data(config, train, held_out)
    model = TinyGPT(config.model).initialize(torch.Generator().manual_seed(config.seed))
    if initial is not None:
        model.load_state_dict(initial.state_dict())
    model = model.to(device)
    return _optimise(
        model,
        partial(_loss, model),
        config,
        {},
        train,
        held_out,
        checkpoint=checkpoint,
        device=device,
        progress=progress,
        until=until,
        description="train",
    )


@dataclass(frozen=True)
class HeadsConfig:
    """Stern et al.'s proposal heads on a frozen base: ``heads`` = k (head 1 is the base itself), one
    hidden layer of ``d_hidden`` units per head; ``schedule.model`` is the base's configuration."""

    heads: int
    d_hidden: int
    schedule: TrainConfig

    def __post_init__(self) -> None:
        positive_int_fields(self, ("heads", "d_hidden"))
        if self.heads < 2:
            raise ValueError(f"heads must be at least 2 (head 1 is the base model), got {self.heads}")

    def as_dict(self) -> dict:
        return asdict(self)


def train_proposal_heads(
    config: HeadsConfig,
    base: TinyGPT,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    checkpoint: Path | None = None,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    until: int | None = None,
) -> tuple[BlockwiseGPT, TrainResult]:
    """Train the proposal heads of a ``BlockwiseGPT`` over the frozen ``base`` (Stern et al. 2018, §3);
    the held-out loss is the heads' mean cross-entropy."""
    schedule = config.schedule
    if base.config != schedule.model:
        raise ValueError(f"base must have the configuration in schedule.model, got {base.config}")
    _check_data(schedule, train, held_out)
    model = BlockwiseGPT(base, config.heads, config.d_hidden)
    model.initialize_proposal(torch.Generator().manual_seed(schedule.seed))
    base.requires_grad_(False)
    model = model.to(device)
    return _optimise(
        model,
        partial(_heads_loss, model),
        schedule,
        config.as_dict(),
        train,
        held_out,
        checkpoint=checkpoint,
        device=device,
        progress=progress,
        until=until,
        description="heads",
    )


def _optimise(
    model: nn.Module,
    loss_of,
    config: TrainConfig,
    identity: dict,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    checkpoint,
    device,
    progress,
    until,
    description,
):
    """AdamW with warm-up and cosine decay over the trainable parameters of ``model``, minimising
    ``loss_of(windows)``; saves to and resumes from ``checkpoint`` when its ``identity`` matches."""
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=config.learning_rate, weight_decay=config.weight_decay, betas=(0.9, 0.95)
    )
    generator = torch.Generator().manual_seed(config.seed + 1)  # the training windows
    identity = dict(identity, train_config=config.as_dict())
    step, train_losses, held_out_losses = 0, [], []
    if checkpoint is not None and Path(checkpoint).exists():
        state = read_entries(checkpoint, "checkpoint", device)
        if any(state.get(key) != value for key, value in identity.items()):
            raise ValueError(f"checkpoint {str(checkpoint)!r} was trained with another configuration")
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            generator.set_state(state["generator"])
            step, train_losses, held_out_losses = (
                state["step"],
                list(map(tuple, state["train_losses"])),
                list(map(tuple, state["held_out_losses"])),
            )
        except (KeyError, TypeError, RuntimeError) as error:  # entries missing or of the wrong kind or shape
            raise ValueError(
                f"checkpoint {str(checkpoint)!r} cannot be resumed ({type(error).__name__}: "
                f"{_first_problem(error)}); delete it to train from the start"
            ) from None
    started, running = time.perf_counter(), []
    with progress_bar(progress, total=config.steps, initial=step, desc=description, unit="step") as bar:
        while step < min(config.steps, until or config.steps):
            model.train()
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(config, step)
            loss = loss_of(_windows(train, config.batch_size, config.context, generator))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            running.append(loss.item())
            step += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps or step == until:
                model.eval()
                train_losses.append((step, sum(running) / len(running)))
                held_out_losses.append(
                    (step, _held_out(loss_of, held_out, config.context, config.eval_batches, config.batch_size))
                )
                bar.set_postfix(train=f"{train_losses[-1][1]:.3f}", held_out=f"{held_out_losses[-1][1]:.3f}")
                running = []
                if checkpoint is not None:
                    save_atomically(
                        checkpoint,
                        dict(
                            identity,
                            model=model.state_dict(),
                            optimizer=optimizer.state_dict(),
                            generator=generator.get_state(),
                            step=step,
                            train_losses=[list(entry) for entry in train_losses],
                            held_out_losses=[list(entry) for entry in held_out_losses],
                            model_config=config.model.as_dict(),
                        ),
                    )
    result = TrainResult(step, time.perf_counter() - started, tuple(train_losses), tuple(held_out_losses))
    return model.eval(), result


def read_entries(path, what: str, device: torch.device | str = "cpu") -> dict:
    """The dictionary saved at ``path`` by ``save_atomically``, read without arbitrary unpickling; a missing,
    truncated or foreign file is a ``ValueError`` naming ``what`` (e.g. "model file") and the path."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {str(path)!r} does not exist")
    try:
        entries = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # pickle, zip and I/O errors of every kind: a file this toolkit did not write
        raise ValueError(
            f"{what} {str(path)!r} cannot be read ({type(error).__name__}): not a file written by "
            f"spectheory, or a damaged one"
        ) from None
    if not isinstance(entries, dict):
        raise ValueError(f"{what} {str(path)!r} holds a {type(entries).__name__}, not a dictionary of entries")
    return entries


def tinygpt_of(config, weights, source: str) -> TinyGPT:
    """A TinyGPT from a configuration dictionary and a state dictionary as files store them, refusing what
    does not fit: unknown or missing configuration keys, weights of other names or shapes, non-finite
    weights. Errors are ``ValueError``s starting with ``source``."""
    known = tuple(entry.name for entry in fields(TinyGPTConfig))
    if not isinstance(config, dict):
        raise ValueError(f"{source}: config must be a dictionary of {known}, got {type(config).__name__}")
    unknown = sorted(map(str, set(config) - set(known)))
    if unknown or "vocab_size" not in config:
        raise ValueError(
            f"{source}: config "
            + (f"has unknown keys {unknown}" if unknown else "lacks vocab_size")
            + f" (a TinyGPT's are {', '.join(known)})"
        )
    if not isinstance(weights, dict) or not all(isinstance(value, torch.Tensor) for value in weights.values()):
        raise ValueError(f"{source}: weights must be a dictionary of tensors")
    not_finite = [name for name, value in weights.items() if not bool(torch.isfinite(value).all())]
    if not_finite:
        raise ValueError(
            f"{source}: weights must be finite, {len(not_finite)} tensors hold NaN or infinity "
            f"(first {not_finite[0]!r})"
        )
    try:
        model = TinyGPT(TinyGPTConfig(**config))
        model.load_state_dict(weights)
    except (ValueError, RuntimeError) as error:  # a bad configuration value; names or shapes that do not fit
        raise ValueError(f"{source}: {_first_problem(error)}") from None
    return model


def _first_problem(error: Exception) -> str:
    """One line of ``error``'s message: torch's state-dictionary errors put a heading first, then the problems."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    line = lines[1] if len(lines) > 1 else lines[0]
    return line if len(line) <= 200 else line[:197] + "..."  # torch lists every missing key


def save_atomically(path, entries: dict) -> None:
    """``torch.save`` through the atomic writer: a crash never leaves half a file at ``path``."""
    write_atomically(path, lambda temporary: torch.save(entries, temporary))


@torch.no_grad()
def target_samples(
    target,
    stream: np.ndarray,
    *,
    count: int,
    length: int,
    prompt_length: int,
    sampling: Sampling,
    seed: int,
    batch_size: int = 128,
    progress: bool | None = None,
) -> np.ndarray:
    """Sequence-level distillation data (Kim and Rush 2016): ``count`` rows ``[count, length]`` (uint8 for a
    vocabulary of at most 256 tokens, else int32), each a random ``prompt_length``-token window of ``stream``
    continued by the target under ``sampling``."""
    for name, value in (("count", count), ("length", length), ("batch_size", batch_size)):
        as_positive_int(name, value)
    if not 0 < prompt_length < length:
        raise ValueError(f"prompt_length must be in (0, length = {length}), got {prompt_length}")
    generator = torch.Generator().manual_seed(seed)
    prompts = _windows(stream, count, prompt_length - 1, generator)  # [count, prompt_length]
    randomness = TorchRandomness(torch.Generator(device=target.device).manual_seed(seed + 1))
    rows = []
    for first in progress_bar(progress, range(0, count, batch_size), desc="samples", unit="batch"):
        batch = prompts[first : first + batch_size]
        generation = generate_autoregressive(
            target,
            batch.to(target.device),
            max_new_tokens=length - prompt_length,
            sampling=sampling,
            randomness=randomness,
        )
        rows.append(torch.cat([batch, torch.tensor(generation.tokens, dtype=torch.int64)], dim=1))
    return torch.cat(rows).numpy().astype(np.uint8 if target.vocab_size <= 256 else np.int32)
