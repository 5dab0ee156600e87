"""``spectheory figs``: every script in the registry's order, one line for what is missing."""

import pytest

import paper_figs
from figure_inputs import write_small_results
from spectheory.cli import main


@pytest.fixture
def small_results(tmp_path):
    return write_small_results(tmp_path / "results")


def test_figs_cli_runs_every_script_against_registry(tmp_path, small_results, capsys):
    assert main(["figs", "--out", str(tmp_path / "figs"), "--results", str(small_results)]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == list(paper_figs.SCRIPTS)
    assert all(paper_figs.script(name).__doc__.strip() for name in paper_figs.SCRIPTS)


def test_figs_cli_names_missing_results_in_one_line(tmp_path, capsys):
    assert main(["figs", "--out", str(tmp_path), "--results", str(tmp_path / "none"), "--only", "table1",
                 "stern_fig4_blockwise"]) == 2
    error = capsys.readouterr().err
    assert "['blockwise.json'] are not in" in error and "--recompute" in error and error.count("\n") == 1
