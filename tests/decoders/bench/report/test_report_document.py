"""The report's typed document (decoders.bench.report.document) against every committed report.json: each reads
back, and through the JSON edge (``as_dict``) gives the file again, but for the keys a vintage lacked that its
defaults now write. Control: a report missing a part the document needs is refused, naming it."""

import json
from pathlib import Path

import pytest

from decoders.bench.documents import BenchReport
from decoders.bench.forecast.document import SweepForecast
from decoders.bench.report.document import ReportAudit, ReportDocument

ROOT = Path(__file__).resolve().parents[4]


def _is_report(path: Path) -> bool:
    saved = json.loads(path.read_text())
    return isinstance(saved, dict) and {"alpha_text", "bench", "recommendations"} <= set(saved)


REPORTS = sorted(filter(_is_report, (ROOT / "results").rglob("*.json")))


def _within(saved, again, path=""):
    """Where ``again`` differs from ``saved`` on a key ``saved`` holds (keys only ``again`` holds are defaults)."""
    if isinstance(saved, dict):
        return [miss for key in saved for miss in _within(saved[key], again.get(key, KeyError), f"{path}/{key}")]
    if isinstance(saved, list) and isinstance(again, list) and len(saved) == len(again):
        return [miss for i, (a, b) in enumerate(zip(saved, again)) for miss in _within(a, b, f"{path}[{i}]")]
    return [] if saved == again else [path]


def test_reports_found():
    assert len(REPORTS) >= 8, REPORTS  # results/report*, results/forecast_checks/*


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_committed_report_against_its_typed_document(path):
    saved = json.loads(path.read_text())
    saved.pop("provenance", None)
    document = ReportDocument.from_dict(saved)
    assert isinstance(document.bench, BenchReport) and isinstance(document.audit, ReportAudit)
    assert document.forecast is None or isinstance(document.forecast, SweepForecast)
    again = json.loads(json.dumps(document.as_dict()))
    assert _within(saved, again) == []
    assert ReportDocument.from_dict(again) == document  # the edge, twice, is the same document


def test_report_without_its_bench_is_refused():
    saved = json.loads(REPORTS[0].read_text())
    del saved["bench"]
    with pytest.raises(ValueError, match="a report.json holds bench; this one has none"):
        ReportDocument.from_dict(saved)


def test_within_catches_a_changed_or_lost_value():
    """Control for the comparison: a changed value and a lost key are named, a key only the new document holds is
    not."""
    saved = {"a": {"b": 1, "c": [1, 2]}, "d": 0}
    assert _within(saved, {"a": {"b": 2, "c": [1, 2]}, "d": 0, "e": 1}) == ["/a/b"]
    assert _within(saved, {"a": {"b": 1, "c": [1, 3]}}) == ["/a/c[1]", "/d"]


def test_recommendation_rebuilt_from_a_withheld_forecast_against_the_reports_own_rule():
    """A report written before the rule gets each recommendation from the rule at load time, as the report applies it
    (``decoders.bench.report.pair``): with the forecast's gamma where its checks passed, without it where they withheld
    it (a loaded machine; a constructed line here, no clock). Control: the same answer with its forecast shown takes
    the forecast's gamma."""
    from spectheory.recommendation import from_sweep

    saved = json.loads((ROOT / "results" / "report" / "report.json").read_text())
    for answer in saved["recommendations"]:
        answer.pop("recommendation", None)  # as in a report written before the rule
        answer["withheld"] = f"T = {answer['temperature']:g}: the forecast withheld: a constructed line"
    bench = BenchReport.from_dict(saved["bench"])
    for answer in ReportDocument.from_dict(saved).recommendations:
        assert answer.recommendation == from_sweep(bench.rows_at(answer.temperature), None)
    for answer in saved["recommendations"]:
        answer["withheld"] = ""
    for answer in ReportDocument.from_dict(saved).recommendations:
        assert answer.recommendation == from_sweep(bench.rows_at(answer.temperature), answer.forecast_gamma)
        assert answer.recommendation != from_sweep(bench.rows_at(answer.temperature), None)
