"""What one ``spectheory report`` measures, made once by the command from its flags and passed down whole
(docs/measuring.md): the budget (``ReportSettings``, with the shipped pair's full one and a real model's) and the run
(``ReportRun``: the models by name, the text, the device, the compile mode, where the files go), each checked when it
is made, before a model loads."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.audit.runs import SHIPPED_PROMPT
from decoders.audit.statistical import MAX_SAMPLES
from decoders.bench import alpha
from decoders.bench.bench import BenchSettings
from decoders.bench.forecast.sweep import FORECAST_COST_PROMPTS, FORECAST_REPEATS
from decoders.bench.policy_bench import check_policies
from decoders.bench.prompts import TASKS
from decoders.bench.tree_bench import check_budgets
from plumbing.validation import as_int, as_non_negative_int, positive_int_fields
from spectheory.calculator import MAX_TABLE_GAMMA

__all__ = ["ReportSettings", "ReportRun", "FULL_SETTINGS", "REAL_MODEL_SETTINGS"]


@dataclass(frozen=True)
class ReportSettings:
    """The budget of a report. The defaults are the main job's, a few minutes on a 2-core CPU (the forecast, a
    sweep of six gammas over 64 tokens that checks it, the audit, the figures); ``FULL_SETTINGS`` adds every gamma
    to 8, 128 tokens, trees and policies (docs/measuring.md gives both times)."""

    temperatures: tuple = BenchSettings.temperatures
    windows: int = 16  # held-out windows of 256 tokens (at most the context) for alpha along text
    gammas: tuple = (1, 2, 3, 4, 6, 8)
    prompts: int = 4  # held-out prompts for the benchmark, decoded one at a time
    prompt_length: int = BenchSettings.prompt_length
    max_new_tokens: int = 64
    repeats: int = BenchSettings.repeats
    warmup: int = BenchSettings.warmup
    audit_n: int = 2000
    audit_horizon: int = 4
    audit_prompt: str = SHIPPED_PROMPT
    gamma_max: int = 16
    seed: int = 0
    task: str | None = None  # None: the prompts are windows of the held-out text; else a task of decoders.bench.prompts
    tree_budgets: tuple = ()  # tree against chain at these node budgets (none: skipped)
    policies: tuple = ()  # draft-length policies against the best fixed gamma (none: skipped)
    forecast_prompts: int = 8  # other prompts for the forecast's acceptance, run before the sweep
    forecast_cost_prompts: int = FORECAST_COST_PROMPTS  # the first of them, timed for its cost profile
    forecast_repeats: int = FORECAST_REPEATS  # the cost profile's timed repeats (after one warm-up)

    def __post_init__(self) -> None:
        self.bench_settings()  # gammas, temperatures, prompts, lengths, repeats, warm-up
        if self.task is not None and self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        positive_int_fields(self, ("audit_horizon", "forecast_repeats"))
        as_int("forecast_prompts", self.forecast_prompts, low=1, high=1024)
        as_int("forecast_cost_prompts", self.forecast_cost_prompts, low=1, high=self.forecast_prompts)
        as_int("gamma_max", self.gamma_max, low=1, high=MAX_TABLE_GAMMA)
        alpha.check_windows(self.windows)
        as_int("audit_n", self.audit_n, low=2, high=MAX_SAMPLES)
        as_non_negative_int("seed", self.seed)
        if not self.audit_prompt:
            raise ValueError("audit_prompt must be non-empty text")
        if self.tree_budgets:
            check_budgets(self.tree_budgets)
        check_policies(self.policies)

    def bench_settings(self) -> BenchSettings:
        """The benchmark's settings."""
        return BenchSettings(
            tuple(self.gammas),
            tuple(self.temperatures),
            self.prompts,
            self.prompt_length,
            self.max_new_tokens,
            self.repeats,
            self.warmup,
            seed=self.seed,
        )


#: ``spectheory report --full``: the shipped pair at the bench's gammas and length, with trees and policies.
FULL_SETTINGS = ReportSettings(
    windows=32,
    gammas=BenchSettings.gammas,
    max_new_tokens=BenchSettings.max_new_tokens,
    audit_n=4000,
    tree_budgets=(4, 8, 16),
    policies=("confidence", "draft-p-min", "heuristic", "moving-average"),
)
#: The default budget for a real model (``zoo.REAL_MODELS`` or a GGUF file), smaller than the shipped pair's: a real
#: model's token costs tens of milliseconds on a CPU (docs/measuring.md gives the report's time). Its benchmark prompts
#: are the rewrite task.
REAL_MODEL_SETTINGS = ReportSettings(
    windows=16,
    gammas=(1, 2, 3, 4, 6, 8),
    prompts=2,
    prompt_length=192,
    max_new_tokens=48,
    repeats=2,
    warmup=1,
    audit_n=2000,
    task="rewrite",
    tree_budgets=(8,),
    policies=(),
)


@dataclass(frozen=True)
class ReportRun:
    """One report on a pair (the shipped one where ``target`` is None) or, with ``cross_vocabulary`` methods, on a
    draft of another tokenizer with the same-tokenizer drafts ``beside`` it (docs/theory-vocabularies.md §15)."""

    settings: ReportSettings = ReportSettings()
    target: str | None = None  # a model name, GGUF file or directory; None: the shipped pair
    draft: str = "transformer"
    text: str | None = None  # the held-out text's file; None: the shipped corpus's held-out split
    device: str = "cpu"
    compile: str = "auto"  # decoders.models.compiled.COMPILE
    out: str = "report"  # the output directory
    command: str = ""  # the command line, as report.json records it
    cross_vocabulary: tuple = ()  # methods of spectheory.vocabularies.METHODS
    beside: tuple = ()  # drafts of the target's tokenizer measured beside them

    def __post_init__(self) -> None:
        # its methods are checked where they are run (decoders.bench.cross_bench), the flags by the command
        if self.cross_vocabulary and self.target is None:
            raise ValueError(
                "--cross-vocabulary needs --target: a real model, GGUF file or directory with its own tokenizer"
            )
