"""One run of Spec-Bench's table, made once from the flags and passed down whole (``SpecBenchRun``), and the models it
times, loaded once by ``decoders.bench.spec_bench.suite.spec_bench_document`` and passed whole to its timer and its
forecast (``TableModels``; docs/measuring.md, "Spec-Bench")."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.bench.bench import BenchSettings
from decoders.bench.spec_bench.questions import QUESTIONS_PER_CATEGORY
from plumbing.validation import as_int

__all__ = ["ALL", "SUITE_SETTINGS", "SpecBenchRun", "TableModels"]

ALL = "all"  # --draft all: the whole table
#: The time-boxed default: the whole SmolLM2 table within 30 minutes on 2 cores (docs/measuring.md).
SUITE_SETTINGS = BenchSettings(
    gammas=(2, 4, 6),
    temperatures=(0.0,),
    prompts=2,
    max_new_tokens=32,
    repeats=2,
    warmup=0,
    call_steps=32,
    batch_sizes=(),
)


@dataclass(frozen=True)
class SpecBenchRun:
    """One run of Spec-Bench's table (``bench --task spec-bench``, ``report --task spec-bench``, the figure), made once
    from the flags, checked here before any work and passed down whole: ``task``'s categories under ``settings`` (T = 0
    only), ``draft`` (``ALL``: every draft of ``suite_drafts``, the dynamic tree and the engine's rows) at ``gammas``
    (None: each draft's own), against ``target`` on ``device`` in ``dtype`` with ``compile``, forecast first from
    ``forecast_questions`` other questions per category (0: none)."""

    settings: BenchSettings = SUITE_SETTINGS
    task: str = "spec-bench"
    draft: str = ALL
    gammas: tuple | None = None
    target: str | None = None
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    compile: str = "auto"
    forecast_questions: int = 0
    progress: bool | None = None

    def __post_init__(self) -> None:
        if self.settings.temperatures != (0.0,):
            raise ValueError(
                f"temperatures {self.settings.temperatures}: Spec-Bench's table is greedy; give --temperatures 0"
            )
        high = QUESTIONS_PER_CATEGORY - self.settings.prompts
        as_int("forecast_questions", self.forecast_questions, low=0, high=high)


@dataclass(frozen=True)
class TableModels:
    """The target and its tokenizer, ``drafts`` {name: (model, gammas)}, and ``dynamic``: (draft name, its model,
    ``DynamicTree``) for EAGLE-2's dynamic tree, or None."""

    target: object
    tokenizer: object
    drafts: dict
    dynamic: tuple | None = None

    def only(self, names) -> TableModels:
        """The models of the drafts ``names`` (one prompt room's), the dynamic tree where its draft is among them."""
        drafts = {name: self.drafts[name] for name in names}
        return TableModels(
            self.target, self.tokenizer, drafts, self.dynamic if self.dynamic and self.dynamic[0] in drafts else None
        )
