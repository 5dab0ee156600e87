"""Every figure script writes non-empty PNG and PDF files from small inputs; Table 1 equals the paper's."""

import json

import pytest

from paper_facts import LEVIATHAN_TABLE_1
from paper_figs import (dynamic_gamma_heatmap, fig2_expected_tokens, fig3_optimal_gamma, fig4_speedup_operations,
                        fig5_timelines, measured_vs_predicted, table1)


@pytest.fixture
def small_results(tmp_path):
    """Tiny stand-ins for the cached results the data-driven figures read."""
    results = tmp_path / "results"
    results.mkdir()
    grid = {"alphas": [0.5, 0.9], "cs": [0.0, 0.1], "oracle": [[1.0, 1.2], [1.0, 1.5]],
            "rejection": [[1.0, 1.01], [1.0, 1.1]], "heuristic": [[0.9, 0.95], [0.7, 0.97]]}
    (results / dynamic_gamma_heatmap.RESULT).write_text(json.dumps(grid))
    rows = [{"temperature": t, "gamma": g, "speedup": 1 + g / 5, "predicted_speedup": 1 + g / 4}
            for t in (0.0, 1.0) for g in (1, 2)]
    bench = {"rows": rows, "c": 0.1, "environment": {"device_name": "test cpu"}}
    (results / measured_vs_predicted.RESULT).write_text(json.dumps(bench))
    return results


@pytest.mark.parametrize("module", [fig2_expected_tokens, fig3_optimal_gamma, fig4_speedup_operations, fig5_timelines,
                                    dynamic_gamma_heatmap, measured_vs_predicted])
def test_figure_script_writes_png_and_pdf(module, tmp_path, small_results):
    paths = module.make(tmp_path / "out", small_results)
    assert sorted(path.suffix for path in paths) == [".pdf", ".png"]
    assert all(path.stat().st_size > 1000 for path in paths)
    assert module.__doc__.strip()  # the caption


def test_table1_against_paper_table(tmp_path):
    cells = {(row["alpha"], row["gamma"]): (row["operations"], row["speed"]) for row in table1.rows()}
    assert cells == LEVIATHAN_TABLE_1
    markdown, csv = table1.make(tmp_path)
    assert csv.read_text().splitlines()[1:] == [f"{a},{g},{o:.2f},{s:.2f}" for (a, g), (o, s) in LEVIATHAN_TABLE_1.items()]
    assert markdown.read_text().count("\n") == 2 + len(LEVIATHAN_TABLE_1)
