"""A serving engine's bench documents, typed, in a module without torch and below the engines' floor, so Spec-Bench's
table and the figures read them without opening an engine (docs/engines.md, "Bench"; ``decoders.engines.bench``): a
gamma's row (``EngineBenchRow``), the forecast made first from other prompts (``EngineForecast``), the whole bench of
one engine (``EngineBenchDocument``) and two servers by URL (``ServerBench``); and an engine's audits
(docs/engines.md §3): greedy with speculation against plain (``EngineGreedyAudit``), two samples
(``EngineTwoSampleAudit``) and the engine's samples against our model of its file (``EngineModelAudit``), each with the
samples drawn where the command wrote them beside. ``as_dict`` is the JSON edge,
``from_dict`` reads every committed vintage (keys added since the first benches read as None and stay out of the file
where unset)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from decoders.results import ResultRow
from plumbing.outputs import without_provenance
from spectheory.cost_checks import CostChecks
from spectheory.recommendation import Recommendation

__all__ = [
    "EngineBenchRow",
    "EngineForecast",
    "PlainRuns",
    "PeerRate",
    "EngineBenchDocument",
    "ServerBench",
    "Diagnosis",
    "GreedyCheck",
    "WrongProbability",
    "ProbabilityCheck",
    "ProbabilitiesCheck",
    "BatchShape",
    "EngineGreedyAudit",
    "EngineTwoSampleAudit",
    "EngineModelAudit",
    "SAMPLE_KEYS",
]

#: The keys of an audit's samples, written beside its verdict in the file (``--out``) and left out of ``--json``.
SAMPLE_KEYS = ("rows", "rows_a", "rows_b")


@dataclass(frozen=True, kw_only=True)
class EngineBenchRow(ResultRow):
    """One gamma of ``bench --engine`` (module docstring): the engine's decode speedup over its plain decoding
    (seconds per token after the first; medians over repeats), its spread and 95% interval, the model's prediction
    at the run's own counters and costs (a diagnostic), the forecast's from other prompts where one was made, and the
    engine's counters of the run. Fields added since the first benches are None in older files; the forecast's are
    absent from a row without a forecast."""

    gamma: int
    speedup: float
    speedup_spread: list  # [min, median, max] over repeats
    speedup_interval: list | None = None  # 95% bootstrap over repeats and prompts
    prompts_for_3_percent: int | None = None
    predicted_speedup: float
    predicted_over_measured: float
    forecast_speedup: float | None = None
    forecast_standard_error: float | None = None  # the jackknife's over the forecast's prompts
    forecast_over_measured: float | None = None
    forecast_tokens_per_iteration: float | None = None
    forecast_inside_interval: bool | None = None
    forecast_interval: list | None = None
    forecast_covered: bool | None = None
    tokens_per_iteration: float
    mean_proposal_length: float
    alpha: float | None
    alpha_standard_error: float | None
    acceptance_rate: float | None = None
    seconds_per_iteration_predicted: float
    counters: dict  # the engine's own, over the run
    greedy_equal_to_plain: bool | None  # None when sampled (T > 0)
    decode_seconds: list  # per repeat
    tokens_per_second: float

    OPTIONAL: ClassVar[tuple] = (
        "forecast_speedup",
        "forecast_standard_error",
        "forecast_over_measured",
        "forecast_tokens_per_iteration",
        "forecast_inside_interval",
        "forecast_interval",
        "forecast_covered",
    )


@dataclass(frozen=True, kw_only=True)
class EngineForecast(ResultRow):
    """The forecast's measurements on other prompts (``decoders.engines.bench._forecast``): how many and their
    tokens, the passes counted, the cost timings (one beside each gamma's runs), the engine's call costs, each gamma's
    counters summed and per prompt, its seconds, and the checks of its costs with the line that withholds it."""

    prompts: int
    prompt_tokens: list
    passes: int | None = None
    cost_timings: int | None = None
    costs: dict
    counters: dict  # gamma -> the engine's counters over the prompts
    by_prompt: dict | None = None  # gamma -> [counters per prompt]
    seconds: float
    checks: CostChecks | None = None  # None before the checks were made (and while they are)
    withheld: str | None = None

    OPTIONAL: ClassVar[tuple] = ("passes", "cost_timings", "by_prompt", "checks", "withheld")

    def as_dict(self) -> dict:
        shown = super().as_dict()
        return shown if self.checks is None else dict(shown, checks=self.checks.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> EngineForecast:
        checks, by_prompt = saved.get("checks"), saved.get("by_prompt")
        return cls(
            **dict(
                saved,
                counters={int(gamma): counters for gamma, counters in saved["counters"].items()},
                by_prompt=None if by_prompt is None else {int(gamma): runs for gamma, runs in by_prompt.items()},
                checks=None if checks is None else CostChecks.from_dict(checks),
            )
        )


@dataclass(frozen=True, kw_only=True)
class PlainRuns(ResultRow):
    """The engine's plain decoding: tokens per second after the first token, and each repeat's decode and prefill
    seconds."""

    tokens_per_second: float
    decode_seconds: list
    prefill_seconds: list


@dataclass(frozen=True, kw_only=True)
class PeerRate(ResultRow):
    """Another engine's plain decoding of the same prompts in the same repeats: tokens per second, [min, median,
    max]."""

    tokens_per_second: float
    spread: list


_ADDED = (
    "engine_settings",
    "engine_version",
    "repeated_prompts",
    "plain_step_model_over_measured",
    "plain_step_model_spread",
    "recommendation",
    "forecast_gamma",
    "forecast",
    "peers",
    "sweep_seconds",
    "task",
    "cpu",
    "ours_tokens_per_second",
    "label",
    "questions",
)


@dataclass(frozen=True, kw_only=True)
class EngineBenchDocument(ResultRow):
    """`spectheory bench --engine`'s document (``decoders.engines.bench.engine_bench``): the engine, model, threads,
    settings and version, how it was timed, the call costs with the plain runs' t_step and the model's plain step
    over it, the plain runs, an ``EngineBenchRow`` per gamma, the recommendation, the forecast's pick and the forecast,
    the host, the peers' plain rates and the sweep's seconds; the command adds its task, the CPU and our reference
    decoder's rate, and Spec-Bench's table the category's label and questions."""

    engine: str
    model: str
    threads: int | None
    engine_settings: dict | None = None
    engine_version: str | None = None
    temperature: float
    batch_size: int
    dtype: str
    device: str
    repeats: int
    warmup: int
    prompts: int
    prompt_tokens: list
    repeated_prompts: bool | None = None
    max_new_tokens: int
    costs: dict  # the engine's call costs (medians over repeats), t_step and t_plain beside
    plain_step_model_over_measured: float | None = None
    plain_step_model_spread: list | None = None
    plain: PlainRuns
    rows: tuple  # of EngineBenchRow
    recommended_gamma: int
    recommendation: Recommendation | None = None
    forecast_gamma: int | None = None
    environment: dict
    forecast: EngineForecast | None = None
    peers: dict | None = None  # name -> PeerRate
    sweep_seconds: float | None = None
    task: str | None = None
    cpu: str | None = None
    ours_tokens_per_second: float | None = None
    label: str | None = None
    questions: list | None = None

    OPTIONAL: ClassVar[tuple] = _ADDED

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), plain=self.plain.as_dict(), rows=[row.as_dict() for row in self.rows])
        for name, part in (("recommendation", self.recommendation), ("forecast", self.forecast)):
            if part is not None:
                shown[name] = part.as_dict()
        if self.peers is not None:
            shown["peers"] = {name: peer.as_dict() for name, peer in self.peers.items()}
        return shown

    @classmethod
    def from_dict(cls, saved: dict) -> EngineBenchDocument:
        chosen, forecast, peers = saved.get("recommendation"), saved.get("forecast"), saved.get("peers")
        return cls(
            **dict(
                saved,
                plain=PlainRuns.from_dict(saved["plain"]),
                rows=tuple(map(EngineBenchRow.from_dict, saved["rows"])),
                recommendation=None if chosen is None else Recommendation.from_dict(chosen),
                forecast=None if forecast is None else EngineForecast.from_dict(forecast),
                peers=None if peers is None else {name: PeerRate.from_dict(peer) for name, peer in peers.items()},
            )
        )


