"""`spectheory simulate` against the closed forms it reports, and its error contract (one line, exit 2)."""

import json

import pytest
from command import run
from sim_checks import BAND

from spectheory.positional import MarkovAcceptance, markov_expected_tokens
from spectheory.speedup import expected_tokens, walltime_improvement

REQUIRED_KEYS = {
    "mean_tokens_per_iteration",
    "standard_error",
    "theory_tokens_per_iteration",
    "speedup",
    "theory_speedup",
}


@pytest.mark.parametrize(
    "argv, theory_tokens",
    [
        (["--alpha", "0.8", "--gamma", "4", "--c", "0.05"], float(expected_tokens(0.8, 4))),
        (["--process", "positional", "--acceptance", "0.9", "0.8", "0.7"], 1 + 0.9 + 0.72 + 0.504),
        (
            [
                "--process",
                "markov",
                "--regime-acceptance",
                "0.95",
                "0.3",
                "--transition",
                "0.9",
                "0.1",
                "0.3",
                "0.7",
                "--gamma",
                "3",
            ],
            markov_expected_tokens(MarkovAcceptance([[0.9, 0.1], [0.3, 0.7]], [0.95, 0.3]), 3),
        ),
        (
            ["--process", "token-level", "--alpha", "0.7", "--gamma", "3", "--family", "zipf", "--vocabulary", "50"],
            float(expected_tokens(0.7, 3)),
        ),
    ],
)
def test_simulate_json_against_theory(capsys, argv, theory_tokens):
    status, out, err = run(capsys, "simulate", *argv, "--n", "50000", "--seed", "3", "--json")
    assert status == 0 and err == ""
    document = json.loads(out)
    assert REQUIRED_KEYS <= set(document)
    assert document["theory_tokens_per_iteration"] == pytest.approx(theory_tokens, rel=1e-9)
    assert abs(document["mean_tokens_per_iteration"] - theory_tokens) <= BAND * document["standard_error"]
    gamma, c = document["gamma"], document["c"]
    assert document["theory_speedup"] == pytest.approx(theory_tokens / (gamma * c + 1), rel=1e-9)
    assert document["speedup"] == pytest.approx(document["mean_tokens_per_iteration"] / (gamma * c + 1))
    assert sum(document["accepted_distribution"]) == pytest.approx(1.0)


def test_simulate_iid_speedup_is_theorem_3_8_and_seed_reproduces(capsys):
    argv = ["simulate", "--alpha", "0.6", "--gamma", "2", "--c", "0.1", "--n", "20000", "--seed", "9", "--json"]
    _, first, _ = run(capsys, *argv)
    _, second, _ = run(capsys, *argv)
    assert first == second
    assert json.loads(first)["theory_speedup"] == pytest.approx(float(walltime_improvement(0.6, 2, 0.1)))


def test_simulate_text_report(capsys):
    status, out, _ = run(
        capsys,
        "simulate",
        "--process",
        "markov",
        "--regime-acceptance",
        "0.95",
        "0.3",
        "--transition",
        "0.9",
        "0.1",
        "0.3",
        "0.7",
        "--gamma",
        "3",
        "--n",
        "20000",
    )
    assert status == 0
    assert "tokens per iteration: simulated" in out and "theory 2.73854" in out
    assert "Eq. 1 at the same mean alpha would say 2.89603" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--alpha", "1.2", "--gamma", "3"], "alpha must be in [0, 1], got 1.2"),
        (["--alpha", "0.5"], "--gamma is required"),
        (["--gamma", "3"], "process 'iid' needs alpha"),
        (["--alpha", "0.5", "--gamma", "0"], "gamma must be an integer in [1, 1024], got 0"),
        (
            ["--alpha", "0.8", "--gamma", "1000000000", "--n", "100"],
            "gamma must be an integer in [1, 1024]",
        ),  # used to be OOM
        (["--alpha", "0.5", "--gamma", "3", "--n", "0"], "iterations must be an integer in [1, 1000000000], got 0"),
        (
            ["--alpha", "0.5", "--gamma", "3", "--lenience", "0.5"],  # used to be ignored
            "lenience applies to the token-level process only, got lenience = 0.5 with process 'iid'",
        ),
        (
            ["--process", "positional", "--acceptance", "0.5", "--vocabulary", "7"],
            "vocabulary applies to the token-level",
        ),
        (["--alpha", "0.5", "--gamma", "3", "--c", "-1"], "c must be in [0, inf)"),
        (["--alpha", "0.5", "--gamma", "3", "--seed", "-1"], "seed must be a non-negative integer"),
        (["--process", "positional", "--acceptance", "0.5", "1.5"], "acceptance must be in [0, 1], got 1.5"),
        (["--process", "positional", "--acceptance", "0.5", "--gamma", "2"], "acceptance must have gamma = 2 entries"),
        (["--process", "markov", "--regime-acceptance", "0.9", "0.2", "--gamma", "3"], "transition must have K^2 = 4"),
        (
            [
                "--process",
                "markov",
                "--regime-acceptance",
                "0.9",
                "0.2",
                "--transition",
                "1",
                "0",
                "0.5",
                "0.6",
                "--gamma",
                "3",
            ],
            "sum of transition over its last axis must be 1",
        ),
        (
            ["--process", "token-level", "--alpha", "0.5", "--gamma", "3", "--lenience", "0"],
            "lenience must be in (0, 1]",
        ),
        (
            ["--process", "token-level", "--alpha", "0.5", "--gamma", "3", "--vocabulary", "0"],
            "vocabulary must be an integer in [1, 10000], got 0",
        ),
        (
            ["--process", "token-level", "--alpha", "0.5", "--gamma", "3", "--vocabulary", "100000000"],
            "vocabulary must be an integer in [1, 10000]",
        ),  # used to be a MemoryError traceback
        (["--process", "token-level", "--alpha", "0.001", "--gamma", "3"], "alpha must be"),
        (["--process", "nope"], "invalid choice"),
    ],
)
def test_simulate_bad_arguments_one_line_exit_2(capsys, argv, fragment):
    status, out, err = run(capsys, "simulate", *argv)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err, err
    assert err.startswith("spectheory simulate: error: ")
