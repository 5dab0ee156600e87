"""``spectheory audit --samples``: another engine's continuations against the target's exact law, and every
malformed samples file as one line naming its line. The sampled files are drawn here with our own decoder
(seeded); the audit's false-positive probability is its level, 0.01, and its seed is fixed."""

import json

import pytest
import torch

from cli import main
from decoders.audit.setups import tiny_target
from decoders.autoregressive import generate_autoregressive
from decoders.grammar import GrammarSpec
from decoders.randomness import seeded
from decoders.sampling import Sampling

PROMPT = [1, 2]
TARGET = ["--target", "tabular", "--vocabulary", "5"]  # float32 tables, the audit's own tiny target


def write_samples(path, temperature, n=3000, horizon=3, read_as=PROMPT, sampling=None):
    """Samples drawn after ``read_as`` (the prompt as the engine read it) at ``temperature`` (or under ``sampling``),
    written as continuations of PROMPT."""
    target = tiny_target("tabular", 5, dtype=torch.float32)
    tokens = generate_autoregressive(
        target, [read_as] * n, max_new_tokens=horizon, randomness=seeded(7), sampling=sampling or Sampling(temperature)
    ).tokens
    path.write_text("".join(json.dumps({"prompt": PROMPT, "tokens": list(row)}) + "\n" for row in tokens))
    return path


def test_engine_samples_against_target_law(capsys, tmp_path):
    """Samples drawn at the audited temperature pass; the same engine run at T = 0.5 fails (the control)."""
    assert main(["audit", "--samples", str(write_samples(tmp_path / "right.jsonl", 1.0)), *TARGET, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["passed"] and document["n"] == 3000 and document["horizon"] == 3
    assert "samples of" in document["decoder"]
    assert main(["audit", "--samples", str(write_samples(tmp_path / "cold.jsonl", 0.5)), *TARGET]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_engine_samples_under_penalty_and_grammar_against_target_law(capsys, tmp_path):
    """Samples drawn under a repetition penalty and a regex, rows that stopped written short as an engine returns
    them, pass when the flags say so; the same file audited as if drawn without the penalty fails (the flags name the
    law the engine was asked for)."""
    sampling = Sampling(1.0, repetition_penalty=2.0, stop=(2,), grammar=GrammarSpec("regex", "[abd]+")).bound(None, 5)
    path = str(write_samples(tmp_path / "penalised.jsonl", 1.0, sampling=sampling))
    flags = ["--regex", "[abd]+", "--stop", "2"]
    assert main(["audit", "--samples", path, *TARGET, *flags, "--repetition-penalty", "2"]) == 0
    assert main(["audit", "--samples", path, *TARGET, *flags]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_failed_audit_names_where_against_a_planted_prompt_misread(capsys, tmp_path):
    """An engine that read the prompt's first token wrongly (a 0 for the 1) draws its first token from another
    law (the tiny target reads two tokens back, so later tokens follow their own prefix); the failed audit names
    new token 0, the token drawn most in excess, and the prompt hint. The control, samples at the wrong
    temperature, deviates at every position: no prompt hint."""
    misread = write_samples(tmp_path / "misread.jsonl", 1.0, read_as=[0, 2])
    assert main(["audit", "--samples", str(misread), *TARGET, "--json"]) == 1
    deviation = json.loads(capsys.readouterr().out)["deviation"]
    assert deviation["position"] == 0 and deviation["first_position_only"]
    token, observed, expected = deviation["tokens"][0]
    assert observed - expected > 100  # 3000 samples: an excess of over 100 draws of one token
    assert main(["audit", "--samples", str(misread), *TARGET]) == 1
    out = capsys.readouterr().out
    assert "deviates most at new token 0" in out and f"token {token} {observed} times" in out
    assert "read the prompt differently" in out
    assert main(["audit", "--samples", str(write_samples(tmp_path / "cold.jsonl", 0.5)), *TARGET, "--json"]) == 1
    assert not json.loads(capsys.readouterr().out)["deviation"]["first_position_only"]


LINE = json.dumps({"prompt": PROMPT, "tokens": [0, 1, 2]})


@pytest.mark.parametrize(
    "lines, fragment",
    [
        ([LINE, "{not json", LINE], "line 2: not a JSON object"),
        (
            [LINE, json.dumps({"prompt": [1, 3], "tokens": [0, 1, 2]})],
            "line 2: its prompt differs from the first line's",
        ),
        (
            [LINE, json.dumps({"prompt": PROMPT, "tokens": [0, 9, 2]})],
            "line 2: 'tokens' holds id 9, outside the target's vocabulary [0, 5)",
        ),
        ([LINE, json.dumps({"prompt": PROMPT, "tokens": [0, 1]})], "line 2: 2 tokens where the longest line has 3"),
        ([LINE, json.dumps({"prompt": PROMPT, "tokens": [0, 1.0, 2]})], "line 2: 'tokens' holds 1.0, not an integer"),
        (
            [json.dumps({"prompt": PROMPT, "tokens": [0], "seed": 1})],
            "line 1: each line must be an object with exactly",
        ),
        ([LINE, "", "[1, 2]"], "line 3: each line must be an object"),
        ([LINE], "holds 1 sample lines: the audit needs at least 2"),
        ([LINE, json.dumps({"prompt": PROMPT, "tokens": [0, float("nan"), 2]})], "line 2: not a JSON object"),
    ],
)
def test_malformed_samples_exit_2_naming_the_line(capsys, tmp_path, lines, fragment):
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["audit", "--samples", str(path), *TARGET]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and fragment in error, error


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--n", "100"], "--samples takes n and the horizon from the file"),
        (["--mutant", "one-uniform"], "--exact and --mutant do not apply"),
        (["--target", "gpt2"], "or a Hugging Face model directory, got 'gpt2' (nothing is downloaded)"),
    ],
)
def test_samples_flags_exit_2(capsys, tmp_path, argv, fragment):
    path = tmp_path / "samples.jsonl"
    path.write_text(f"{LINE}\n{LINE}\n")
    assert main(["audit", "--samples", str(path), *argv]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and fragment in error, error
    assert main(["audit", "--samples", str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot be read (FileNotFoundError" in capsys.readouterr().err
