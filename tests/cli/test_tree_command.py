"""``spectheory tree`` against the trees module and the gamma calculator; its error contract; no torch."""

import json
import subprocess
import sys

import pytest
from command import run

from spectheory import speedup
from spectheory.trees import optimal_tree


def test_tree_json_against_programme(capsys):
    status, out, _ = run(capsys, "tree", "--acceptance", "0.8", "0.15", "0.04", "--budget", "16", "--json")
    document = json.loads(out)
    tree, value = optimal_tree((0.8, 0.15, 0.04), 16)
    assert status == 0 and document["tree"]["parents"] == list(tree.parents)
    assert document["expected_tokens"] == pytest.approx(value, abs=1e-12)
    assert document["chain"]["expected_tokens"] == pytest.approx(float(speedup.expected_tokens(0.8, 15)), abs=1e-12)
    assert "best" not in document  # no costs, no speedup


def test_tree_with_c_on_a_chain_against_gamma_calculator(capsys):
    """--alpha with one candidate per node and Theorem 3.8's costs: the best tree is the optimal gamma's chain."""
    status, out, _ = run(capsys, "tree", "--alpha", "0.8", "--budget", "33", "--c", "0.05", "--json")
    best = json.loads(out)["best"]
    gamma = int(speedup.optimal_gamma(0.8, 0.05, 32))
    assert status == 0 and best["tree"]["nodes"] == gamma + 1
    assert best["speedup"] == pytest.approx(float(speedup.walltime_improvement(0.8, gamma, 0.05)), rel=1e-12)


def test_tree_text_names_the_verdict(capsys):
    status, out, _ = run(
        capsys,
        "tree",
        "--alpha",
        "0.05",
        "--k",
        "2",
        "--budget",
        "8",
        "--t-step-ms",
        "60",
        "--t-draft-ms",
        "1",
        "--t-verify-ms",
        *["100"] * 8,
    )
    assert status == 0 and "do not speculate" in out and "parents [-1" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--acceptance", "0.7", "0.5", "--budget", "4"), "must sum to at most 1"),
        (("--acceptance", "0.7", "--budget", "0"), "budget must be a positive integer, got 0"),
        (("--alpha", "1.5", "--budget", "4"), "alpha must be"),
        (("--budget", "4"), "give --acceptance, --alpha, or --costs"),
        (
            ("--alpha", "0.5", "--budget", "8", "--t-step-ms", "1", "--t-draft-ms", "0.1", "--t-verify-ms", "1", "1"),
            "budget 8 needs t_verify for 1..8 positions, the costs give 2",
        ),
        (("--alpha", "0.5", "--budget", "4", "--c", "0.1", "--t-step-ms", "1"), "--c goes alone"),
        (("--alpha", "0.5", "--budget", "4", "--costs", "missing.json"), "does not exist"),
    ],
)
def test_tree_bad_input_against_error_contract(capsys, argv, message):
    status, out, err = run(capsys, "tree", *argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and message in err


def test_tree_never_imports_torch():
    code = (
        "import sys; from cli import main; "
        "assert main(['tree', '--acceptance', '0.8', '0.15', '0.04', '--budget', '16', '--json']) == 0; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
