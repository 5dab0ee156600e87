"""`spectheory gamma` against the theory functions, and the CLI's error contract (one line, exit 2)."""

import json
import shutil
import subprocess
import sys

import pytest
from command import run

from spectheory.speedup import alpha_from_tokens_per_iteration, operations_factor, optimal_gamma, walltime_improvement


def test_gamma_json_at_alpha_one_against_theory(capsys):
    """alpha = 1, c = 0: every speedup is finite (gamma + 1) but the oracle's is unbounded: null in JSON,
    "unbounded" in text (the JSON used to fail on Infinity)."""
    status, out, err = run(capsys, "gamma", "--alpha", "1", "--json")
    document = json.loads(out)[0]
    assert status == 0 and err == ""
    assert document["oracle_speedup"] is None and document["continuous_optimal_gamma"] is None
    assert document["optimal_gamma"] == 16 and document["speedup"] == pytest.approx(17.0)
    status, out, err = run(capsys, "gamma", "--alpha", "1")
    assert status == 0 and "oracle gamma unbounded" in out


def test_gamma_json_against_theory(capsys):
    status, out, err = run(
        capsys, "gamma", "--alpha", "0.6", "0.8", "0.95", "--c", "0.05", "--c-hat", "0.1", "--gamma-max", "12", "--json"
    )
    assert status == 0 and err == ""
    documents = json.loads(out)
    assert [d["alpha"] for d in documents] == [0.6, 0.8, 0.95]
    for document in documents:
        alpha = document["alpha"]
        assert document["c"] == 0.05 and document["c_hat"] == 0.1
        assert document["optimal_gamma"] == int(optimal_gamma(alpha, 0.05, 12))
        assert document["speedup"] == pytest.approx(float(walltime_improvement(alpha, document["optimal_gamma"], 0.05)))
        assert [row["gamma"] for row in document["table"]] == list(range(13))
        for row in document["table"]:
            assert row["speedup"] == pytest.approx(float(walltime_improvement(alpha, row["gamma"], 0.05)))
            assert row["ops_factor"] == pytest.approx(float(operations_factor(alpha, row["gamma"], 0.1)))
            assert set(row) == {"gamma", "expected_tokens", "speedup", "ops_factor"}
        assert document["speedup"] == max(row["speedup"] for row in document["table"])


def test_gamma_tokenization_ratio_against_theorem_3_8(capsys):
    """A draft with another tokenizer (docs/theory-vocabularies.md §15): at one target candidate per draft token the
    table is Theorem 3.8's; a short-token draft of a costly call answers "do not speculate" (gamma 0)."""
    status, out, _ = run(capsys, "gamma", "--alpha", "0.7", "--c", "0.1", "--tokenization-ratio", "1", "--json")
    (crossed,) = json.loads(out)
    assert status == 0
    assert [row["speedup"] for row in crossed["table"]] == pytest.approx(
        [float(walltime_improvement(0.7, gamma, 0.1)) for gamma in range(17)]
    )
    assert crossed["best_gamma"] == int(optimal_gamma(0.7, 0.1, 16))
    status, out, _ = run(capsys, "gamma", "--alpha", "0.1", "--c", "0.3", "--tokenization-ratio", "0.25")
    assert status == 0 and out.rstrip().endswith("do not speculate: no gamma beats 1x")


def test_gamma_text_marks_the_optimum(capsys):
    status, out, _ = run(capsys, "gamma", "--alpha", "0.8", "--c", "0.05", "--gamma-max", "10")
    assert status == 0
    marked = [line for line in out.splitlines() if line.strip().startswith("*")]
    assert len(marked) == 1 and marked[0].split()[1] == "8"
    assert "optimal gamma 8: 3.092x speedup" in out


