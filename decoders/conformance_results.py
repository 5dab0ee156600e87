"""The conformance battery's document (`spectheory conformance`, docs/conformance.md): a verdict per row, typed, a
dict only at the JSON edge."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.results import ResultRow

__all__ = ["KIND", "PASS", "FAIL", "REFUSED", "NOT_OFFERED", "RowVerdict", "ConformanceDocument"]

KIND = "engine_conformance"
#: A row's verdicts: the engine refused the row's request under speculation (``check_sampling``), or lacks what the
#: row reads (a capability): either is listed as such, never as a pass.
PASS, FAIL, REFUSED, NOT_OFFERED = "PASS", "FAIL", "REFUSED", "NOT OFFERED"


@dataclass(frozen=True, kw_only=True)
class RowVerdict(ResultRow):
    """One row's verdict: its ``name`` and ``kind``, the ``test`` that decided, the samples or prompts it took
    (``n``), its p-value and the deviation it detects with 90% power where it is statistical, the engine's own
    counters of the speculating runs, one line of ``details``, and its seconds."""

    name: str
    kind: str
    sent: str
    test: str
    verdict: str
    n: int = 0
    p_value: float | None = None
    detectable: float | None = None
    counters: dict
    details: str
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ConformanceDocument(ResultRow):
    """`spectheory conformance --engine E` (docs/conformance.md): the engine (and the plain server where it speculates
    by its own settings), its version and settings, a ``RowVerdict`` per row, its seconds and machine."""

    engine: str
    against: str | None
    engine_version: str | None
    engine_settings: dict
    rows: tuple  # of RowVerdict
    level: float
    seconds: float
    environment: dict
    kind: str = KIND

    @property
    def failed(self) -> tuple:
        return tuple(row.name for row in self.rows if row.verdict == FAIL)

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> ConformanceDocument:
        return cls(**dict(saved, rows=tuple(map(RowVerdict.from_dict, saved["rows"]))))
