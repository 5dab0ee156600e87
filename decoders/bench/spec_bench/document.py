"""Spec-Bench's documents, typed, in a module without torch so the report, the printed table and the figure read them
(docs/measuring.md, "Spec-Bench"): the table (``SpecBenchTable``, ``decoders.bench.spec_bench.suite``): per category
(``SpecBenchCategory``) every draft's gamma sweep (``SpecBenchDraft``), the dynamic tree's row (``SpecBenchDynamic``)
and, where the table was forecast first, the category's forecast judged on it (``CategoryForecast``,
``CategoryJudgement``; the table's part, ``TableForecast``, says how and whether it was withheld); an engine's rows
beside ours (``EngineTable``); and the report's answer (``SpecBenchAnswer``, ``decoders.bench.spec_bench.recommend``).
``as_dict`` is the JSON edge and ``from_dict`` reads every committed vintage (forecasts made before the checks, tables
made before the forecast or the sweep's seconds). The prompts stay as recorded: {prompt room: [question, tokens,
cut]}."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.bench.rows import BenchRow, DynamicTreeRow, ForecastRow, TableRow
from decoders.engine_results import EngineBenchDocument
from decoders.results import ResultRow
from plumbing.outputs import without_provenance
from spectheory.cost_checks import CostChecks
from spectheory.costs import CostProfile

__all__ = [
    "SpecBenchDraft",
    "SpecBenchDynamic",
    "DraftForecast",
    "TreeForecast",
    "ForecastChoice",
    "JudgedSetting",
    "CategoryJudgement",
    "CategoryForecast",
    "SpecBenchCategory",
    "TableForecast",
    "EngineTable",
    "SpecBenchTable",
    "CategoryAnswer",
    "OneSetting",
    "SpecBenchAnswer",
    "SpecBenchReport",
]


def _typed(mapping: dict, kind) -> dict[str, ResultRow]:
    """{key: ``kind.from_dict(value)``} of a saved mapping."""
    return {key: kind.from_dict(value) for key, value in mapping.items()}


def _shown(mapping: dict) -> dict[str, dict]:
    """{key: ``value.as_dict()``}: the JSON edge of a typed mapping."""
    return {key: value.as_dict() for key, value in mapping.items()}


@dataclass(frozen=True, kw_only=True)
class SpecBenchDraft(ResultRow):
    """One draft's gamma sweep in one category: its prompt room and baseline seconds, c with both models' call seconds,
    the pooled alpha, a ``BenchRow`` per gamma (greedy equality per prompt, Theorem 3.8 beside), and the cost profile
    recorded from the sweep with each component's spread over the repeats (kept inside ``profile`` in the file)."""

    gammas: list
    prompt_room: int
    autoregressive_seconds: float
    c: float
    target_call_seconds: float
    draft_call_seconds: float
    alpha: float | None
    rows: tuple  # of BenchRow
    profile: CostProfile
    spread: dict  # {component: [min, median, max]}

    def profile_with_spread(self) -> dict:
        """The profile as the file holds it: ``CostProfile.as_dict`` with the spread inside."""
        return dict(self.profile.as_dict(), spread=self.spread)

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])
        del shown["spread"]
        return dict(shown, profile=self.profile_with_spread())

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchDraft:
        return cls(
            **dict(
                saved,
                rows=tuple(map(BenchRow.from_dict, saved["rows"])),
                profile=CostProfile.from_dict(saved["profile"]),
                spread=saved["profile"]["spread"],
            )
        )


