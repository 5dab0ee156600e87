"""The conformance battery (decoders.audit.engines.conformance, docs/conformance.md) against stand-in servers with a
planted defect each: every defect fails its own rows and no other, the clean server fails none, a refusal is listed as
one. Each law row's two-sample test has a false-positive probability of at most its level, 0.01 (six law and seed
rows: at most 6% that some row of the clean server fails by chance); the seeds are fixed, so the verdicts are too."""

import pytest
from engine_standin import DefectiveServer

from decoders.audit.engines.conformance import LAW_SETTINGS, Sides, conformance_lines, default_rows, run_battery
from decoders.conformance_results import FAIL, PASS, REFUSED, ConformanceDocument

LAW_ROWS = {f"law_{name}" for name in LAW_SETTINGS}


def _battery(server):
    return run_battery(Sides(server), default_rows(n=1000), level=0.01)


@pytest.mark.parametrize(
    "defect, failing",
    [(None, set()), ("law", LAW_ROWS), ("seed", {"seeds"}), ("logprobs", {"logprobs"}), ("greedy", {"greedy"})],
)
def test_a_planted_defect_fails_its_own_rows_alone_against_the_clean_server(defect, failing):
    document = _battery(DefectiveServer(defect))
    assert set(document.failed) == failing, conformance_lines(document)
    assert all(row.verdict == PASS for row in document.rows if row.name not in failing)


def test_a_refused_setting_is_listed_as_refused_not_passed():
    document = _battery(DefectiveServer(refuses=True))
    rows = {row.name: row for row in document.rows}
    assert rows["law_min_p0.1"].verdict == REFUSED and "min-p" in rows["law_min_p0.1"].details
    assert FAIL not in {row.verdict for row in document.rows}


def test_document_reads_back_and_prints():
    document = _battery(DefectiveServer("seed"))
    again = ConformanceDocument.from_dict(document.as_dict())
    assert again == document
    lines = conformance_lines(again)
    assert lines[-1] == "1 of 8 rows failed: seeds"
    assert any(line.startswith("law_t1 ") and "p = " in line for line in lines)
