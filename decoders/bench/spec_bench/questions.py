"""Spec-Bench's questions as benchmark prompts (docs/measuring.md, "Spec-Bench"; the file and its Apache-2.0
license ship in ``data/spec_bench/``).

Spec-Bench groups its 480 questions in six categories and reports each one apart: MT-bench's eight
sub-categories count as one, "multi-turn conversation". Like Spec-Bench's speed table we take the first turn
only, through the tokenizer's chat template with the assistant's turn opened (plain "User:"/"Assistant:" text
for a model without one), and a fixed seeded subset of K questions per category. A prompt longer than the
context leaves room for is cut from the front, so the question at its end survives; the prompts record how
many tokens each lost.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from decoders.models.corpus import encode_text
from plumbing.validation import as_int

__all__ = [
    "TASK",
    "CATEGORIES",
    "LABELS",
    "QUESTIONS",
    "SpecBenchPrompt",
    "PromptRows",
    "spec_bench_categories",
    "is_spec_bench",
    "load_questions",
    "select_questions",
    "spec_bench_prompts",
    "mixed_prompts",
]

TASK = "spec-bench"
QUESTIONS = Path(__file__).parent / "data" / "question.jsonl"
#: The six categories in the order of Spec-Bench's table, with the file's category names in each.
CATEGORIES = {
    "mt_bench": ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"),
    "translation": ("translation",),
    "summarization": ("summarization",),
    "qa": ("qa",),
    "math_reasoning": ("math_reasoning",),
    "rag": ("rag",),
}
#: The column headings of Spec-Bench's table.
LABELS = {
    "mt_bench": "Multi-turn Conversation",
    "translation": "Translation",
    "summarization": "Summarization",
    "qa": "Question Answering",
    "math_reasoning": "Mathematical Reasoning",
    "rag": "Retrieval-aug. Generation",
}
QUESTIONS_PER_CATEGORY = 80


def is_spec_bench(task: str | None) -> bool:
    """Whether ``task`` names Spec-Bench (``spec-bench`` or ``spec-bench:CATEGORY,...``)."""
    return task is not None and (task == TASK or task.startswith(TASK + ":"))


def spec_bench_categories(task: str) -> tuple[str, ...]:
    """The categories ``task`` asks for, in the table's order: all six for ``spec-bench``, the listed ones for
    ``spec-bench:qa,rag``; a ValueError names an unknown one."""
    if not is_spec_bench(task):
        raise ValueError(f"task must be {TASK} or {TASK}:CATEGORY,..., got {task!r}")
    if task == TASK:
        return tuple(CATEGORIES)
    asked = [name.strip() for name in task.partition(":")[2].split(",")]
    unknown = [name for name in asked if name not in CATEGORIES]
    if unknown or not asked:
        raise ValueError(
            f"--task {task!r}: Spec-Bench's categories are {', '.join(CATEGORIES)}, got {', '.join(unknown) or 'none'}"
        )
    return tuple(name for name in CATEGORIES if name in asked)


@functools.lru_cache(maxsize=1)
def load_questions(path: Path = QUESTIONS) -> tuple:
    """Every question of the file, in its order, as dictionaries."""
    with open(path, encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines if line.strip())


def select_questions(category: str, count: int, seed: int) -> list:
    """``count`` of ``category``'s questions, a seeded subset in question order (all 80 for count 80)."""
    as_int("prompts per category", count, low=1, high=QUESTIONS_PER_CATEGORY)
    pool = [question for question in load_questions() if question["category"] in CATEGORIES[category]]
    chosen = np.random.default_rng([seed, list(CATEGORIES).index(category)]).choice(
        len(pool), size=count, replace=False
    )
    return [pool[i] for i in sorted(chosen.tolist())]


def _framed(question: str, tokenizer) -> str:
    """The first turn as the model sees it, up to the opened assistant turn."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if template:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
    return f"User: {question}\nAssistant:"


@dataclass(frozen=True)
class SpecBenchPrompt:
    """One question's prompt: its category, id, token ids, and the tokens cut from its front (0: whole)."""

    category: str
    question_id: int
    tokens: tuple
    cut: int

    def as_dict(self) -> dict:
        return {"category": self.category, "question_id": self.question_id, "tokens": len(self.tokens), "cut": self.cut}


def spec_bench_prompts(tokenizer, category: str, count: int, seed: int, max_tokens: int) -> list:
    """``count`` prompts of ``category`` (``select_questions``) in ``tokenizer``'s ids (None: the corpus's
    characters), each at most ``max_tokens`` long, cut from the front where longer."""
    as_int("max_tokens", max_tokens, low=1)
    prompts = []
    for question in select_questions(category, count, seed):
        ids = encode_text(tokenizer, _framed(question["turns"][0], tokenizer))
        cut = max(len(ids) - max_tokens, 0)
        prompts.append(SpecBenchPrompt(category, question["question_id"], tuple(ids[cut:]), cut))
    return prompts


def mixed_prompts(tokenizer, count: int, seed: int, max_tokens: int) -> tuple[list, list]:
    """Two disjoint sets of ``count`` prompts each drawn across the six categories in turn (a server's mixed load):
    the bench's and the forecast's. Each category gives twice its share (``select_questions``), alternately to
    one and the other, so that no question is in both."""
    as_int("requests", count, low=1, high=QUESTIONS_PER_CATEGORY * len(CATEGORIES) // 2)
    share = -(-count // len(CATEGORIES))
    drawn = {category: spec_bench_prompts(tokenizer, category, 2 * share, seed, max_tokens) for category in CATEGORIES}
    turns = [(drawn[category][2 * i], drawn[category][2 * i + 1]) for i in range(share) for category in CATEGORIES]
    return [pair[0] for pair in turns[:count]], [pair[1] for pair in turns[:count]]


class PromptRows(list):
    """Prompts of different lengths where the benchmark takes ``[N, L]`` tensors: a list of token lists that
    the decoders take as a batch, with a row as a tensor ``[L]`` (``rows[i]``), a slice of one row as a tensor
    ``[1, L]`` (of more, as ``PromptRows``), ``tolist``, and ``to(device)``, which only records the device the
    decoders run on (``device``; they move the ids)."""

    device = torch.device("cpu")

    def __getitem__(self, index):
        if isinstance(index, slice):
            rows = list.__getitem__(self, index)  # a plain list of plain lists
            return torch.tensor(rows, dtype=torch.int64) if len(rows) == 1 else PromptRows(rows)
        return torch.tensor(list.__getitem__(self, index), dtype=torch.int64)

    def tolist(self) -> list:
        return [list(row) for row in self]

    def to(self, device) -> "PromptRows":
        rows = PromptRows(self)
        rows.device = torch.device(device)
        return rows