@dataclass(frozen=True, kw_only=True)
class ServerBench(ResultRow):
    """Two servers of one model by URL, one speculating and one not (``decoders.engines.bench.server_bench``): seconds
    per generated token of each per repeat, end to end, their ratio's median and spread, and whether the greedy texts
    are equal; the command adds its task."""

    engine: str
    against: str
    temperature: float
    batch_size: int
    repeats: int
    warmup: int
    prompts: int
    max_new_tokens: int
    seconds_per_token: dict  # "plain", "speculating" -> [per repeat]
    speedup: float
    speedup_spread: list
    greedy_equal: bool
    environment: dict
    task: str | None = None

    OPTIONAL: ClassVar[tuple] = ("task",)


@dataclass(frozen=True, kw_only=True)
class Diagnosis(ResultRow):
    """Why greedy decoding with speculation left plain greedy decoding at ``position``
    (``decoders.audit.engines.greedy.diagnose_difference``): both tokens, the plain token's logit margin in a one-token
    and a two-token call, and the verdict (batch-shape numerics, or a bug)."""

    position: int
    plain_token: int
    speculative_token: int
    margin_one_token: float
    margin_two_tokens: float
    verdict: str


@dataclass(frozen=True, kw_only=True)
class GreedyCheck(ResultRow):
    """At one gamma: the engine's greedy tokens with speculation equal its plain ones; if not, the first
    difference and, where the engine gives logits, its ``Diagnosis``; the engine's counters of the run."""

    gamma: int
    tokens: int
    equal: bool
    first_difference: int | None
    counters: dict
    diagnosis: Diagnosis | None = None

    def as_dict(self) -> dict:
        return dict(super().as_dict(), diagnosis=None if self.diagnosis is None else self.diagnosis.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> GreedyCheck:
        why = saved.get("diagnosis")
        return cls(**dict(saved, diagnosis=None if why is None else Diagnosis.from_dict(why)))


@dataclass(frozen=True, kw_only=True)
class WrongProbability(ResultRow):
    """The first position where a path with speculation reports another log-probability or top list than plain
    decoding: the token, both log-probabilities and both top lists ([id, log-probability])."""

    position: int
    token: int
    plain_logprob: float
    reported_logprob: float
    plain_top: list
    reported_top: list


@dataclass(frozen=True, kw_only=True)
class ProbabilityCheck(ResultRow):
    """One gamma's reported probabilities against plain decoding's: the positions compared, how many and which
    differ, and the first (``WrongProbability``; None where none does)."""

    gamma: int
    compared: int
    wrong: int
    wrong_positions: list
    first_wrong: WrongProbability | None

    def as_dict(self) -> dict:
        first = self.first_wrong
        return dict(super().as_dict(), first_wrong=None if first is None else first.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> ProbabilityCheck:
        first = saved.get("first_wrong")
        return cls(**dict(saved, first_wrong=None if first is None else WrongProbability.from_dict(first)))


@dataclass(frozen=True, kw_only=True)
class ProbabilitiesCheck(ResultRow):
    """The engine's reported probabilities of its greedy tokens with speculation against without
    (``decoders.audit.engines.greedy.probabilities_check``): the top entries compared, the tolerance in nats, a
    ``ProbabilityCheck`` per gamma and the verdict."""

    top: int
    tolerance: float
    checks: tuple  # of ProbabilityCheck
    passed: bool

    def as_dict(self) -> dict:
        return dict(super().as_dict(), checks=[check.as_dict() for check in self.checks])

    @classmethod
    def from_dict(cls, saved: dict) -> ProbabilitiesCheck:
        return cls(**dict(saved, checks=tuple(map(ProbabilityCheck.from_dict, saved["checks"]))))


@dataclass(frozen=True, kw_only=True)
class BatchShape(ResultRow):
    """The engine's logits one token per call against ``chunk`` per call
    (``decoders.audit.engines.greedy.batch_shape_difference``): the positions, the total variation of the two laws at
    T = 1 per position with its median and max, and the largest logit difference per position."""

    chunk: int
    positions: int
    tv_at_t1: list
    tv_median: float
    tv_max: float
    max_logit_difference: list


@dataclass(frozen=True, kw_only=True)
class EngineGreedyAudit(ResultRow):
    """`spectheory audit --engine E --temperature 0` (``decoders.audit.engines.greedy.greedy_audit``): the engine,
    horizon and prompt (its ids where the engine tokenizes), the plain greedy tokens, a ``GreedyCheck`` per gamma,
    how many differences batch-shape numerics explain, the verdict, and where the engine gives them its batch-shape
    numerics and its reported probabilities."""

    engine: str
    horizon: int
    prompt: str
    prompt_ids: list | None
    plain: list
    checks: tuple  # of GreedyCheck
    explained_by_numerics: int
    passed: bool
    batch_shape: BatchShape | None = None
    probabilities: ProbabilitiesCheck | None = None

    OPTIONAL: ClassVar[tuple] = ("batch_shape", "probabilities")

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), checks=[check.as_dict() for check in self.checks])
        for name in self.OPTIONAL:
            if getattr(self, name) is not None:
                shown[name] = getattr(self, name).as_dict()
        return shown

    @classmethod
    def from_dict(cls, saved: dict) -> EngineGreedyAudit:
        shape, probabilities = saved.get("batch_shape"), saved.get("probabilities")
        return cls(
            **dict(
                without_provenance(saved),
                checks=tuple(map(GreedyCheck.from_dict, saved["checks"])),
                batch_shape=None if shape is None else BatchShape.from_dict(shape),
                probabilities=None if probabilities is None else ProbabilitiesCheck.from_dict(probabilities),
            )
        )


