"""What `spectheory bench --engine ... --concurrency` writes (docs/engines-load.md): per concurrency the plain
and speculative servers' goodput, time per output token and acceptance, the goodput speedup with its spread, the
forecast made before them, and the answer. No torch here: the documents are read back without a model."""

from __future__ import annotations

from dataclasses import dataclass, fields

from decoders.results import ResultRow
from spectheory.goodput import GoodputChoice, ServerCosts, crossover_batch

__all__ = ["SpeculativeRun", "LoadForecast", "ConcurrencyRow", "LoadBenchDocument", "crossover", "KIND"]

KIND = "engine_load_bench"  # a load bench document's ``kind``


@dataclass(frozen=True, kw_only=True)
class SpeculativeRun(ResultRow):
    """One speculative run of the forecast's questions as the cost fit reads it: its concurrency, each request's
    rounds, the tokens drafted a round and its wall seconds."""

    concurrency: int
    rounds: tuple
    drafted_per_round: float
    seconds: float


@dataclass(frozen=True)
class LoadForecast:
    """The forecast, made before the bench from other questions (``prompt_tokens`` long) alone: what was measured on
    them (each request's seconds to its first token at concurrency 1, ``first_seconds``; the plain runs' wall seconds
    at each concurrency, ``plain_seconds``; the speculative run beside each), the costs fitted to it
    (``spectheory.goodput.fit_server_costs``) and, per concurrency, the goodput speedup and the plain server's goodput
    it forecasts for the bench's requests (their prompts' lengths, the other questions' rounds at concurrency 1) with
    its 95% interval over sets of as many questions; ``seconds`` it took."""

    prompt_tokens: tuple
    first_seconds: tuple
    plain_seconds: dict  # {concurrency: wall seconds}
    speculative: tuple  # SpeculativeRun, the smallest concurrency first
    costs: ServerCosts
    speedups: dict  # {concurrency: forecast goodput speedup}
    plain_goodput: dict  # {concurrency: forecast plain tokens per second}
    seconds: float
    intervals: dict  # {concurrency: [low, high]}, 95% over sets of as many questions (fixed_count_interval)

    @property
    def rounds(self) -> tuple:
        """Each other question's rounds at the smallest concurrency: what the bench's requests are forecast to take."""
        return self.speculative[0].rounds

    @property
    def drafted_per_round(self) -> float:
        return self.speculative[0].drafted_per_round

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": list(self.prompt_tokens),
            "first_seconds": list(self.first_seconds),
            "plain_seconds": {str(c): s for c, s in sorted(self.plain_seconds.items())},
            "speculative": [run.as_dict() for run in self.speculative],
            "costs": self.costs.as_dict(),
            "speedups": {str(c): s for c, s in sorted(self.speedups.items())},
            "plain_goodput": {str(c): s for c, s in sorted(self.plain_goodput.items())},
            "seconds": self.seconds,
            "intervals": {str(c): list(i) for c, i in sorted(self.intervals.items())},
        }

    @classmethod
    def from_dict(cls, data: dict) -> "LoadForecast":
        return cls(
            tuple(data["prompt_tokens"]),
            tuple(data["first_seconds"]),
            {int(c): s for c, s in data["plain_seconds"].items()},
            tuple(SpeculativeRun.from_dict(run) for run in data["speculative"]),
            ServerCosts.from_dict(data["costs"]),
            {int(c): s for c, s in data["speedups"].items()},
            {int(c): s for c, s in data["plain_goodput"].items()},
            data["seconds"],
            {int(c): tuple(i) for c, i in data["intervals"].items()},
        )


