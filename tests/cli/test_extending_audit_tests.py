"""An audit test registered from a test file, without editing the package (docs/extending.md, "An audit test"):
after one ``register_audit_test``, `spectheory audit` runs it in the statistical battery, counts its share in the
Bonferroni combination, prints it and reports it; the reference decoder passes it and a planted bug fails it."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from cli import main
from decoders.audit.battery import AUDIT_TESTS, STATISTICAL, AuditTest, BatteryOutcome, register_audit_test


def _mean_pit(evidence, order: str) -> BatteryOutcome:
    """The mean of every PIT value under ``order`` is 1/2 with variance 1 / (12 n T) under the target: a z-test."""
    u = evidence.u[order]
    z = (float(np.mean(u)) - 0.5) / math.sqrt(1 / (12 * u.size))
    return BatteryOutcome("mean_pit", z, (float(2 * stats.norm.sf(abs(z))),))


@pytest.fixture
def toy():
    test = register_audit_test(
        AuditTest("mean_pit", STATISTICAL, _mean_pit, "the mean PIT value is 1/2 (z-test)", per_ordering=True)
    )
    yield test
    del AUDIT_TESTS[test.name]


def _audit(capsys, *flags) -> tuple:
    status = main(
        [
            "audit",
            "--target",
            "tinygpt",
            "--draft",
            "tabular",
            "--vocabulary",
            "5",
            "--n",
            "4000",
            "--horizon",
            "3",
            "--json",
            *flags,
        ]
    )
    return status, json.loads(capsys.readouterr().out)


def test_registered_test_runs_in_the_battery_against_the_reference_and_a_planted_bug(toy, capsys):
    """The reference passes (false-positive probability 0.01, the level; seed fixed), with the new test under each
    token ordering among the outcomes, after the built-in ones, and in the Bonferroni count; the residual-from-p bug
    fails the new test itself (p < 1e-4)."""
    status, reference = _audit(capsys)
    names = [outcome["name"] for outcome in reference["battery"]]
    assert status == 0 and reference["passed"], reference["test_p_values"]
    assert {"mean_pit_id", "mean_pit_target_probability"} <= set(names) and names[0] == "pit_id", names
    assert reference["tests"] == sum(outcome["share"] for outcome in reference["battery"])
    assert reference["test_p_values"]["mean_pit_id"] >= 0.01
    status, planted = _audit(capsys, "--mutant", "residual-from-p")
    assert status == 1 and min(p for name, p in planted["test_p_values"].items() if name.startswith("mean_pit")) < 1e-4


def test_registered_test_is_printed_and_named_once(toy, capsys):
    assert main(["audit", "--target", "tinygpt", "--vocabulary", "5", "--n", "500", "--horizon", "2"]) == 0
    printed = capsys.readouterr().out
    assert "mean_pit_id" in printed and "Bonferroni over" in printed, printed
    with pytest.raises(ValueError, match="already registered"):
        register_audit_test(toy)
