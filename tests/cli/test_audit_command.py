"""``spectheory audit``: exit status, JSON, the one-line errors, and the names it offers."""

import json

import pytest

from cli import main
from cli.audit import tiny_target_flags
from decoders.audit.mutants import MUTANTS, mutant
from decoders.audit.runs import AuditRequest
from decoders.audit.tree_mutants import TREE_MUTANTS, tree_mutant
from decoders.audit.verdict import TOLERANCE
from decoders.drafts import TINY, draft_names
from decoders.policies import POLICIES
from decoders.verification import TREE_VERIFIERS


def test_audit_cli_exit_status_and_json(capsys):
    assert main(["audit", "--exact", "--gamma", "1", "--horizon", "3", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["passed"] and document["max_abs_difference"] < TOLERANCE and document["method"] == "dp"
    assert main(["audit", "--mutant", "residual-from-p", "--n", "5000", "--horizon", "3", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert not document["passed"] and document["p_value"] < 1e-4 and document["n"] == 5000
    assert set(document["test_p_values"]) == {
        f"{test}_{order}" for test in ("pit", "pairs", "rows") for order in ("id", "target_probability", "draft_ratio")
    } | {"joint_first_tokens", "support"}


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--draft", "nope"], "draft must be one of"),
        (["--mutant", "nope"], "mutant must be one of"),
        (["--gamma", "0"], "gamma must"),
        (["--n", "0"], "n must"),
        (["--temperature", "-1"], "temperature"),
        (["--prompt", "9"], "prompt tokens"),
        (["--vocabulary", "1"], "vocab_size"),
        (["--exact", "bogus"], "exact must be one of"),
        (["--decoder", "autoregressive", "--mutant", "one-uniform"], "mutants are speculative and tree decoders"),
        (["--decoder", "tree", "--tree", "kary:x"], "tree 'kary:x'"),
        (["--decoder", "tree", "--verifier", "token"], "--decoder tree takes --verifier"),
        (["--decoder", "tree", "--mutant", "one-uniform"], "tree mutant must be one of"),
        (
            [
                "--decoder",
                "tree",
                "--verifier",
                "rrs",
                "--exact",
            ],  # the defaults: once 6 minutes, then killed for memory
            "--exact needs more than its budget of 3,000,000 branches",
        ),  # counted, after about 27,000 of them
        (["--exact", "--horizon", "12"], "--exact enumerates V^horizon = 5^12 sequences"),  # used to be a MemoryError
        (["--decoder", "tree", "--tree", "dynamic:2:3:5", "--verifier", "rrs"], "needs the target-only verifier"),
        (["--decoder", "tree", "--tree", "dynamic:2:3:50"], "budget must be an integer in [2, 11], got 50"),
        (
            ["--decoder", "tree", "--tree", "dynamic:5:2:6", "--vocabulary", "4", "--exact"],  # used to be a traceback
            "5 top-k candidates per node exceed the vocabulary of 4 tokens",
        ),
    ],
)
def test_audit_cli_bad_arguments_exit_2_with_one_line(capsys, argv, fragment):
    assert main(["audit", *argv]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and fragment in error and error.startswith("spectheory audit: error:")


def test_audit_cli_help_against_the_registries(capsys):
    """The help lists every tiny draft and every mutant, read from the registries that own them."""
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = "".join(capsys.readouterr().out.split())  # help wraps lines, also at hyphens
    assert all(name in text for name in draft_names(TINY)) and all(bug.name in text for bug in MUTANTS + TREE_MUTANTS)
    assert mutant("one-uniform").name == "one-uniform"


def test_audit_cli_exact_batch_against_batch_min_mutant(capsys):
    """--exact batch: whole runs of two rows (V = 2, two tokens); the reference passes, batch-minimum rollback fails."""
    common = [
        "audit",
        "--exact",
        "batch",
        "--target",
        "order0",
        "--draft",
        "close",
        "--vocabulary",
        "2",
        "--prompt",
        "0",
        "1",
        "--gamma",
        "1",
        "--horizon",
        "2",
        "--json",
    ]
    assert main(common) == 0
    assert json.loads(capsys.readouterr().out)["method"] == "batch"
    assert main(common + ["--mutant", "batch-min-rollback"]) == 1
    assert json.loads(capsys.readouterr().out)["max_abs_difference"] > 1e-3


def test_audit_cli_shipped_prompt_text_against_its_ids(capsys):
    """--prompt-text is tokenized into the prompt (it used to be refused as "--prompt and --prompt-text")."""
    assert main(["audit", "--target", "shipped", "--prompt-text", "def ", "--n", "50", "--horizon", "1", "--json"]) == 0
    assert "prompt [70, 71, 72, 2]" in json.loads(capsys.readouterr().out)["decoder"]


@pytest.mark.parametrize("verifier", ("target-only", "rrs", "rrs-without-replacement", "kseq"))
def test_audit_cli_tree_decoder_exact_against_target(capsys, verifier):
    """--decoder tree --exact: the prefix programme over a tree with a second level passes for every verifier."""
    assert (
        main(
            [
                "audit",
                "--decoder",
                "tree",
                "--exact",
                "--verifier",
                verifier,
                "--vocabulary",
                "4",
                "--horizon",
                "3",
                "--tree",
                "parents:-1,0,0,1",
                "--json",
            ]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["max_abs_difference"] < TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, code",
    [
        *[
            (
                [
                    "--decoder",
                    "tree",
                    "--verifier",
                    verifier,
                    "--draft",
                    "close",
                    "--tree",
                    "kary:2:2",
                    "--horizon",
                    "2",
                ],
                0,
            )
            for verifier in TREE_VERIFIERS
        ],
        *[(["--mutant", bug.name], 1) for bug in TREE_MUTANTS],
    ],
)
def test_exact_tree_audits_within_their_budget(capsys, argv, code):
    """Every tree verifier's exact audit with the close draft on kary:2:2 passes, and every tree mutant's bare
    `audit --exact --mutant NAME` fails, within the branch budget (up to 767,275 branches, kseq: 43-52 s on 2 cores)."""
    assert main(["audit", "--exact", *argv]) == code
    assert ("PASS" if code == 0 else "FAIL") in capsys.readouterr().out


def _tree_audit_flags(planted, *, exact: bool) -> list:
    """The flags under which ``planted``'s bug shows: its verifier and temperature, and its audit's models, tree and
    horizon (the exact audit enumerates the tiny target: flat positions show statistically on the shipped one)."""
    return [
        "audit",
        "--decoder",
        "tree",
        "--verifier",
        planted.verifier,
        "--temperature",
        str(planted.shows_with.temperature),
        "--vocabulary",
        "4",
        "--json",
        *(tiny_target_flags(planted.audit) + ["--exact"] if exact else list(planted.audit) + ["--n", "20000"]),
    ]


def _audited(capsys, argv: list) -> tuple:
    """(exit status, the JSON's max_abs_difference or p_value) of `spectheory audit ARGV`."""
    status, document = main(argv), json.loads(capsys.readouterr().out)
    return status, document.get("max_abs_difference", document.get("p_value"))


#: The tree mutant whose catch through the CLI (exact and statistical), and the reference's pass under its setting, run
#: by default.
CLI_TREE_MUTANT = "tree-candidates-vs-draft"


def _cli_cases(names) -> list:
    """``CLI_TREE_MUTANT`` by default, the others behind slow: tests/decoders/test_tree_decoder.py catches every tree
    mutant exactly beside the reference's pass, and the path through the CLI is the same for each (docs/project.md)."""
    return [name if name == CLI_TREE_MUTANT else pytest.param(name, marks=pytest.mark.slow) for name in names]


@pytest.mark.parametrize("name", _cli_cases(m.name for m in TREE_MUTANTS))
def test_audit_cli_tree_mutants_fail_exact(capsys, name):
    """Each planted tree bug fails the exact audit (> 1e-3 from the target's law) under its mutant's audit flags; the
    reference passes the same audits (below)."""
    status, difference = _audited(capsys, _tree_audit_flags(tree_mutant(name), exact=True) + ["--mutant", name])
    assert status == 1 and difference > 1e-3


@pytest.mark.parametrize("name", _cli_cases(m.name for m in TREE_MUTANTS))
def test_audit_cli_tree_mutants_fail_statistical(capsys, name):
    """Each planted tree bug fails the statistical audit (n = 20,000, p < 1e-4) under its mutant's audit flags."""
    status, p_value = _audited(capsys, _tree_audit_flags(tree_mutant(name), exact=False) + ["--mutant", name])
    assert status == 1 and p_value < 1e-4


#: One tree mutant for each distinct setting the mutants above are audited under: the reference's runs there.
_TREE_SETTINGS = {(m.verifier, m.shows_with.temperature, m.audit): m.name for m in reversed(TREE_MUTANTS)}


@pytest.mark.parametrize("name", _cli_cases(_TREE_SETTINGS.values()))
def test_reference_tree_passes_each_mutant_setting_against_target(capsys, name):
    """The negative control of the tree mutants: the reference tree decoder passes the exact audit (within 1e-9)
    under each setting a mutant is caught with, so a caught mutant is caught for its bug."""
    status, difference = _audited(capsys, _tree_audit_flags(tree_mutant(name), exact=True))
    assert status == 0 and difference < TOLERANCE


@pytest.mark.parametrize("name", _cli_cases(name for name in _TREE_SETTINGS.values() if name != "tree-flat-positions"))
def test_reference_tree_passes_statistical_audit_against_target(capsys, name):
    """The statistical audit's negative control under each mutant's setting: the reference passes (p >= 0.01: its
    false-positive probability is the level, 0.01)."""
    status, p_value = _audited(capsys, _tree_audit_flags(tree_mutant(name), exact=False))
    assert status == 0 and p_value >= 0.01


@pytest.mark.parametrize("policy", POLICIES)
def test_audit_cli_policy_exact_against_target(capsys, policy):
    """--policy NAME --exact: every draft-length policy, capped at --gamma, passes the prefix programme."""
    assert main(["audit", "--exact", "dp", "--policy", policy, "--gamma", "2", "--horizon", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_difference"] < TOLERANCE


def test_audit_cli_policy_refused_outside_the_token_verifier():
    with pytest.raises(ValueError, match="--policy applies to the speculative decoder with the token verifier"):
        AuditRequest(policy="confidence", verifier="block")


def test_failed_audit_says_whether_a_marginal_or_the_dependence_fails(capsys):
    """A mutant that biases each token's law (q / p instead of p / q) is named at a position with the tokens in
    excess; one whose draws share one uniform (each marginal right, the joint law wrong) is named as dependence,
    with the strongest pair, not as a position whose uniformity passed."""
    assert main(["audit", "--mutant", "ratio-q-over-p", "--n", "20000"]) == 1  # --n: the statistical audit
    assert "deviates most at new token" in capsys.readouterr().out
    assert main(["audit", "--mutant", "one-uniform", "--n", "20000"]) == 1
    out = capsys.readouterr().out
    assert "every new token's own law passes" in out and "strongest pair: new tokens" in out
    assert "deviates most at" not in out