def test_gamma_table_1_cell_in_text(capsys):
    # Leviathan Table 1, alpha 0.8, gamma 5: speed 3.69x, operations 1.63x (c = c_hat = 0).
    _, out, _ = run(capsys, "gamma", "--alpha", "0.8", "--gamma-max", "5")
    row = next(line for line in out.splitlines() if line.split()[:2] == ["*", "5"])
    assert row.split()[2:] == ["3.6893", "3.6893", "1.6263"]


def test_gamma_c_hat_defaults_to_c(capsys):
    _, out, _ = run(capsys, "gamma", "--alpha", "0.7", "--c", "0.2", "--json")
    assert json.loads(out)[0]["c_hat"] == 0.2


def test_gamma_from_tokens_per_iteration(capsys):
    status, out, _ = run(capsys, "gamma", "--tokens-per-iteration", "2.5", "--gamma", "3", "--json")
    assert status == 0
    (document,) = json.loads(out)
    assert document["alpha"] == pytest.approx(float(alpha_from_tokens_per_iteration(2.5, 3)))
    assert document["implied_from"] == {"tokens_per_iteration": 2.5, "gamma": 3}
    _, text, _ = run(capsys, "gamma", "--tokens-per-iteration", "2.5", "--gamma", "3")
    assert text.startswith("2.5 tokens per iteration at gamma = 3 implies alpha = 0.691414")


def test_gamma_latex(capsys):
    status, out, _ = run(capsys, "gamma", "--alpha", "0.8", "--gamma-max", "3", "--latex")
    assert status == 0
    assert r"\begin{tabular}" in out and r"\textbf{3} & \textbf{2.952}" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["gamma", "--alpha", "1.5"], "alpha must be in [0, 1], got 1.5"),
        (["gamma", "--alpha", "nan"], "alpha must be in [0, 1], got nan"),
        (["gamma", "--alpha", "-0.1"], "alpha must be in [0, 1]"),
        (["gamma", "--alpha", "0.5", "--c", "-1"], "c must be in [0, inf)"),
        (["gamma", "--alpha", "0.5", "--c", "nan"], "c must be in [0, inf)"),
        (["gamma", "--alpha", "0.5", "--c-hat", "-1"], "c_hat must be in [0, inf)"),
        (["gamma", "--alpha", "0.5", "--gamma-max", "0"], "gamma_max must be in [1, 1024]"),
        (["gamma", "--alpha", "x"], "invalid float value: 'x'"),
        (["gamma"], "one of the arguments --alpha --tokens-per-iteration --from-metrics is required"),
        (["gamma", "--tokens-per-iteration", "2"], "--tokens-per-iteration needs --gamma"),
        (["gamma", "--alpha", "0.5", "--gamma", "3"], "--gamma goes with --tokens-per-iteration"),
        (
            ["gamma", "--tokens-per-iteration", "5", "--gamma", "3"],
            "tokens_per_iteration must be at most gamma + 1 = 4",
        ),
        (["gamma", "--alpha", "0.5", "--json", "--latex"], "not allowed with argument"),
        (["gamma", "--alpha", "0.5", "--tokenization-ratio", "0"], "ratio must be in (0, inf)"),
        (["gamma", "--alpha", "0.5", "--tokenization-ratio", "0.3", "--latex"], "printed as text or --json"),
        (["gamma", "--tokenization-ratio", "0.3"], "--tokenization-ratio takes --alpha"),
        ([], "a command is required"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_arguments_one_line_exit_2(capsys, argv, fragment):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err, err


def console_command():
    found = shutil.which("spectheory")
    return [found] if found else [sys.executable, "-m", "cli"]


def test_console_script_end_to_end():
    ok = subprocess.run(
        console_command() + ["gamma", "--alpha", "0.9", "--c", "0.01", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)[0]["optimal_gamma"] == int(optimal_gamma(0.9, 0.01, 16))
    bad = subprocess.run(console_command() + ["gamma", "--alpha", "2"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "spectheory gamma: error: alpha must be in [0, 1], got 2.0"
