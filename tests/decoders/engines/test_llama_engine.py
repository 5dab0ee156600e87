"""llama.cpp through llama-cpp-python (engines): greedy differences against their diagnosis, the
recorded counters against the emitted tokens, and the OpenAI-compatible client against llama-cpp-python's
server started here on 127.0.0.1 (same greedy text as in-process, two-sample verdicts, a server killed mid-run).
CI builds llama-cpp-python (.ci/install), so there these tests run; elsewhere they skip when it is missing."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

try:
    import llama_cpp  # noqa: F401
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("llama-cpp-python is not installed (bash .ci/install builds it)", allow_module_level=True)

from decoders.audit.engines.greedy import batch_shape_difference, diagnose_difference, greedy_checks
from decoders.audit.engines.request import ENGINE_PROMPT
from decoders.audit.engines.sampled import SECOND_SIDE_SEED, compare_runs
from decoders.engines import open_engine
from decoders.engines.base import END, EngineSampling
from decoders.engines.openai import OpenAIEngine
from decoders.models.gguf import real_model_path


@pytest.fixture(scope="module")
def engine():
    return open_engine("llama-cpp")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_server(*extra) -> tuple:
    """llama-cpp-python's server on SmolLM2 at a free port of 127.0.0.1, answering: (url, process)."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(real_model_path("smollm2")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "512",
            "--n_threads",
            "1",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(960):  # up to four minutes: a start of about 2 s, on a machine that may be busy
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).close()
            return url, process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError("llama-cpp-python's server exited while starting") from None
            time.sleep(0.25)
    process.kill()
    raise RuntimeError("llama-cpp-python's server did not answer within four minutes")


@pytest.fixture(scope="module")
def server():
    url, process = _start_server()
    yield url
    process.terminate()
    process.wait(timeout=30)


def test_greedy_differences_against_their_diagnosis(engine):
    """Gamma 4's greedy tokens equal plain greedy decoding's, or differ where the plain token is its own path's
    argmax and the two paths' orders of the two tokens are opposite (batch-shape numerics). Control: a token the
    engine ranks last, planted as the speculative token, is diagnosed as a bug."""
    plain, checks = greedy_checks(engine, ENGINE_PROMPT, 32, [4])
    for check in checks:
        assert check.equal or (
            check.diagnosis.margin_one_token >= 0 > check.diagnosis.margin_two_tokens
            and check.diagnosis.verdict.startswith("batch-shape")
        ), check
    ids = engine.tokenize(ENGINE_PROMPT)
    worst = int(np.argmin(engine.logits_after([ids + list(plain[:5])])))
    planted = plain[:5] + (worst,) + plain[6:]
    assert diagnose_difference(engine.logits_after, ids, plain, planted, 5).verdict.startswith("unexplained")


def test_batch_shape_difference_against_one_token_calls(engine):
    """Evaluating in chunks of one token on both sides gives identical logits (the control: the measurement
    compares like with like); chunks of five move llama.cpp's logits (measured, not asserted beyond > 0)."""
    ids = engine.tokenize(ENGINE_PROMPT)
    tokens = list(engine.generate(ENGINE_PROMPT, 1, 12, EngineSampling(0.0)).rows[0])
    same = batch_shape_difference(engine, ids, tokens, chunk=1)
    assert same.tv_max == 0.0 and max(same.max_logit_difference) == 0.0 and same.positions == 12
    assert batch_shape_difference(engine, ids, tokens, chunk=5).tv_max > 0.0


def test_counters_against_emitted_tokens(engine):
    """Each round emits its accepted drafts and one token of the target's: rounds + accepted covers the tokens
    after the first, but for the last round the horizon cut off."""
    ids = engine.tokenize(ENGINE_PROMPT)
    tokens, counters, _, _ = engine.generate_ids(ids, 40, EngineSampling(0.0), speculate=4)
    rounds = counters["rounds"]
    assert rounds == counters["num_drafts"] + counters["rounds_without_draft"]
    assert sum(counters["proposal_length_counts"]) == rounds
    assert counters["num_accepted_tokens"] <= counters["num_draft_tokens"] <= 4 * counters["num_drafts"]
    assert len(tokens) - 1 - 5 <= rounds + counters["num_accepted_tokens"] <= len(tokens) - 1
    assert counters["accepted_per_position"][0] <= counters["reached_per_position"][0] == counters["num_drafts"]


