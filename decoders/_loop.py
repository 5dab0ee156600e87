"""What every generation loop shares: prompt checks and prefill, output bookkeeping, phase timing."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch
from spectheory.validation import as_int, as_positive_int

__all__ = ["as_prompts", "prefill", "park", "Output", "PhaseTimer", "check_models", "check_room", "synchronize"]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def as_prompts(prompts, vocab_size: int, eos: int | None = None) -> list[list[int]]:
    """Prompts as lists of token ids: an integer ``[B, L]`` tensor or a list of non-empty sequences of
    integers (a float id is refused, never truncated); ``eos``, when given, must be a token id too."""
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() != 2 or prompts.is_floating_point() or prompts.dtype == torch.bool:
            raise ValueError(f"a prompt tensor must be integer with shape (batch, length), got "
                             f"{prompts.dtype} {tuple(prompts.shape)}")
        prompts = prompts.tolist()
    prompts = [prompt.tolist() if isinstance(prompt, torch.Tensor) else list(prompt) for prompt in prompts]
    if not prompts or any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("prompts must be a non-empty batch of non-empty token sequences")
    if any(isinstance(token, bool) or not isinstance(token, (int, np.integer)) or not 0 <= token < vocab_size
           for prompt in prompts for token in prompt):
        raise ValueError(f"prompt tokens must be integers in [0, {vocab_size})")
    if eos is not None:
        as_int("eos", eos, low=0, high=vocab_size - 1)
    return [[int(token) for token in prompt] for prompt in prompts]


def check_models(target, draft=None) -> None:
    if draft is not None and draft.vocab_size != target.vocab_size:
        raise ValueError(f"draft and target vocabularies differ: draft has {draft.vocab_size} tokens, "
                         f"target {target.vocab_size}")


def check_room(model, prompts: list[list[int]], extra: int, what: str) -> None:
    """A clear error when a prompt plus the tokens to come cannot fit the model's context."""
    if model.max_context is None:
        return
    longest = max(len(prompt) for prompt in prompts)
    if longest + extra > model.max_context:
        raise ValueError(f"prompt length {longest} plus {what} ({extra}) exceeds the model's context of "
                         f"{model.max_context} tokens")


def prefill(model, prompts: list[list[int]], held: int = 1, room: int | None = None):
    """A new state holding each prompt but its last ``held`` tokens (at most the whole prompt but one), with
    space for ``room`` more tokens after the longest prompt (None: the model's whole context)."""
    state = model.new_state(len(prompts), None if room is None else max(len(prompt) for prompt in prompts) + room)
    counts = torch.tensor([len(prompt) - held for prompt in prompts], device=model.device).clamp(min=0)
    width = int(counts.max())
    if width > 0:
        tokens = torch.zeros(len(prompts), width, dtype=torch.int64, device=model.device)
        for b, prompt in enumerate(prompts):
            body = prompt[:max(len(prompt) - held, 0)]
            tokens[b, :len(body)] = torch.tensor(body, dtype=torch.int64)
        getattr(model, "append", model.forward)(tokens, state, counts)  # no logits are read: skip the head
    return state


def park(model, state, done: torch.Tensor) -> None:
    """Cut rows that have finished (``done: [B]`` bool) back to empty before a step: their work is discarded,
    so they never outgrow the room their state was made with."""
    model.truncate(state, torch.where(done, 0, state.lengths))


class Output:
    """Per-row generated tokens with end-of-sequence and ``max_new_tokens``."""

    def __init__(self, batch: int, max_new_tokens: int, eos: int | None) -> None:
        as_positive_int("max_new_tokens", max_new_tokens)
        self.rows = [[] for _ in range(batch)]
        self.done = [False] * batch
        self.max_new_tokens, self.eos = max_new_tokens, eos

    def extend(self, b: int, tokens: list[int]) -> None:
        """Append row b's new tokens, stopping at end-of-sequence or at max_new_tokens."""
        if self.done[b]:
            return
        for token in tokens:
            self.rows[b].append(token)
            if token == self.eos or len(self.rows[b]) >= self.max_new_tokens:
                self.done[b] = True
                return

    @property
    def finished(self) -> bool:
        return all(self.done)


#: The methods of a model that run it (a forward pass): what ``PhaseTimer.watch`` times.
MODEL_CALLS = ("forward", "append", "head_logits", "forward_tree")


class _Watched:
    """A model whose calls (``MODEL_CALLS``) add their seconds to a ``PhaseTimer``'s "model" entry; every other
    attribute is the model's own."""

    def __init__(self, model, timer: "PhaseTimer") -> None:
        self._model = model
        for name in MODEL_CALLS:  # bound once: a call costs the timing alone
            if hasattr(model, name):
                setattr(self, name, timer.timed(getattr(model, name)))

    def __getattr__(self, name: str):
        return getattr(self._model, name)


class PhaseTimer:
    """Wall time per phase; with ``profile`` each phase is bracketed by CUDA synchronisations, and the models
    handed to ``watch`` record the seconds inside their calls as "model" (docs/theory.md §9, efficiency)."""

    def __init__(self, device: torch.device, profile: bool) -> None:
        self.cuda = device.type == "cuda"
        self.profile = profile
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()

    def _sync(self) -> None:
        if self.cuda:
            synchronize(torch.device("cuda"))

    @contextmanager
    def phase(self, name: str):
        if not self.profile:
            yield
            return
        self._sync()
        start = time.perf_counter()
        yield
        self._sync()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def watch(self, model):
        """The model, timed call by call when profiling (the model itself otherwise: no cost)."""
        return _Watched(model, self) if self.profile else model

    def timed(self, call):
        """``call`` with its seconds, between synchronisations, added to the "model" entry."""
        def run(*args, **kwargs):
            self._sync()
            start = time.perf_counter()
            result = call(*args, **kwargs)
            self._sync()
            self.seconds["model"] += time.perf_counter() - start
            return result
        self.seconds.setdefault("model", 0.0)
        return run

    def finish(self) -> dict:
        self._sync()
        return dict(self.seconds, total=time.perf_counter() - self._start)
