"""``spectheory figs``: every script in the registry's order, one line for what is missing."""

import json
import random
import subprocess
import sys

import pytest
from command import children_cpu_seconds, interrupt_after, start_interruptible
from figure_inputs import write_small_results

import paper_figs
from cli import main


@pytest.fixture
def small_results(tmp_path):
    return write_small_results(tmp_path / "results")


@pytest.mark.slow
def test_figs_cli_runs_every_script_against_registry(tmp_path, small_results, capsys):
    """The whole registry through the command (slow: tests/paper_figs runs each script alone; the command runs four
    end to end below, interrupted and not)."""
    assert main(["figs", "--out", str(tmp_path / "figs"), "--results", str(small_results)]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == list(paper_figs.SCRIPTS)
    assert all(paper_figs.script(name).__doc__.strip() for name in paper_figs.SCRIPTS)


def test_figs_cli_names_missing_results_in_one_line(tmp_path, capsys):
    assert (
        main(
            [
                "figs",
                "--out",
                str(tmp_path),
                "--results",
                str(tmp_path / "none"),
                "--only",
                "table1",
                "stern_fig4_blockwise",
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert "['blockwise.json'] are not in" in error and "--recompute" in error and error.count("\n") == 1


def _snapshot(directory):
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _scaled(value, key=None):
    """``value`` with every measured number (the keys below) times 0.9."""
    if isinstance(value, dict):
        return {k: _scaled(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v, key) for v in value]
    measured = {"c", "speedup", "alpha", "alpha_text", "oracle", "mean_block_size", "mean_tokens_per_iteration"}
    return value * 0.9 if key in measured and isinstance(value, float) else value


def test_figs_recompute_checks_its_outputs_before_any_work(tmp_path, capsys):
    """--out on a file: one line and exit 2 at once (it used to fail after minutes of recomputation)."""
    (tmp_path / "taken").write_text("x")
    assert main(["figs", "--out", str(tmp_path / "taken"), "--recompute"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "exists and is not a directory" in error
    assert main(["figs", "--results", str(tmp_path / "taken"), "--recompute", "--out", str(tmp_path / "f")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err and not (tmp_path / "f").exists()


def test_figs_interrupted_at_random_points_leaves_old_or_new_output(tmp_path):
    """Ctrl-C (SIGINT) at seeded random moments of `spectheory figs` (four measured scripts: the staging is the
    same for all) over an existing output: afterwards the directory holds exactly the old figures or exactly the
    new ones. The new inputs differ from the old, so a mixture would show."""
    old_inputs, new_inputs = write_small_results(tmp_path / "old"), write_small_results(tmp_path / "new")
    for path in new_inputs.rglob("*.json"):  # every measured figure and table changes (a folder's files too)
        path.write_text(json.dumps(_scaled(json.loads(path.read_text()))))
    only = ["--only", "speedup_vs_gamma", "measured_vs_predicted", "table3_alpha", "spec_bench"]  # measured ones
    command = [sys.executable, "-m", "cli", "figs", *only, "--out"]
    subprocess.run(
        command + [str(tmp_path / "expected"), "--results", str(new_inputs)], check=True, capture_output=True
    )
    out = tmp_path / "figs"
    started = children_cpu_seconds()
    subprocess.run(command + [str(out), "--results", str(old_inputs)], check=True, capture_output=True)
    work = children_cpu_seconds() - started  # CPU seconds, so that the shares below hold on a busy machine
    old, new = _snapshot(out), _snapshot(tmp_path / "expected")
    assert old != new and set(old) == set(new)
    outcomes = []
    for share in random.Random(0).sample([k / 40 for k in range(8, 44)], 3):  # import time to past the end
        process = start_interruptible(
            command + [str(out), "--results", str(new_inputs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        interrupt_after(process, share * work)
        process.wait(timeout=60)
        now = _snapshot(out)
        assert now in (old, new), f"a mixture after SIGINT at {share:.3f} of the work"
        outcomes.append(now == new)
        if now == new:  # start the next try from the old output again
            subprocess.run(command + [str(out), "--results", str(old_inputs)], check=True, capture_output=True)
    assert not all(outcomes), "no interruption landed before the end: the test saw nothing"
