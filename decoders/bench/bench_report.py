"""What the bench measured for one pair (``decoders.bench.bench.bench_pair``), typed, in a module without torch so
the report's document and the figures read it (docs/measuring.md, "The bench's rows"): ``as_dict`` is the JSON
edge, ``from_dict`` reads a committed bench (a report's ``bench``, or the bench command's document, whose own keys
beside it it sets aside)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from decoders.bench.rows import BenchRow
from decoders.results import by_temperature
from spectheory.optimum import best_choice

__all__ = ["BenchReport"]

_BY_TEMPERATURE = ("autoregressive_seconds", "alpha", "profiles", "autoregressive")


@dataclass(frozen=True, kw_only=True)
class BenchReport:
    """What ``bench_pair`` measured; ``rows`` hold one ``BenchRow`` per (temperature, gamma), dicts in ``as_dict``.
    Maps by temperature are keyed by float."""

    environment: dict
    settings: dict
    target: str
    draft: str
    c: float
    target_call_seconds: float
    draft_call_seconds: float
    autoregressive_seconds: dict  # temperature -> median seconds for the whole prompt set
    alpha: dict  # temperature -> pooled alpha from acceptance counts
    rows: tuple = ()
    profiles: dict = field(default_factory=dict)  # temperature -> the cost profile measured beside the rows
    autoregressive: dict = field(default_factory=dict)  # temperature -> seconds per token, over a call, efficiency

    def rows_at(self, temperature: float) -> list:
        """The rows at ``temperature``, in the sweep's order of gamma."""
        return [row for row in self.rows if row.temperature == temperature]

    def best(self, temperature: float) -> BenchRow:
        """The row with the largest measured speedup at ``temperature`` (ties: the smallest gamma)."""
        return best_choice(self.rows_at(temperature), lambda row: row.speedup, lambda row: row.gamma)

    def as_dict(self) -> dict:
        return dict(
            asdict(self),
            rows=[row.as_dict() for row in self.rows],
            best={str(t): self.best(t).as_dict() for t in self.autoregressive_seconds},
        )

    @classmethod
    def from_dict(cls, saved: dict) -> BenchReport:
        own = {f.name for f in fields(cls)} - {"rows", *_BY_TEMPERATURE}
        return cls(
            **{key: value for key, value in saved.items() if key in own},
            **{key: by_temperature(saved[key]) for key in _BY_TEMPERATURE if key in saved},
            rows=tuple(map(BenchRow.from_dict, saved["rows"])),
        )