@dataclass(frozen=True, kw_only=True)
class SpecBenchDynamic(ResultRow):
    """EAGLE-2's dynamic tree in one category, decoded with ``draft``: its shape (``DynamicTree.as_dict``), prompt
    room and its one ``DynamicTreeRow``."""

    draft: str
    tree: dict
    prompt_room: int
    rows: tuple  # of DynamicTreeRow, one

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchDynamic:
        return cls(**dict(saved, rows=tuple(map(DynamicTreeRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class DraftForecast(ResultRow):
    """One draft's forecast in one category: a ``ForecastRow`` per gamma, the prompts a +-10% interval needs and the
    alpha along the other questions."""

    speedups: tuple  # of ForecastRow
    prompts_needed: int | None
    alpha: float | None

    def as_dict(self) -> dict:
        return dict(super().as_dict(), speedups=[row.as_dict() for row in self.speedups])

    @classmethod
    def from_dict(cls, saved: dict) -> DraftForecast:
        return cls(**dict(saved, speedups=tuple(map(ForecastRow.from_dict, saved["speedups"]))))


@dataclass(frozen=True, kw_only=True)
class TreeForecast(ResultRow):
    """The dynamic tree's forecast in one category: tokens per target call from its untimed runs, its speedup with a
    jackknife standard error and stated interval, from the seconds per iteration timed on the cost question."""

    nodes: int
    tokens_per_call: float
    speedup: float
    standard_error: float | None
    interval: list | None = None  # None in forecasts made before intervals were stated
    seconds_per_iteration: float
    draft: str

    OPTIONAL = ("interval",)


@dataclass(frozen=True, kw_only=True)
class ForecastChoice(ResultRow):
    """The setting a category's forecast recommends (the largest forecast, "do not speculate" at 1x) and its speedup."""

    setting: str
    draft: str | None
    gamma: int | None
    speedup: float
    drafted: int | None = None  # tokens drafted per iteration; in the first forecasts' files only

    OPTIONAL = ("drafted",)


@dataclass(frozen=True, kw_only=True)
class JudgedSetting(ResultRow):
    """One setting's forecast held against the table: both speedups and their ratio, the measured 95% interval and
    whether the forecast lies inside it, and whether the measurement lies in the combined interval (``covered``,
    ``spectheory.intervals.covers``; None for the dynamic tree, which has no interval)."""

    setting: str
    draft: str
    gamma: int | None
    drafted: int
    forecast: float
    forecast_standard_error: float | None
    measured: float
    measured_interval: list | None
    forecast_over_measured: float
    inside_interval: bool | None
    covered: bool | None = None  # None in judgements made before it was asked, and for the tree

    OPTIONAL = ("covered",)


@dataclass(frozen=True, kw_only=True)
class CategoryJudgement(ResultRow):
    """A category's forecast beside its timed rows (``decoders.bench.spec_bench.forecast.judge_category``): a
    ``JudgedSetting`` per setting, the recommended setting's forecast and measured speedups, the best measured setting
    (no speculation at 1x included), the loss and whether it is within 5% and within the best's interval."""

    rows: tuple  # of JudgedSetting
    recommended: str
    recommended_forecast: float
    recommended_measured: float
    best_measured: str
    best_measured_speedup: float
    loss: float
    within_5_percent: bool
    within_best_interval: bool | None

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> CategoryJudgement:
        return cls(**dict(saved, rows=tuple(map(JudgedSetting.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class CategoryForecast(ResultRow):
    """One category's forecast (``decoders.bench.spec_bench.forecast.forecast_category``): the other questions per
    prompt room, the prefill ratio that scales the costs to them, each draft's ``DraftForecast``, the dynamic tree's,
    the recommended setting, its baseline seconds and its own seconds; ``judged`` on the table once timed (None in a
    withheld forecast, which is judged nowhere)."""

    questions: dict  # {prompt room: [question, tokens, cut]}
    prefill_ratio: dict  # {prompt room: ratio}
    drafts: dict  # name -> DraftForecast
    dynamic: TreeForecast | None
    recommended: ForecastChoice
    autoregressive_seconds: float
    seconds: float
    judged: CategoryJudgement | None = None

    OPTIONAL = ("judged",)

    def as_dict(self) -> dict:
        shown = dict(
            super().as_dict(),
            drafts=_shown(self.drafts),
            dynamic=None if self.dynamic is None else self.dynamic.as_dict(),
            recommended=self.recommended.as_dict(),
        )
        return shown if self.judged is None else dict(shown, judged=self.judged.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> CategoryForecast:
        dynamic, judged = saved.get("dynamic"), saved.get("judged")
        return cls(
            **dict(
                saved,
                drafts=_typed(saved["drafts"], DraftForecast),
                dynamic=None if dynamic is None else TreeForecast.from_dict(dynamic),
                recommended=ForecastChoice.from_dict(saved["recommended"]),
                judged=None if judged is None else CategoryJudgement.from_dict(judged),
            )
        )


@dataclass(frozen=True, kw_only=True)
class SpecBenchCategory(ResultRow):
    """One category of the table: its label, the prompts of each prompt room, each draft's ``SpecBenchDraft``, the
    dynamic tree's row (None without) and, where the table was forecast, the category's judged forecast."""

    label: str
    prompts: dict  # {prompt room: [question, tokens, cut]}
    drafts: dict  # name -> SpecBenchDraft
    dynamic: SpecBenchDynamic | None = None
    forecast: CategoryForecast | None = None

    OPTIONAL = ("dynamic", "forecast")

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), drafts=_shown(self.drafts))
        if self.dynamic is not None:
            shown["dynamic"] = self.dynamic.as_dict()
        if self.forecast is not None:
            shown["forecast"] = self.forecast.as_dict()
        return shown

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchCategory:
        dynamic, forecast = saved.get("dynamic"), saved.get("forecast")
        return cls(
            **dict(
                saved,
                drafts=_typed(saved["drafts"], SpecBenchDraft),
                dynamic=None if dynamic is None else SpecBenchDynamic.from_dict(dynamic),
                forecast=None if forecast is None else CategoryForecast.from_dict(forecast),
            )
        )


@dataclass(frozen=True, kw_only=True)
class TableForecast(ResultRow):
    """How the table was forecast (``decoders.bench.spec_bench.forecast.forecast_table``): other questions per
    category, the cost run's repeats and warm-up, each draft's cost checks and the line that withholds the forecast
    where one failed, the cost question per prompt room, the seconds of the costs and of the whole, and the profiles
    timed on the cost question. The categories' forecasts sit in the table's categories; a withheld one keeps them
    here, judged nowhere."""

    questions: int
    repeats: int
    warmup: int
    checks: dict | None = None  # name -> CostChecks; None in forecasts made before the checks
    withheld: str | None = None  # "" where shown; None before the checks
    cost_question: dict  # {prompt room: [question, tokens, cut]}
    cost_seconds: float
    profiles: dict  # name -> the cost run's profile, as SpecBenchDraft writes it
    categories: dict | None = None  # category -> CategoryForecast, in a withheld forecast only
    seconds: float

    OPTIONAL = ("checks", "withheld", "categories")

    def as_dict(self) -> dict:
        shown = super().as_dict()
        if self.checks is not None:
            shown["checks"] = _shown(self.checks)
        if self.categories is not None:
            shown["categories"] = _shown(self.categories)
        return shown

    @classmethod
    def from_dict(cls, saved: dict) -> TableForecast:
        checks, categories = saved.get("checks"), saved.get("categories")
        return cls(
            **dict(
                saved,
                checks=None if checks is None else _typed(checks, CostChecks),
                categories=None if categories is None else _typed(categories, CategoryForecast),
            )
        )


@dataclass(frozen=True, kw_only=True)
class EngineTable(ResultRow):
    """A serving engine's rows on the same categories (``decoders.jobs.spec_bench.engine_table``): per category its
    bench document (``EngineBenchDocument``) with the category's label and questions, and a ``TableRow`` per category
    at its best gamma."""

    task: str
    engine: str
    model: str
    prompt_room: int
    categories: dict  # category -> EngineBenchDocument, with the category's label and questions
    table: tuple  # of TableRow
    seconds: float | None = None  # None in an engine's own table (bench --engine E --task spec-bench)

    OPTIONAL = ("seconds",)

    def as_dict(self) -> dict:
        return dict(super().as_dict(), categories=_shown(self.categories), table=[row.as_dict() for row in self.table])

    @classmethod
    def from_dict(cls, saved: dict) -> EngineTable:
        return cls(
            **dict(
                without_provenance(saved),
                categories=_typed(saved["categories"], EngineBenchDocument),
                table=tuple(map(TableRow.from_dict, saved["table"])),
            )
        )


@dataclass(frozen=True, kw_only=True)
class SpecBenchTable(ResultRow):
    """Spec-Bench's table (``decoders.bench.spec_bench.suite.spec_bench_document``): the task, target, drafts and their
    gammas, the dynamic tree's shape and draft, where and how it was timed, its seconds and the sweep's, the forecast
    made first (None where none was), a ``SpecBenchCategory`` per category, an engine's rows (or why there are
    none), and where it was read from a file, that file's command and provenance."""

    task: str
    target: str
    drafts: dict  # name -> gammas
    dynamic: dict | None
    environment: dict
    settings: dict  # decoders.bench.bench.BenchSettings.as_dict
    batch_size: int
    seconds: float
    sweep_seconds: float | None = None  # None in tables timed before it was kept
    forecast: TableForecast | None = None
    categories: dict  # category -> SpecBenchCategory
    engine: EngineTable | None = None
    engine_skipped: str | None = None
    command: str | None = None  # a table read from its file (report --from): the file's command and provenance
    provenance: dict | None = None

    OPTIONAL = ("sweep_seconds", "forecast", "engine", "engine_skipped", "command", "provenance")

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), categories=_shown(self.categories))
        if self.forecast is not None:
            shown["forecast"] = self.forecast.as_dict()
        return shown if self.engine is None else dict(shown, engine=self.engine.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchTable:
        forecast, engine = saved.get("forecast"), saved.get("engine")
        return cls(
            **dict(
                saved,
                forecast=None if forecast is None else TableForecast.from_dict(forecast),
                categories=_typed(saved["categories"], SpecBenchCategory),
                engine=None if engine is None else EngineTable.from_dict(engine),
            )
        )


@dataclass(frozen=True, kw_only=True)
class CategoryAnswer(ResultRow):
    """One category's recommendation (``decoders.bench.spec_bench.recommend``): the setting, its draft and gamma, what
    predicted it (forecast or model) and its predicted and measured speedups, the best measured setting, their
    standard errors, their ratio and whether the two are told apart."""

    recommended: str
    draft: str | None
    gamma: int | None
    predicted_by: str
    predicted_speedup: float
    measured_speedup: float
    measured_standard_error: float | None
    best_measured: str
    best_measured_speedup: float
    best_measured_standard_error: float | None
    recommended_over_best: float
    within_noise_of_best: bool | None
    label: str


@dataclass(frozen=True, kw_only=True)
class OneSetting(ResultRow):
    """One setting for every category: the largest predicted overall speedup, its measured overall speedup against
    the per-category recommendations', the loss with its standard error, and whether the loss is within noise."""

    setting: str
    predicted_overall: float
    measured_overall: float
    per_category_measured_overall: float
    loss: float
    loss_standard_error: float | None
    loss_within_noise: bool | None


@dataclass(frozen=True, kw_only=True)
class SpecBenchAnswer(ResultRow):
    """The report's answer on Spec-Bench: a ``CategoryAnswer`` per category and ``OneSetting`` against them."""

    categories: dict  # category -> CategoryAnswer
    one_setting: OneSetting

    def as_dict(self) -> dict:
        return {"categories": _shown(self.categories), "one_setting": self.one_setting.as_dict()}

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchAnswer:
        return cls(
            categories=_typed(saved["categories"], CategoryAnswer),
            one_setting=OneSetting.from_dict(saved["one_setting"]),
        )


@dataclass(frozen=True, kw_only=True)
class SpecBenchReport:
    """``report --task spec-bench``'s document (report.json): the table and the answer."""

    table: SpecBenchTable
    recommendation: SpecBenchAnswer

    def as_dict(self) -> dict:
        return {"table": self.table.as_dict(), "recommendation": self.recommendation.as_dict()}

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchReport:
        return cls(
            table=SpecBenchTable.from_dict(saved["table"]),
            recommendation=SpecBenchAnswer.from_dict(saved["recommendation"]),
        )
