"""Every figure script writes non-empty PNG and PDF files (tables: Markdown and CSV) from small cached
inputs; Table 1 equals the paper's; `spectheory figs` runs them all and names what is missing."""

import csv
import json

import numpy as np
import pytest
from figure_inputs import write_small_results
from paper_facts import LEVIATHAN_TABLE_1

from paper_figs import (
    dynamic_gamma_heatmap,
    fig2_expected_tokens,
    fig3_optimal_gamma,
    fig4_speedup_operations,
    fig5_timelines,
    goodput_vs_concurrency,
    iteration_time,
    measured_vs_predicted,
    simulation_vs_theory,
    spec_bench,
    speedup_vs_batch,
    speedup_vs_gamma,
    stern_fig4_blockwise,
    table1,
    table3_alpha,
    table5_lenience,
    table_real_model,
    tree_expected_tokens,
    verifier_acceptance,
)
from spectheory.speedup import expected_tokens

FIGURES = [
    fig2_expected_tokens,
    fig3_optimal_gamma,
    fig4_speedup_operations,
    fig5_timelines,
    simulation_vs_theory,
    measured_vs_predicted,
    speedup_vs_gamma,
    iteration_time,
    speedup_vs_batch,
    stern_fig4_blockwise,
    dynamic_gamma_heatmap,
    tree_expected_tokens,
    verifier_acceptance,
    spec_bench,
    goodput_vs_concurrency,
]
TABLES = [table1, table3_alpha, table5_lenience, table_real_model]


@pytest.fixture(scope="module")
def small_results(tmp_path_factory):
    """The small inputs, written once for the module (1.1 s each; the scripts only read them)."""
    return write_small_results(tmp_path_factory.mktemp("small") / "results")


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
    assert table.read_text().splitlines()[1:] == [
        f"{a},{g},{o:.2f},{s:.2f}" for (a, g), (o, s) in LEVIATHAN_TABLE_1.items()
    ]
    assert markdown.read_text().count("\n") == 2 + len(LEVIATHAN_TABLE_1)


def test_simulation_points_against_eq_1(tmp_path):
    """The figure's own simulations sit within 4.5 standard errors of Eq. 1 (false-positive probability about
    36 x 7e-6 = 2.4e-4); negative control: the same points held against Eq. 1 at gamma + 1 do not."""
    runs = json.loads(simulation_vs_theory.compute(tmp_path).read_text())["runs"]
    assert len(runs) == len(simulation_vs_theory.GAMMAS) * len(simulation_vs_theory.ALPHAS) * 2
    assert max(abs(run["z_score"]) for run in runs) < 4.5
    wrong = [
        (run["mean_tokens_per_iteration"] - expected_tokens(run["alpha"], run["gamma"] + 1)) / run["standard_error"]
        for run in runs
    ]
    assert np.max(np.abs(wrong)) > 4.5


def test_figures_are_byte_identical_across_runs(tmp_path):
    """Regenerated figures can be compared with `git diff`: no timestamps in the PDF or PNG."""
    first, second = (fig2_expected_tokens.make(tmp_path / name) for name in ("a", "b"))
    assert [path.read_bytes() for path in first] == [path.read_bytes() for path in second]


def test_real_model_table_cells_against_their_json(tmp_path, small_results):
    """The copy row at T = 0: the best measured gamma (2, 1.4x), the cost model's gamma and the counterpart's ratios;
    random has no transformers counterpart for speculation."""
    _, table = table_real_model.make(tmp_path, small_results)
    rows = list(csv.reader(table.open()))
    assert rows[1][:7] == ["copy", "rewrite", "0", "0.5000", "0.0100", "2", "1.4000"]
    assert rows[1][-2:] == ["1.10x (1.00-1.20)", "1.50x (1.40-1.60)"]
    assert rows[3][0] == "random" and rows[3][-1] == "-" and rows[3][5] == "1"
    assert "layerskip:8 0.500 (T = 0)" in (tmp_path / "table_real_model.md").read_text()