_TWO_SAMPLE_ADDED = (
    "battery",
    "seconds",
    "counters",
    "samples_per_second",
    "throughput_ratio",
    "recomputed",
    "prompt",
    "prompt_tokens",
    "setting",
    "request_fields",
    "speculate",
    "engine_settings",
    "engine_version",
    "rows_a",
    "rows_b",
)


@dataclass(frozen=True, kw_only=True)
class EngineTwoSampleAudit(ResultRow):
    """An engine's samples with speculation against a second sample by the two-sample test
    (``decoders.audit.engines.sampled.two_sample_document``): the test's verdict (``decoders.audit.two_sample``'s
    fields, its battery's outcomes as they were written), both sides described, the sampling, the samples lost, each
    side's seconds, counters and rate and their ratio, the engine's version; the rows of both samples where the
    command wrote them beside. Fields added since the first audits read as None and stay out of the file where unset;
    the vLLM scripts (results/vllm) recorded their prompt, setting, request fields and speculation beside."""

    test: str
    n_a: int
    n_b: int
    horizon: int
    level: float
    token_p: list
    prefix_p: list
    prefix_cells: list
    p_value: float
    detectable_tv: float
    passed: bool
    battery: list | None = None  # decoders.audit.battery.BatteryOutcome.as_dict of each test
    a: str
    b: str
    sampling: str
    lost: list
    seconds: list | None = None
    counters: list | None = None
    samples_per_second: list | None = None
    throughput_ratio: float | None = None
    recomputed: dict | None = None
    prompt: str | None = None
    prompt_tokens: int | None = None
    setting: str | None = None
    request_fields: dict | None = None
    speculate: int | None = None
    engine_settings: dict | None = None
    engine_version: str | None = None
    rows_a: list | None = None
    rows_b: list | None = None

    OPTIONAL: ClassVar[tuple] = _TWO_SAMPLE_ADDED

    @classmethod
    def from_dict(cls, saved: dict) -> EngineTwoSampleAudit:
        return cls(**without_provenance(saved))


@dataclass(frozen=True, kw_only=True)
class EngineModelAudit(ResultRow):
    """An engine's samples against our model of its GGUF file (``decoders.audit.engines.model.against_model``): the
    total variation the numeric difference alone makes per position, the statistical audit's report, its verdict
    and power, the engine side described and the sampling; the rows where the command wrote them beside."""

    numeric_tv: list
    audit: dict  # decoders.audit.statistical.AuditReport.as_dict
    passed: bool
    detectable_tv: float | None
    engine: str | None = None
    sampling: str | None = None
    rows: list | None = None

    OPTIONAL: ClassVar[tuple] = ("engine", "sampling", "rows")

    @classmethod
    def from_dict(cls, saved: dict) -> EngineModelAudit:
        return cls(**without_provenance(saved))
