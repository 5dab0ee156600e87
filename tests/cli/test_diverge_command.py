"""`spectheory diverge` against planted divergences on the shipped target: an engine token that trails the
argmax by several logits (a bug) and a near-tie made exact by giving two tokens the same output embedding
(numerics)."""

import copy
import json

import pytest
import torch
from command import run

from decoders.autoregressive import generate_autoregressive
from decoders.bench.diverge import BUG_MARGIN, NUMERICS_MARGIN, diagnose, first_divergence
from decoders.bench.inputs import encode_text
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.zoo import load_target

PROMPT_TEXT, NEW, AT = "def main(", 12, 5


@pytest.fixture(scope="module")
def shipped():
    target = load_target()
    prompt = encode_text(None, PROMPT_TEXT)
    greedy = generate_autoregressive(target, [prompt], max_new_tokens=NEW, sampling=GREEDY, randomness=seeded(0))
    return target, prompt, list(greedy.tokens[0])


def _logits_at(target, prompt, tokens, position):
    with torch.no_grad():
        prefix = torch.tensor([prompt + tokens[:position]])
        return target.forward(prefix, target.new_state(1, prefix.shape[1]))[0, -1]


def test_planted_bug_against_greedy(shipped, tmp_path, capsys):
    """The engine's token at AT is the target's least likely: position AT, margin > BUG_MARGIN, verdict bug."""
    target, prompt, greedy = shipped
    planted = list(greedy)
    planted[AT] = int(_logits_at(target, prompt, greedy, AT).argmin())
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"tokens": planted}))
    status, out, _ = run(capsys, "diverge", "--prompt-text", PROMPT_TEXT, "--tokens", str(path), "--json")
    assert status == 0
    found = json.loads(out)
    assert found["position"] == AT and found["theirs"] == planted[AT] and found["ours"] == greedy[AT]
    assert found["margin"] > BUG_MARGIN and found["verdict"].startswith("bug")
    status, out, _ = run(capsys, "diverge", "--prompt-text", PROMPT_TEXT, "--tokens", str(path))
    assert status == 0 and f"first divergence at new token {AT} of {NEW}" in out and "bug:" in out


def test_planted_near_tie_against_greedy(shipped):
    """A copy of the target whose output embedding of another token equals that of the greedy token at AT: the
    two logits tie there, and an engine that took the other one diverges by numerics (margin <= NUMERICS_MARGIN).
    The same engine output against the unmodified target is no near-tie (the control)."""
    target, prompt, greedy = shipped
    tied = copy.deepcopy(target)
    logits = _logits_at(target, prompt, greedy, AT)
    rival = int(torch.topk(logits, 2).indices[1])
    with torch.no_grad():
        tied.head.weight[rival] = tied.head.weight[greedy[AT]]  # tied embeddings: only read after the divergence
    engine = greedy[:AT] + [rival]
    found = diagnose(tied, prompt, greedy, engine)
    assert found.position == AT and abs(found.margin) <= NUMERICS_MARGIN and found.verdict.startswith("numerics")
    control = diagnose(target, prompt, greedy, engine)
    assert control.position == AT and control.margin > NUMERICS_MARGIN


def test_divergence_at_end_of_sequence(shipped):
    """Where our token is the end-of-sequence id, the verdict names the stopping rule (an engine that suppressed
    EOS, as min_new_tokens does), whatever the margin; the control without an eos id judges the margin."""
    target, prompt, greedy = shipped
    engine = greedy[:AT] + [greedy[AT] ^ 1]
    assert diagnose(target, prompt, greedy, engine, eos=greedy[AT]).verdict.startswith("end of sequence")
    assert not diagnose(target, prompt, greedy, engine).verdict.startswith("end of sequence")


def test_identical_and_two_files(shipped, tmp_path, capsys):
    target, prompt, greedy = shipped
    same, other = tmp_path / "same.txt", tmp_path / "other.txt"
    same.write_text(" ".join(map(str, greedy)))
    other.write_text(",".join(map(str, greedy[:3] + [greedy[3] ^ 1] + greedy[4:])))
    status, out, _ = run(capsys, "diverge", "--prompt-text", PROMPT_TEXT, "--tokens", str(same))
    assert status == 0 and f"agree on all {NEW} tokens" in out
    status, out, _ = run(capsys, "diverge", "--prompt-text", PROMPT_TEXT, "--tokens", str(same), str(other), "--json")
    assert status == 0 and json.loads(out)["position"] == 3
    assert first_divergence([1, 2], [1, 2, 3]) is None


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty"),
        ('[1, 2, "x"]', "holds no list of token ids"),
        ("[1, 99999]", "outside the target's vocabulary"),
    ],
)
def test_bad_token_files_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "tokens"
    path.write_text(content)
    status, out, err = run(capsys, "diverge", "--prompt-text", PROMPT_TEXT, "--tokens", str(path))
    assert status == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1
