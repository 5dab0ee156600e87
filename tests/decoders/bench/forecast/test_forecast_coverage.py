"""The forecasts' stated 95% intervals (``spectheory.intervals``) against hand computations, and their coverage on every
committed forecast beside its measurement (``decoders.bench.forecast.coverage``) against docs/forecasts.md's table, with
the control that a narrower interval fails the 90% line on the same rows."""

import json
import math
import re
from pathlib import Path

import pytest

from decoders.bench.forecast.coverage import ForecastPair, coverage_table, covered, pairs_of, run_error
from spectheory.intervals import FORECAST_RUN_ERROR, covers, forecast_interval

ROOT = Path(__file__).resolve().parents[4]
T_3, Z = 3.182446305284263, 1.959963984540054  # Student's t on 3 degrees of freedom and the normal, at 0.975


def _committed() -> dict:
    """Every committed results document that holds a forecast beside its measurement, by path."""
    documents = {}
    for path in sorted((ROOT / "results").rglob("*.json")):
        document = json.loads(path.read_text())
        if isinstance(document, dict) and pairs_of(document):
            documents[str(path.relative_to(ROOT))] = document
    return documents


def test_forecast_interval_against_hand_computation():
    half = math.hypot(T_3 * 0.1 / 2.0, Z * 0.15)  # 4 prompts, SE 0.1 on 2.0x
    assert forecast_interval(2.0, 0.1, 4, run_error=0.15) == pytest.approx([2 * math.exp(-half), 2 * math.exp(half)])
    assert forecast_interval(2.0, None, 1, run_error=0.15) == pytest.approx(
        [2 * math.exp(-Z * 0.15), 2 * math.exp(Z * 0.15)]
    )
    for bad, match in (
        ({"speedup": 0.0}, "speedup must be positive"),
        ({"level": 1.0}, "level must be"),
        ({"prompts": 1}, "prompts must be"),
    ):
        arguments = dict({"speedup": 2.0, "standard_error": 0.1, "prompts": 4}, **bad)
        with pytest.raises(ValueError, match=match):
            forecast_interval(arguments.pop("speedup"), arguments.pop("standard_error"), **arguments)


def test_covers_against_hand_computation():
    """|log 2/1.6| = 0.223 <= hypot(log 2/1.5, log 1.7/1.6) = 0.294; |log 2/1.4| = 0.357 > hypot(0.288, 0.035)."""
    assert covers(2.0, [1.5, 2.5], 1.6, [1.4, 1.7])
    assert not covers(2.0, [1.5, 2.5], 1.4, [1.3, 1.45])
    assert covers(1.0, [0.8, 1.2], 1.3, [1.0, 1.5])  # below: hypot(log 1.2, log 1.3) = 0.319 >= log 1.3 = 0.262
    assert not covers(1.0, [0.8, 1.2], 1.3, [1.1, 1.5])  # hypot(log 1.2, log 1.3/1.1) = 0.247


def test_run_error_constant_against_committed_forecasts():
    """The shipped run error is the estimate over every committed forecast (to 0.005)."""
    pairs = [pair for document in _committed().values() for pair in pairs_of(document)]
    assert len(pairs) >= 60
    assert abs(run_error(pairs) - FORECAST_RUN_ERROR) < 0.005, run_error(pairs)


def test_coverage_table_against_docs_and_the_90_percent_line():
    """docs/forecasts.md's coverage table is what the committed results give (each run judged with the run error
    estimated from the others), over at least 60 rows, at least 90% covered."""
    table = coverage_table(_committed())
    text = (ROOT / "docs" / "forecasts.md").read_text()
    quoted = {
        path: (int(rows), int(inside), float(error))
        for path, rows, inside, error in re.findall(
            r"^\| `(results/[\w./-]+\.json)` \| [^|]+ \| (\d+) \| (\d+) \| (\d\.\d{3}) \|$", text, flags=re.M
        )
    }
    assert quoted == {row.run: (row.rows, row.covered, round(row.run_error, 3)) for row in table}
    rows, inside = sum(row.rows for row in table), sum(row.covered for row in table)
    assert rows >= 60 and inside / rows >= 0.90, (inside, rows)
    assert f"| all | | {rows} | {inside} ({inside / rows:.1%}) | |" in text


def test_prompts_alone_against_the_90_percent_line():
    """The control: the interval of the prompts' jackknife alone (no run error) covers too few of the same rows, so
    the check above can fail."""
    pairs = [pair for document in _committed().values() for pair in pairs_of(document)]
    share = sum(covered(pair, 0.0) for pair in pairs) / len(pairs)
    assert share < 0.85, share
    assert not covered(ForecastPair("hand", 2.0, 0.01, 8, 1.5, (1.45, 1.55)), 0.0)


def test_leave_one_out_against_hand_lists():
    """The jackknife's samples: each entry left out in turn, in order; none from one entry (nothing to leave out),
    so the standard error of one prompt is None."""
    from spectheory.intervals import jackknife_error, leave_one_out

    assert leave_one_out([1, 2, 3]) == [[2, 3], [1, 3], [1, 2]]
    assert leave_one_out([7]) == [] and jackknife_error([]) is None
