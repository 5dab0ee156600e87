"""The audits' statistical tests as one registry (docs/extending.md, "An audit test"). Each test is one
``register_audit_test(AuditTest(...))``: its battery (``STATISTICAL``: samples against the target's law,
``decoders.audit.statistical``; ``TWO_SAMPLE``: two samplers against each other, ``decoders.audit.two_sample``),
``run(evidence, ordering)`` returning its outcome (its statistic and the p-values it adds to the battery's
Bonferroni combination: its multiplicity share is how many), and its power statement (``power``, and
``detectable(evidence, tests)``, the deviation it detects with 90% power once the battery's test count is known).
A battery runs its tests in registration order; the reports' p-values, test counts and printed lines are built
from the list of outcomes, so a new test needs no other edit."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from plumbing.registry import register

__all__ = [
    "STATISTICAL",
    "TWO_SAMPLE",
    "BatteryOutcome",
    "AuditTest",
    "AUDIT_TESTS",
    "register_audit_test",
    "battery_tests",
    "run_battery",
    "bonferroni",
    "power_line",
]

STATISTICAL, TWO_SAMPLE = "statistical", "two-sample"


@dataclass(frozen=True)
class BatteryOutcome:
    """One test's result: ``name`` (the test's, with its ordering for a per-ordering test), ``statistic``,
    ``p_values`` (each counted once by the battery's Bonferroni combination), ``detectable`` (the deviation detected
    with 90% power, None without a statement), ``power`` (what ``detectable`` measures) and ``details`` (what the
    report shows of it besides)."""

    name: str
    statistic: float
    p_values: tuple
    detectable: float | None = None
    power: str = ""
    details: dict = field(default_factory=dict)

    @property
    def share(self) -> int:
        """Its share of the battery's Bonferroni count."""
        return len(self.p_values)

    @property
    def p_value(self) -> float:
        """Its own p-value: Bonferroni over its p-values."""
        return min(1.0, self.share * min(self.p_values))

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "share": self.share,
            "detectable": self.detectable,
            "power": self.power,
        }


@dataclass(frozen=True)
class AuditTest:
    """A registered test. ``run(evidence, ordering) -> BatteryOutcome`` (``ordering`` None unless ``per_ordering``: then
    it runs once per token ordering the evidence has, named ``{name}_{ordering}``); ``applies(evidence)``: whether it
    runs at all (pairs need two positions); ``detectable(evidence, tests)``: its power at the battery's ``tests``
    (None: no statement), described by ``power``."""

    name: str
    battery: str
    run: Callable[[object, str | None], BatteryOutcome]
    description: str
    power: str = ""
    detectable: Callable[[object, int], float | None] = lambda evidence, tests: None
    per_ordering: bool = False
    applies: Callable[[object], bool] = lambda evidence: True


#: Every registered test by name, in the order the batteries run them.
AUDIT_TESTS: dict[str, AuditTest] = {}


def register_audit_test(test: AuditTest) -> AuditTest:
    """Adds ``test`` (a name already registered is a ValueError); returns it."""
    if test.battery not in (STATISTICAL, TWO_SAMPLE):
        raise ValueError(f"battery must be {STATISTICAL!r} or {TWO_SAMPLE!r}, got {test.battery!r}")
    return register(AUDIT_TESTS, test, "audit test")


def battery_tests(battery: str) -> tuple:
    return tuple(test for test in AUDIT_TESTS.values() if test.battery == battery)


def run_battery(battery: str, evidence, orderings: tuple = ()) -> tuple:
    """Every test of ``battery`` that applies to ``evidence``: the per-ordering ones under each of ``orderings`` in
    turn, then the others; each outcome with its power at the battery's total count."""
    tests = [test for test in battery_tests(battery) if test.applies(evidence)]
    runs = [(test, order) for order in orderings for test in tests if test.per_ordering] + [
        (test, None) for test in tests if not test.per_ordering
    ]
    outcomes = [
        (
            test,
            replace(
                test.run(evidence, order), name=test.name if order is None else f"{test.name}_{order}", power=test.power
            ),
        )
        for test, order in runs
    ]
    count = sum(outcome.share for _, outcome in outcomes)
    return tuple(replace(outcome, detectable=test.detectable(evidence, count)) for test, outcome in outcomes)


def bonferroni(outcomes) -> tuple[float, int]:
    """(Bonferroni's combined p-value, the number of p-values it is over)."""
    count = sum(outcome.share for outcome in outcomes)
    return min(1.0, count * min(p for outcome in outcomes for p in outcome.p_values)), count


def power_line(outcomes) -> str:
    """ "a per-position TV of 0.0123, ...": each test's power statement once (the first of its orderings)."""
    stated = {}
    for outcome in outcomes:
        if outcome.detectable is not None:
            stated.setdefault(outcome.power, outcome.detectable)
    return ", ".join(f"{power} of {value:.4f}" for power, value in stated.items())