def test_openai_client_against_in_process_engine(engine, server):
    """The server's greedy text pieces are the in-process engine's greedy ids, each detokenized."""
    client = OpenAIEngine(server)
    served = client.generate(ENGINE_PROMPT, 1, 12, EngineSampling(0.0)).rows[0]
    ids = engine.generate(ENGINE_PROMPT, 1, 12, EngineSampling(0.0)).rows[0]
    llama = engine.llama(False)
    assert served == tuple(END if t == END else llama.detokenize([t]).decode("utf-8", errors="ignore") for t in ids)


@pytest.mark.slow  # the same check through llama-server runs by default (test_llama_server.py); the client: below
def test_server_two_sample_against_planted_temperature(server):
    """The server against itself at T = 1 (60 samples of 2 tokens a side, disjoint seeds) passes (false-positive
    probability at most the level, 0.01); asked for T = 0.3 on one side, it fails."""
    client, t1 = OpenAIEngine(server), EngineSampling(1.0)
    a = client.generate(ENGINE_PROMPT, 60, 2, t1, seed=0)
    assert compare_runs(a, client.generate(ENGINE_PROMPT, 60, 2, t1, seed=SECOND_SIDE_SEED), 0.01).passed
    assert not compare_runs(
        a, client.generate(ENGINE_PROMPT, 60, 2, EngineSampling(0.3), seed=SECOND_SIDE_SEED), 0.01
    ).passed


def test_server_killed_mid_run_against_lost_count():
    """A server killed after 5 of 30 samples: every sample is either returned or counted lost, and some are lost."""
    url, process = _start_server()
    client, done = OpenAIEngine(url, concurrency=2, retries=1, timeout=60), []

    def progress(count):
        done.append(count)
        if len(done) == 5:
            process.send_signal(signal.SIGKILL)

    run = client.generate(ENGINE_PROMPT, 30, 2, EngineSampling(1.0), progress=progress)
    process.wait(timeout=30)
    assert len(run.rows) + run.lost == 30 and run.lost > 0 and len(run.rows) >= 5, (len(run.rows), run.lost)


def test_diverge_engine_against_our_greedy(capsys):
    """`spectheory diverge --engine llama-cpp` draws the engine's greedy tokens (plain here) and compares them with
    our float32 greedy decoding of the same GGUF: they agree, or part where the target's margin is no bug."""
    from command import run

    status, out, err = run(
        capsys,
        "diverge",
        "--engine",
        "llama-cpp",
        "--speculate",
        "0",
        "--max-new-tokens",
        "16",
        "--prompt-text",
        "Write a Python function that adds two numbers.",
        "--json",
    )
    found = json.loads(out)
    assert status == 0 and found["compared"] == 16 and not found["verdict"].startswith("bug"), found


@pytest.mark.slow  # `bench --engine` end to end: test_llama_server.py; the Spec-Bench presets: test_spec_bench.py
def test_engine_spec_bench_against_plain_decoding(tmp_path, capsys):
    """``bench --engine llama-cpp --task spec-bench:qa``: one question, prompt lookup at gamma 2 against the
    engine's own plain decoding; its greedy text equals plain decoding's and the JSON holds the category."""
    from command import run

    out = tmp_path / "engine.json"
    status, printed, _ = run(
        capsys,
        "bench",
        "--engine",
        "llama-cpp",
        "--task",
        "spec-bench:qa",
        "--gammas",
        "2",
        "--prompts",
        "1",
        "--max-new-tokens",
        "8",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--out",
        str(out),
    )
    assert status == 0 and "Question Answering" in printed and printed.rstrip().endswith("equal")
    document = json.loads(out.read_text())
    assert list(document["categories"]) == ["qa"]
    assert document["categories"]["qa"]["rows"][0]["greedy_equal_to_plain"] is True


@pytest.mark.parametrize(
    "value, expected", [("1", 1), ("3", 3), ("", os.cpu_count()), ("0", os.cpu_count()), ("two", os.cpu_count())]
)
def test_default_threads_against_omp_num_threads(monkeypatch, value, expected):
    """The in-process engine's threads: OMP_NUM_THREADS where it is a positive integer, else every core."""
    from decoders.engines.llama_cpp import default_threads

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert default_threads() == expected
