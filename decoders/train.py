"""Training TinyGPT language models on the stdlib corpus: seeded, resumable, with a progress bar.

``train_language_model`` runs AdamW with linear warm-up and cosine decay on random windows of the
training stream, evaluates the held-out loss (nats per character) every ``eval_every`` steps and, given
a checkpoint path, saves there and resumes from it. Checkpoints hold tensors and plain values only and
are read with ``torch.load(weights_only=True)``: no arbitrary unpickling.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from decoders.corpus import Corpus
from decoders.models.base import check_positive_integers
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig

__all__ = ["TrainConfig", "TrainResult", "train_language_model", "held_out_loss", "load_checkpoint"]


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
        check_positive_integers(self, ("steps", "batch_size", "context", "eval_every", "eval_batches"))
        if self.context > self.model.max_context:
            raise ValueError(f"context must be at most the model's max_context {self.model.max_context}, "
                             f"got {self.context}")
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


def _windows(stream: np.ndarray, count: int, context: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` random windows of ``context + 1`` tokens: ``[count, context + 1]`` int64."""
    starts = torch.randint(0, len(stream) - context - 1, (count,), generator=generator)
    index = starts[:, None] + torch.arange(context + 1)
    return torch.from_numpy(stream.astype(np.int64))[index]


def _learning_rate(config: TrainConfig, step: int) -> float:
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.learning_rate * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def _loss(model: TinyGPT, windows: torch.Tensor) -> torch.Tensor:
    windows = windows.to(model.device)
    logits = model.training_logits(windows[:, :-1])  # [B, C, V]
    return F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten())


@torch.no_grad()
def held_out_loss(model: TinyGPT, stream: np.ndarray, context: int, batches: int, batch_size: int,
                  seed: int = 1234) -> float:
    """Mean cross-entropy in nats per character on fixed random windows of ``stream``."""
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    losses = [float(_loss(model, _windows(stream, batch_size, context, generator))) for _ in range(batches)]
    return sum(losses) / len(losses)


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> tuple[TinyGPT, dict]:
    """A TinyGPT and the checkpoint's other entries (config, step, ...) from ``path``."""
    state = torch.load(path, map_location=device, weights_only=True)
    model = TinyGPT(TinyGPTConfig(**state["model_config"])).to(device)
    model.load_state_dict(state["model"])
    return model.eval(), state


def train_language_model(config: TrainConfig, corpus: Corpus, *, checkpoint: Path | None = None,
                         device: torch.device | str = "cpu", progress: bool | None = None,
                         until: int | None = None) -> tuple[TinyGPT, TrainResult]:
    """Train (or resume, when ``checkpoint`` exists with the same configuration) a TinyGPT on ``corpus``;
    ``until`` stops after that many steps in all, so that long training can be spread over several runs."""
    if len(corpus.train) < config.context + 2 or len(corpus.held_out) < config.context + 2:
        raise ValueError(f"the corpus splits must be longer than context + 1 = {config.context + 1} characters")
    model = TinyGPT(config.model).initialize(torch.Generator().manual_seed(config.seed)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(config.seed + 1)  # the training windows
    step, train_losses, held_out = 0, [], []
    if checkpoint is not None and Path(checkpoint).exists():
        state = torch.load(checkpoint, map_location=device, weights_only=True)
        if state["train_config"] != config.as_dict():
            raise ValueError(f"checkpoint {checkpoint} was trained with another configuration")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        step, train_losses, held_out = state["step"], list(map(tuple, state["train_losses"])), \
            list(map(tuple, state["held_out_losses"]))
    started, running = time.perf_counter(), []
    with tqdm(total=config.steps, initial=step, desc="train", unit="step", delay=1, leave=False,
              disable=None if progress is None else not progress) as bar:
        while step < min(config.steps, until or config.steps):
            model.train()
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(config, step)
            loss = _loss(model, _windows(corpus.train, config.batch_size, config.context, generator))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running.append(loss.item())
            step += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps or step == until:
                train_losses.append((step, sum(running) / len(running)))
                held_out.append((step, held_out_loss(model, corpus.held_out, config.context, config.eval_batches,
                                                     config.batch_size)))
                bar.set_postfix(train=f"{train_losses[-1][1]:.3f}", held_out=f"{held_out[-1][1]:.3f}")
                running = []
                if checkpoint is not None:
                    _save(checkpoint, model, optimizer, generator, config, step, train_losses, held_out)
    return model.eval(), TrainResult(step, time.perf_counter() - started, tuple(train_losses), tuple(held_out))


def _save(path, model, optimizer, generator, config, step, train_losses, held_out) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".partial")
    torch.save({"model": model.state_dict(), "model_config": config.model.as_dict(), "optimizer": optimizer.state_dict(),
                "generator": generator.get_state(), "train_config": config.as_dict(), "step": step,
                "train_losses": [list(entry) for entry in train_losses],
                "held_out_losses": [list(entry) for entry in held_out]}, temporary)
    temporary.replace(path)  # a crash never leaves half a checkpoint