@dataclass(frozen=True, kw_only=True)
class ConcurrencyRow(ResultRow):
    """One concurrency, measured over repeats (plain and speculative alternated): each server's goodput (tokens per
    second over all requests) per repeat, their ratio's median and [min, median, max], each request's time per output
    token pooled over repeats (median and p90), the speculative server's acceptance (accepted over drafted; per
    position where the engine counts it), its iterations where it counts them and each request's rounds; the
    forecast's speedup and interval beside, and the forecast's costs at these requests' own rounds (``model_speedup``,
    a diagnostic: what of the forecast's miss is its costs', not the other questions' acceptance)."""

    concurrency: int
    plain_goodput: tuple
    speculative_goodput: tuple
    speedup: float
    speedup_spread: tuple
    plain_tpot: tuple  # (median, p90) seconds
    speculative_tpot: tuple
    acceptance_rate: float | None
    acceptance_per_position: tuple | None
    tokens_per_round: float
    plain_iterations: int | None
    speculative_iterations: int | None
    rounds: tuple  # each request's rounds in the first speculative repeat
    model_speedup: float | None = None  # the forecast's costs at these requests' own rounds: a diagnostic
    forecast_speedup: float | None = None
    forecast_interval: tuple | None = None

    @property
    def forecast_over_measured(self) -> float | None:
        return None if self.forecast_speedup is None else self.forecast_speedup / self.speedup

    @property
    def inside_forecast_interval(self) -> bool | None:
        """Whether the measured speedup lies in the forecast's 95% interval."""
        if self.forecast_interval is None:
            return None
        return self.forecast_interval[0] <= self.speedup <= self.forecast_interval[1]

    def as_dict(self) -> dict:
        derived = {"forecast_over_measured": self.forecast_over_measured}
        return dict(super().as_dict(), **derived, inside_forecast_interval=self.inside_forecast_interval)

    @classmethod
    def from_dict(cls, data: dict) -> "ConcurrencyRow":
        derived = ("forecast_over_measured", "inside_forecast_interval")
        return cls(**{key: value for key, value in data.items() if key not in derived})


def crossover(speedups: dict) -> int | None:
    """The smallest concurrency from which on speculation does not pay (speedup below 1 there and at every larger
    one), None where it pays at the largest (``spectheory.goodput.crossover_batch`` on {concurrency: speedup})."""
    return crossover_batch([GoodputChoice(c, int(s >= 1), s) for c, s in sorted(speedups.items())])


@dataclass(frozen=True)
class LoadBenchDocument:
    """`spectheory bench --engine SPEC --concurrency ...`: the engine, its settings, the requests (Spec-Bench
    questions, ``requests`` of them at each concurrency, ``max_new_tokens`` each, greedy), gamma, repeats, the
    forecast and the rows; the answer is ``answer_lines``' and the schedule in the engines' words ``schedule``."""

    engine: str
    model: str
    engine_settings: dict
    engine_version: str | None
    gamma: int
    requests: int
    prompt_tokens: tuple
    max_new_tokens: int
    repeats: int
    warmup: int
    rows: tuple
    forecast: LoadForecast | None
    schedule: dict
    environment: dict
    seconds: float
    task: str = "spec-bench"
    temperature: float = 0.0
    device: str = "cpu"
    dtype: str | None = None

    @property
    def measured_crossover(self) -> int | None:
        return crossover({row.concurrency: row.speedup for row in self.rows})

    @property
    def forecast_crossover(self) -> int | None:
        return None if self.forecast is None else crossover(self.forecast.speedups)

    def as_dict(self) -> dict:
        saved = {field.name: getattr(self, field.name) for field in fields(self)}
        return dict(
            saved,
            kind=KIND,
            batch_size=[row.concurrency for row in self.rows],  # the benchmarks' common key: the concurrencies
            rows=[row.as_dict() for row in self.rows],
            forecast=None if self.forecast is None else self.forecast.as_dict(),
            measured_crossover=self.measured_crossover,
            forecast_crossover=self.forecast_crossover,
        )

    @classmethod
    def from_dict(cls, data: dict) -> "LoadBenchDocument":
        saved = {field.name: data[field.name] for field in fields(cls) if field.name in data}
        forecast = data["forecast"]
        return cls(
            **dict(
                saved,
                rows=tuple(ConcurrencyRow.from_dict(row) for row in data["rows"]),
                forecast=None if forecast is None else LoadForecast.from_dict(forecast),
            )
        )
