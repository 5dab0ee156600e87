"""Every prompt a benchmark, a forecast or a report decodes is drawn here (docs/measuring.md): seeded windows of the
held-out token ids (``text_windows``), or real prompts from a task (docs/theory.md §11), and a sweep's prompts with
the forecast's others in one call (``draw_prompts``). Each prompt is exactly ``length`` tokens so that a batch of them
is one ``[count, length]`` tensor. The two tasks are built from held-out Python source:

* ``completion``: the model is asked for Python code and its answer already holds a window of held-out
  source; it goes on writing that code.
* ``rewrite``: input-grounded, where copying pays: the user's message holds a window of held-out source that
  starts at a ``def`` and asks for the same code back with type hints; the answer repeats most of the
  prompt (prompt lookup's home ground).

Both go through the tokenizer's chat template where it has one (SmolLM2's ChatML), else plain text around
the code. The window is cut in tokens to fill the prompt to ``length``, so its last line may be cut short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from decoders.bench.inputs import encode_text

__all__ = [
    "TASKS",
    "FORECAST_SEED",
    "Prompts",
    "draw_prompts",
    "text_windows",
    "task_prompts",
    "benchmark_prompts",
    "other_prompts",
]

TASKS = ("completion", "rewrite")
_INSTRUCTIONS = {
    "completion": "Write the next part of this Python module.",
    "rewrite": "Add type hints to this Python code. Repeat all of the code:\n```python\n",
}
_ANSWER_START = {"completion": "```python\n", "rewrite": "```python\n"}
_DEFINITION = re.compile(r"^[ \t]*def ", re.MULTILINE)
MIN_WINDOW_TOKENS = 16
FORECAST_SEED = 2  # the forecast's prompts: seed + 2 (a bench's are seed, the report's sweep's seed + 1)


def _frame(task: str, tokenizer) -> tuple[list, list, list]:
    """The prompt's ids before the code (the user's turn, and for completion the answer's start too), the
    ids after it (rewrite: the closing fence, the answer's start), and nothing else."""
    marker = "\x00CODE\x00"
    if task == "completion":
        user, answer = _INSTRUCTIONS[task], _ANSWER_START[task] + marker
    else:
        user, answer = _INSTRUCTIONS[task] + marker + "\n```", _ANSWER_START[task]
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if template:
        text = (
            tokenizer.apply_chat_template(
                [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
            )
            + answer
        )
    else:
        text = f"# Task: {user}\n# Answer:\n{answer}"
    before, _, after = text.partition(marker)
    return encode_text(tokenizer, before), encode_text(tokenizer, after)


def _starts(text: str, task: str, count: int, seed: int) -> list:
    """Character offsets of the windows: seeded, and for rewrite at the start of a ``def`` line."""
    generator = np.random.default_rng(seed)
    if task == "rewrite":
        candidates = np.array([match.start() for match in _DEFINITION.finditer(text)])
        if len(candidates) < count:
            raise ValueError(
                f"the held-out text has {len(candidates)} function definitions, fewer than the "
                f"{count} rewrite prompts asked for"
            )
        return sorted(generator.choice(candidates, size=count, replace=False).tolist())
    lines = np.array([0] + [match.end() for match in re.finditer("\n", text)][:-1])
    return sorted(generator.choice(lines, size=min(count, len(lines)), replace=False).tolist())


def task_prompts(task: str, tokenizer, text: str, count: int, length: int, seed: int) -> torch.Tensor:
    """``count`` prompts ``[count, length]`` of ``task`` on ``text`` (held-out source), in ``tokenizer``'s ids
    (None: the corpus's characters)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    before, after = _frame(task, tokenizer)
    room = length - len(before) - len(after)
    if room < MIN_WINDOW_TOKENS:
        raise ValueError(
            f"prompt_length {length} leaves {room} tokens for the code after the {task} task's "
            f"{len(before) + len(after)} tokens of framing: give at least "
            f"{len(before) + len(after) + MIN_WINDOW_TOKENS}"
        )
    prompts = []
    for start in _starts(text, task, count, seed):
        window = encode_text(tokenizer, text[start : start + 8 * room])[:room]  # tokens are shorter than 8 characters
        if len(window) < room:
            raise ValueError(f"the held-out text is too short for {task} prompts of {length} tokens")
        prompts.append(before + window + after)
    return torch.tensor(prompts, dtype=torch.int64)


def benchmark_prompts(inputs, task: str | None, count: int, length: int, seed: int) -> torch.Tensor:
    """A benchmark's prompts ``[count, length]``: seeded windows of the held-out ids (``task`` None), or the task's
    prompts built from the held-out text (``decoders.bench.inputs.Inputs``)."""
    if task is not None and task not in TASKS:
        raise ValueError(
            f"--task {task}: only the plain bench (no --tree, --policies, --hf or --engine) runs "
            f"Spec-Bench's questions yet; the other commands take {', '.join(TASKS)}"
        )
    if task is None:
        return text_windows(inputs.held_out, count, length, seed)
    return task_prompts(task, inputs.tokenizer, inputs.held_out_text(), count, length, seed)


def text_windows(stream: np.ndarray, count: int, length: int, seed: int) -> torch.Tensor:
    """``count`` seeded windows ``[count, length]`` int64 of a token stream (the same for every draft)."""
    if length > len(stream):
        raise ValueError(
            f"the held-out text has {len(stream)} tokens, fewer than a window of {length}: give longer "
            f"text or shorter windows"
        )
    starts = np.random.default_rng(seed).integers(0, len(stream) - length + 1, size=count)
    return torch.from_numpy(np.stack([stream[s : s + length] for s in starts]).astype(np.int64))


def other_prompts(draw, count: int, sweep) -> torch.Tensor:
    """``count`` prompts ``[count, L]`` for a forecast that none of the ``sweep``'s prompts (rows of ids) are: the
    first of ``draw(count + len(sweep))`` (prompts of the forecast's seed) that are not the sweep's."""
    seen = set(map(tuple, sweep.tolist() if isinstance(sweep, torch.Tensor) else sweep))
    pool = draw(count + len(seen))
    kept = [row for row in pool.tolist() if tuple(row) not in seen][:count]
    if len(kept) < count:
        raise ValueError(f"forecast_prompts {count}: only {len(kept)} prompts other than the sweep's could be drawn")
    return torch.tensor(kept, dtype=pool.dtype)


@dataclass(frozen=True)
class Prompts:
    """A sweep's prompts and its forecast's, none of them the sweep's (docs/forecasts.md)."""

    sweep: torch.Tensor  # [P, L] token ids
    forecast: torch.Tensor | None = None  # [F, L] token ids; None where no forecast is made


def draw_prompts(
    inputs, task: str | None, shape: tuple, *, seed: int, forecast: int = 0, sweep_offset: int = 0
) -> Prompts:
    """A sweep's prompts of ``shape`` ``(count, length)`` (``benchmark_prompts`` at ``seed + sweep_offset``; the
    report's sweep is at offset 1) and ``forecast`` others of the same length for its forecast, drawn at ``seed +
    FORECAST_SEED`` and none of them the sweep's (``other_prompts``; none where ``forecast`` is 0)."""
    count, length = shape
    sweep = benchmark_prompts(inputs, task, count, length, seed + sweep_offset)
    if not forecast:
        return Prompts(sweep)
    draw = lambda n: benchmark_prompts(inputs, task, n, length, seed + FORECAST_SEED)  # noqa: E731
    return Prompts(sweep, other_prompts(draw, forecast, sweep))
