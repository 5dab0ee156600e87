"""The device check's document, typed, in a module without torch (docs/gpu.md; ``decoders.bench.device_check``): per
section its seconds and its result (or why it was skipped, or the error it raised), each kind of result typed: the
exact cases (``decoders.audit.verdict.ExactReport``), greedy equality (``GreedyEquality``), the statistical cases
(``StatisticalCase``), a call table (``CallTable``), a profile's summary (``ProfileSummary``) and the compiled path's
numbers (``CompiledSection``). ``as_dict`` is the JSON edge, ``from_dict`` reads every committed check (the
section's name says its kind)."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.audit.verdict import ExactReport
from decoders.results import ResultRow
from spectheory.costs import CostProfile

__all__ = [
    "GreedyEquality",
    "StatisticalCase",
    "CallTable",
    "ProfileSummary",
    "PerTokenMs",
    "TimingChainRow",
    "CompiledSection",
    "SectionError",
    "Section",
    "DeviceCheckDocument",
]


@dataclass(frozen=True, kw_only=True)
class GreedyEquality(ResultRow):
    """One decoder's greedy tokens against autoregressive decoding's: equal, the first [row, position] that differs,
    and the share of wall time inside the models' calls."""

    equal: bool
    first_difference: list | None
    efficiency: float | None


@dataclass(frozen=True, kw_only=True)
class StatisticalCase(ResultRow):
    """One statistical audit on the device: its verdict, p-value, samples, the smallest total variation it detects
    and its seconds."""

    passed: bool
    p_value: float
    n: int
    detectable_tv: float
    seconds: float


@dataclass(frozen=True, kw_only=True)
class CallTable(ResultRow):
    """Seconds of one target call of a Llama shape at every batch and width: {batch: {width: [min, median, max]}}."""

    shape: dict  # decoders.bench.device_check.LlamaShape's fields
    parameters: int
    dtype: str
    seconds_per_call: dict


@dataclass(frozen=True, kw_only=True)
class ProfileSummary(ResultRow):
    """A profiled pair's file (a `spectheory profile` document beside the check) and its main costs."""

    file: str
    t_step: float
    t_draft: float
    t_iteration: float
    c: float | None
    t_verify: list


@dataclass(frozen=True, kw_only=True)
class PerTokenMs(ResultRow):
    """ms per new token, greedy, batch 1, each [min, median, max]: eager, compiled and transformers' ``generate`` with
    a static cache, and the compiled path's median ratio to it."""

    eager: list
    compiled: list
    transformers_static_generate: list
    compiled_over_anchor: float


@dataclass(frozen=True, kw_only=True)
class TimingChainRow(ResultRow):
    """The compiled chain under timing-only acceptance at one alpha and gamma: ms per token of it and of the
    autoregressive decoder, the measured speedup and the cost profile's (None past its gammas)."""

    alpha: float
    gamma: int
    ms_per_token: list
    autoregressive_ms_per_token: list
    measured_speedup: float
    predicted_speedup: float | None


@dataclass(frozen=True, kw_only=True)
class CompiledSection(ResultRow):
    """The compiled path's section (``decoders.bench.compiled_check``): its sizes and dtype, ms per token per shape,
    the compiled pairs' cost profiles ("target+draft") and the timing-only chain."""

    sizes: dict
    dtype: str
    per_token_ms: dict  # shape -> PerTokenMs
    profiles: dict  # "target+draft" -> CostProfile
    timing_chain: tuple  # of TimingChainRow

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            per_token_ms={name: row.as_dict() for name, row in self.per_token_ms.items()},
            profiles={pair: profile.as_dict() for pair, profile in self.profiles.items()},
            timing_chain=[row.as_dict() for row in self.timing_chain],
        )

    @classmethod
    def from_dict(cls, saved: dict) -> CompiledSection:
        return cls(
            **dict(
                saved,
                per_token_ms={name: PerTokenMs.from_dict(row) for name, row in saved["per_token_ms"].items()},
                profiles={pair: CostProfile.from_dict(profile) for pair, profile in saved["profiles"].items()},
                timing_chain=tuple(map(TimingChainRow.from_dict, saved["timing_chain"])),
            )
        )


@dataclass(frozen=True, kw_only=True)
class SectionError(ResultRow):
    """A section that raised: the error and the last frames of its traceback (a finding: the others still ran)."""

    error: str
    traceback: str


def _cases(kind):
    """The reader and writer of {name: ``kind``}."""
    return (
        lambda saved: {name: kind.from_dict(case) for name, case in saved.items()},
        lambda cases: {name: case.as_dict() for name, case in cases.items()},
    )


def _groups(kind):
    """The reader and writer of {group: {name: ``kind``}}."""
    read, write = _cases(kind)
    return (
        lambda saved: {group: read(cases) for group, cases in saved.items()},
        lambda groups: {group: write(cases) for group, cases in groups.items()},
    )


def _one(kind):
    return kind.from_dict, kind.as_dict


#: A section's result by the first word of its name: (read a saved one, write one).
RESULTS = {
    "exact": _cases(ExactReport),
    "greedy": _groups(GreedyEquality),
    "statistical": _cases(StatisticalCase),
    "calls": _one(CallTable),
    "profile": _one(ProfileSummary),
    "compiled": _one(CompiledSection),
}


@dataclass(frozen=True, kw_only=True)
class Section(ResultRow):
    """One section of the check: its seconds and result (of the kind its ``name`` says; a ``SectionError`` where it
    raised), or why it was skipped."""

    name: str
    seconds: float | None = None
    result: object = None
    skipped: str | None = None

    OPTIONAL = ("seconds", "result", "skipped")

    @property
    def failed(self) -> bool:
        return isinstance(self.result, SectionError)

    def as_dict(self) -> dict:
        shown = {key: value for key, value in super().as_dict().items() if key != "name"}
        if self.result is not None:
            write = SectionError.as_dict if self.failed else RESULTS[self.name.split()[0]][1]
            shown["result"] = write(self.result)
        return shown

    @classmethod
    def from_dict(cls, name: str, saved: dict) -> Section:
        result = saved.get("result")
        if result is not None:
            read = SectionError.from_dict if "error" in result else RESULTS[name.split()[0]][0]
            result = read(result)
        return cls(name=name, **dict(saved, result=result))


@dataclass(frozen=True, kw_only=True)
class DeviceCheckDocument(ResultRow):
    """The device check (``decoders.bench.device_check.run_check``): where it ran, its sizes and time budget, each
    ``Section`` in the order it ran, and the seconds since it started (absent before a section ended)."""

    kind: str
    environment: dict
    sizes: dict
    budget_seconds: float
    sections: tuple = ()  # of Section
    elapsed_seconds: float | None = None

    OPTIONAL = ("elapsed_seconds",)

    def section(self, name: str) -> Section:
        return next(section for section in self.sections if section.name == name)

    def as_dict(self) -> dict:
        return dict(super().as_dict(), sections={section.name: section.as_dict() for section in self.sections})

    @classmethod
    def from_dict(cls, saved: dict) -> DeviceCheckDocument:
        sections = tuple(Section.from_dict(name, section) for name, section in saved["sections"].items())
        return cls(**dict(saved, sections=sections))
