"""Every figure script writes non-empty PNG and PDF files (tables: Markdown and CSV) from small cached
inputs; Table 1 equals the paper's; `spectheory figs` runs them all and names what is missing."""

import csv
import json

import numpy as np
import pytest

import paper_figs
from paper_facts import LEVIATHAN_TABLE_1
from paper_figs import (dynamic_gamma_heatmap, fig2_expected_tokens, fig3_optimal_gamma, fig4_speedup_operations,
                        fig5_timelines, measured_vs_predicted, simulation_vs_theory, speedup_vs_gamma,
                        stern_fig4_blockwise, table1, table3_alpha, table5_lenience)
from spectheory.cli import FIGURE_SCRIPTS, main
from spectheory.speedup import expected_tokens

FIGURES = [fig2_expected_tokens, fig3_optimal_gamma, fig4_speedup_operations, fig5_timelines, simulation_vs_theory,
           measured_vs_predicted, speedup_vs_gamma, stern_fig4_blockwise, dynamic_gamma_heatmap]
TABLES = [table1, table3_alpha, table5_lenience]


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
    bench = {"rows": rows, "c": 0.1, "environment": {"device_name": "test cpu"}, "settings": {"gammas": [1, 2]},
             "alpha": {"0.0": 0.8, "1.0": 0.7}}
    (results / measured_vs_predicted.RESULT).write_text(json.dumps(bench))
    runs = [{"process": p, "gamma": g, "alpha": a, "mean_tokens_per_iteration": float(expected_tokens(a, g)) + 0.01,
             "standard_error": 0.01, "z_score": 1.0} for p in ("iid", "token-level") for g in (2, 4) for a in (0.3, 0.8)]
    (results / simulation_vs_theory.RESULT).write_text(json.dumps({"runs": runs}))
    blocks = [{"criterion": c, "top_k": k, "block_size": b, "mean_block_size": 1 + b / 2, "speedup": 1 + b / 3}
              for c, k in (("exact", 1), ("top_k", 2)) for b in (2, 4)]
    (results / stern_fig4_blockwise.RESULT).write_text(json.dumps({"rows": blocks, "environment": {"device_name": "cpu"}}))
    estimates = [{"draft": d, "temperature": t, "alpha_text": 0.5, "alpha_text_standard_error": 0.01, "alpha_counts": 0.6,
                  "alpha_counts_standard_error": 0.02} for d in ("transformer", "bigram") for t in (0.0, 1.0)]
    (results / table3_alpha.RESULT).write_text(json.dumps({"command": "spectheory alpha", "estimates": estimates}))
    lenient = [{"draft": d, "temperature": 1.0, "leniences": [1.0, 0.5], "alpha": [0.5, 0.6],
                "standard_error": [0.01, 0.01]} for d in ("transformer", "bigram")]
    (results / table5_lenience.RESULT).write_text(json.dumps({"windows": 2, "rows": lenient}))
    return results


@pytest.mark.parametrize("module", FIGURES, ids=lambda m: m.__name__.split(".")[-1])
def test_figure_script_writes_png_and_pdf(module, tmp_path, small_results):
    paths = module.make(tmp_path / "out", small_results)
    assert sorted(path.suffix for path in paths) == [".pdf", ".png"]
    assert all(path.stat().st_size > 1000 for path in paths)
    assert module.__doc__.strip()  # the caption


@pytest.mark.parametrize("module", TABLES, ids=lambda m: m.__name__.split(".")[-1])
def test_table_script_writes_markdown_and_csv_with_the_same_rows(module, tmp_path, small_results):
    markdown, table = module.make(tmp_path / "out", small_results)
    lines = [line for line in markdown.read_text().splitlines() if line.startswith("|")]
    with table.open() as handle:
        cells = list(csv.reader(handle))
    assert len(lines) == len(cells) + 1  # the Markdown separator row
    assert [cell.strip() for cell in lines[0].strip("|").split("|")] == cells[0]
    assert [line.split("|")[1].strip() for line in lines[2:]] == [row[0] for row in cells[1:]]


def test_table3_and_table5_cells_against_their_json(tmp_path, small_results):
    _, table3 = table3_alpha.make(tmp_path, small_results)
    assert list(csv.reader(table3.open()))[1] == ["transformer", "0.5000", "0.6000", "0.5000", "0.6000"]
    _, table5 = table5_lenience.make(tmp_path, small_results)
    assert list(csv.reader(table5.open()))[0:2] == [["draft", "l = 1", "l = 0.5"], ["transformer", "0.5000", "0.6000"]]


def test_table1_against_paper_table(tmp_path):
    cells = {(row["alpha"], row["gamma"]): (row["operations"], row["speed"]) for row in table1.rows()}
    assert cells == LEVIATHAN_TABLE_1
    markdown, table = table1.make(tmp_path)
    assert table.read_text().splitlines()[1:] == [f"{a},{g},{o:.2f},{s:.2f}" for (a, g), (o, s) in LEVIATHAN_TABLE_1.items()]
    assert markdown.read_text().count("\n") == 2 + len(LEVIATHAN_TABLE_1)


def test_simulation_points_against_eq_1(tmp_path):
    """The figure's own simulations sit within 4.5 standard errors of Eq. 1 (false-positive probability about
    36 x 7e-6 = 2.4e-4); negative control: the same points held against Eq. 1 at gamma + 1 do not."""
    runs = json.loads(simulation_vs_theory.compute(tmp_path).read_text())["runs"]
    assert len(runs) == len(simulation_vs_theory.GAMMAS) * len(simulation_vs_theory.ALPHAS) * 2
    assert max(abs(run["z_score"]) for run in runs) < 4.5
    wrong = [(run["mean_tokens_per_iteration"] - expected_tokens(run["alpha"], run["gamma"] + 1)) / run["standard_error"]
             for run in runs]
    assert np.max(np.abs(wrong)) > 4.5


def test_figs_cli_runs_every_script_against_registry(tmp_path, small_results, capsys):
    assert FIGURE_SCRIPTS == paper_figs.SCRIPTS
    assert main(["figs", "--out", str(tmp_path / "figs"), "--results", str(small_results)]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == list(paper_figs.SCRIPTS)
    assert all(paper_figs.script(name).__doc__.strip() for name in paper_figs.SCRIPTS)


def test_figs_cli_names_missing_results_in_one_line(tmp_path, capsys):
    assert main(["figs", "--out", str(tmp_path), "--results", str(tmp_path / "none"), "--only", "table1",
                 "stern_fig4_blockwise"]) == 2
    error = capsys.readouterr().err
    assert "['blockwise.json'] are not in" in error and "--recompute" in error and error.count("\n") == 1


def test_figures_are_byte_identical_across_runs(tmp_path):
    """Regenerated figures can be compared with `git diff`: no timestamps in the PDF or PNG."""
    first, second = (fig2_expected_tokens.make(tmp_path / name) for name in ("a", "b"))
    assert [path.read_bytes() for path in first] == [path.read_bytes() for path in second]
