"""`spectheory audit --samples A --against B` (two files drawn anywhere) against the two-sample test's verdicts,
and the engine flags' error contract (one line, exit 2). Files are drawn by the Markov engine stand-in with
disjoint seeds; the pass case's false-positive probability is the level, 0.01."""

import json

import pytest
from command import run
from engine_standin import MarkovEngine

from decoders.audit.engines.sampled import SECOND_SIDE_SEED
from decoders.audit.samples import write_rows
from decoders.engines.base import EngineSampling


def _file(path, engine, seed, n=5000):
    write_rows(path, "p", engine.generate("p", n, 4, EngineSampling(1.0), seed=seed).rows)
    return str(path)


def test_two_files_against_two_sample_verdicts(tmp_path, capsys):
    """Same law: PASS, exit 0; a side sampled at T = 0.9 when asked for T = 1 (the planted bug): FAIL, exit 1.
    The JSON written holds the verdict and both samples."""
    a = _file(tmp_path / "a.jsonl", MarkovEngine(), 0)
    b = _file(tmp_path / "b.jsonl", MarkovEngine(), SECOND_SIDE_SEED)
    bug = _file(tmp_path / "bug.jsonl", MarkovEngine(applied_temperature=0.9), SECOND_SIDE_SEED)
    status, out, err = run(capsys, "audit", "--samples", a, "--against", b, "--out", str(tmp_path / "v.json"))
    assert status == 0 and "PASS" in out and err == "", (out, err)
    document = json.loads((tmp_path / "v.json").read_text())
    assert document["passed"] and len(document["rows_a"]) == len(document["rows_b"]) == 5000
    status, out, err = run(capsys, "audit", "--samples", a, "--against", bug)
    assert status == 1 and "FAIL" in out, out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--against", "plain"], "--against compares an engine (--engine) or a samples file"),
        (
            ["--engine", "sglang"],
            "engine must be one of llama-cpp, llama-server[:OPTIONS], vllm[:OPTIONS] or an http(s):// "
            "URL, got 'sglang'",
        ),
        (["--engine", "vllm:method=eagle3"], "vllm method eagle3 needs an EAGLE-3 head"),
        (["--engine", "http://127.0.0.1:9", "--temperature", "1"], "does not answer completions"),
        (
            ["--engine", "llama-server", "--against", "http://127.0.0.1:9", "--temperature", "1"],
            "does not answer completions",
        ),
        (["--engine", "llama-cpp", "--speculate", "0"], "speculate must be"),
        (["--engine", "llama-cpp", "--exact"], "drop --exact"),
        (
            ["--engine", "http://127.0.0.1:9", "--speculate", "4", "--temperature", "1"],
            "speculates by its own settings",
        ),
        (["--engine", "http://127.0.0.1:9", "--temperature", "0"], "--temperature 0 audits greedy equality"),
        (["--engine", "llama-cpp", "--target", "README.md"], "is not one"),
        (
            ["--engine", "llama-cpp", "--against", "model", "--repeat-penalty", "1.3"],
            "needs a law our sampler computes",
        ),
        (["--engine", "llama-server:spec=medusa", "--temperature", "1"], "llama-server spec must be one of"),
        (["--engine", "llama-server:spec=draft-simple", "--temperature", "1"], "needs draft=FILE.gguf"),
        (["--engine", "llama-server:np=2,completions=4", "--temperature", "1"], "completions must be"),
    ],
)
def test_engine_flags_against_error_contract(argv, fragment, capsys):
    status, out, err = run(capsys, "audit", *argv)
    assert status == 2 and err.count("\n") == 1 and fragment in err, err


def test_samples_file_of_another_prompt_against_error_contract(tmp_path, monkeypatch):
    """`--engine E --against B.jsonl`: a file that continues another prompt is refused before the engine draws a
    sample (the error names both prompts); the same file with its own prompt is audited (the control)."""
    from decoders.audit.engines.request import EngineAuditRequest, run_engine_audit

    engine, drawn = MarkovEngine(), []
    b = _file(tmp_path / "b.jsonl", engine, SECOND_SIDE_SEED, n=200)  # prompt "p"
    monkeypatch.setattr(EngineAuditRequest, "open", lambda self, spec: engine)
    draw = engine.generate
    monkeypatch.setattr(engine, "generate", lambda *args, **kwargs: drawn.append(args) or draw(*args, **kwargs))
    with pytest.raises(ValueError, match="continues the prompt 'p', not --prompt-text 'q'"):
        run_engine_audit(EngineAuditRequest("stand-in", against=b, sampling=EngineSampling(1.0), n=200, prompt="q"))
    assert drawn == []
    document = run_engine_audit(
        EngineAuditRequest("stand-in", against=b, sampling=EngineSampling(1.0), n=200, prompt="p")
    )[0]
    assert len(drawn) == 1 and document.n_a == document.n_b == 200


def test_dead_url_against_error_contract_before_any_sample(monkeypatch):
    """`--engine E --against URL` with nothing at URL: refused before E is opened (no server started) or draws a
    sample (counted, no clock); the control, --against plain, opens E and draws both sides."""
    from decoders.audit.engines.request import EngineAuditRequest, run_engine_audit

    engine, opened, drawn = MarkovEngine(), [], []
    real_open = EngineAuditRequest.open
    monkeypatch.setattr(
        EngineAuditRequest,
        "open",
        lambda self, spec: opened.append(spec) or (engine if spec == "stand-in" else real_open(self, spec)),
    )
    draw = engine.generate
    monkeypatch.setattr(engine, "generate", lambda *args, **kwargs: drawn.append(args) or draw(*args, **kwargs))
    with pytest.raises(ValueError, match="does not answer completions"):
        run_engine_audit(
            EngineAuditRequest("stand-in", against="http://127.0.0.1:9", sampling=EngineSampling(1.0), n=200)
        )
    assert opened == ["http://127.0.0.1:9"] and drawn == []
    run_engine_audit(EngineAuditRequest("stand-in", against="plain", sampling=EngineSampling(1.0), n=200))
    assert opened[1:] == ["stand-in"] and len(drawn) == 2
