"""`spectheory gamma --from-metrics`: engines' counters against the theory (docs/metrics.md). A vLLM Prometheus
dump is written by prometheus_client itself from a simulated run of known acceptance; SGLang's and llama.cpp's
JSON carry the counters their servers return (field names copied from their sources)."""

import json

import numpy as np
import pytest
from command import run
from prometheus_client import CollectorRegistry, Counter, generate_latest

from spectheory.calculator import gamma_table
from spectheory.metrics import (
    EngineCounts,
    conditional_from_per_position,
    estimate_alpha,
    mean_acceptance_length_from_per_position,
    per_position_from_conditional,
)

ALPHA, K, DRAFTS, C = 0.7, 4, 5000, 0.1


def simulated_positions(seed: int, alpha: float = ALPHA, k: int = K, drafts: int = DRAFTS) -> np.ndarray:
    """Per position, the rounds whose first i + 1 drafts were accepted, each accepted with ``alpha``."""
    accepted = np.random.default_rng(seed).random((drafts, k)) < alpha  # [drafts, k]
    return np.cumprod(accepted, axis=1).sum(axis=0)


def vllm_dump(drafts, draft_tokens, accepted, per_position) -> bytes:
    """The Prometheus text vLLM serves, with its metric names and labels, from prometheus_client."""
    registry, labels = CollectorRegistry(), {"model_name": "target", "engine": "0"}
    for name, value in (("num_drafts", drafts), ("num_draft_tokens", draft_tokens), ("num_accepted_tokens", accepted)):
        Counter(f"vllm:spec_decode_{name}", name, list(labels), registry=registry).labels(**labels).inc(value)
    positions = Counter(
        "vllm:spec_decode_num_accepted_tokens_per_pos", "per position", [*labels, "position"], registry=registry
    )
    for i, value in enumerate(per_position):
        positions.labels(**labels, position=str(i)).inc(value)
    return generate_latest(registry)


def test_conversions_against_counts():
    """Unconditional and conditional rates convert into each other; the mean acceptance length is one plus the
    unconditional rates' sum and the acceptance rate that sum over k."""
    per_position = simulated_positions(1)
    counts = EngineCounts("vllm", DRAFTS, DRAFTS * K, float(per_position.sum()), tuple(map(float, per_position)))
    unconditional = counts.per_position_acceptance_rate
    assert per_position_from_conditional(conditional_from_per_position(unconditional)) == pytest.approx(unconditional)
    assert mean_acceptance_length_from_per_position(unconditional) == pytest.approx(counts.mean_acceptance_length)
    assert counts.acceptance_rate == pytest.approx((counts.mean_acceptance_length - 1) / K)
    assert conditional_from_per_position([0.5, 0.0, 0.0]) == (0.5, 0.0, 0.0)  # no round reached position 2


def test_alpha_standard_error_against_simulation():
    """Over 200 simulated runs (seeds 100-299) alpha lies within 2 of its standard errors of the truth in 92-98%
    of them (95% expected; the band is 2 binomial SDs of the coverage, so a correct estimator leaves it with
    probability about 5%, and these seeds are fixed). Control: an error half as large covers far less."""
    z = []
    for seed in range(100, 300):
        positions = tuple(map(float, simulated_positions(seed)))
        estimate = estimate_alpha(EngineCounts("vllm", DRAFTS, DRAFTS * K, sum(positions), positions))
        z.append(abs(estimate.alpha - ALPHA) / estimate.standard_error)
    z = np.array(z)
    assert 0.92 <= np.mean(z <= 2) <= 0.98
    assert np.mean(z <= 1) < 0.80


def test_vllm_dump_against_the_calculator(tmp_path, capsys):
    """alpha from a simulated dump lies within 3 SE of the alpha simulated (a fresh seed misses with probability
    0.3%; this one is fixed) and the recommended gamma is the calculator's at that alpha. Negative control:
    reading vLLM's unconditional per-position rates as conditional ones (averaging them) misses by > 10 SE."""
    per_position = simulated_positions(0)
    path = tmp_path / "metrics.txt"
    path.write_bytes(vllm_dump(DRAFTS, DRAFTS * K, per_position.sum(), per_position))
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path), "--c", str(C), "--json")
    assert status == 0
    answer = json.loads(out)
    assert abs(answer["alpha"] - ALPHA) <= 3 * answer["alpha_standard_error"]
    assert answer["engine_gamma"] == K
    assert answer["recommended_gamma"] == gamma_table(ALPHA, C, C, 16).optimal_gamma
    assert answer["metrics"]["per_position_acceptance_rate"] == pytest.approx(per_position / DRAFTS)
    misread = float(np.mean(per_position / DRAFTS))
    assert abs(misread - ALPHA) > 10 * answer["alpha_standard_error"]


def test_draft_cost_caveat_against_the_given_cost(tmp_path, capsys):
    """Without --c (c = 0: every draft token free) the answer says its gamma ignores the draft's cost; with --c it
    does not (the control)."""
    per_position = simulated_positions(2, alpha=0.9, k=2)
    path = tmp_path / "metrics.txt"
    path.write_bytes(vllm_dump(DRAFTS, DRAFTS * 2, per_position.sum(), per_position))
    caveat = "c = 0: no draft cost was given"
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path))
    assert status == 0 and caveat in out
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path), "--c", "0.05")
    assert status == 0 and caveat not in out


def test_vllm_dump_text(tmp_path, capsys):
    """The plain answer names every metric and the gain of moving the engine's k to the optimum."""
    per_position = simulated_positions(2, alpha=0.9, k=2)
    path = tmp_path / "metrics.txt"
    path.write_bytes(vllm_dump(DRAFTS, DRAFTS * 2, per_position.sum(), per_position))
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path), "--c", "0.05")
    assert status == 0
    for name in (
        "acceptance_rate",
        "mean_acceptance_length",
        "per_position_acceptance_rate",
        "conditional_acceptance_rate",
        "alpha = 0.89",
        "the engine drafts 2 per round",
    ):
        assert name in out, name


@pytest.mark.parametrize(
    "document, engine",
    [
        (
            {
                "meta_info": {
                    "spec_verify_ct": 100,
                    "spec_draft_token_num": 300,
                    "spec_accept_token_num": 150,
                    "completion_tokens": 250,
                }
            },
            "sglang",
        ),
        ({"timings": {"predicted_n": 250, "draft_n": 300, "draft_n_accepted": 150}}, "llama.cpp"),
    ],
)
def test_json_responses_against_eq1(tmp_path, capsys, document, engine):
    """SGLang's and llama.cpp's counters: 100 rounds of 3 drafts, 150 accepted, so 2.5 tokens per round; alpha
    is Eq. 1's inverse at gamma 3."""
    path = tmp_path / "response.json"
    path.write_text(json.dumps(document))
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path), "--json")
    assert status == 0
    answer = json.loads(out)
    assert answer["metrics"]["engine"] == engine
    assert answer["metrics"]["mean_acceptance_length"] == pytest.approx(2.5)
    assert answer["engine_gamma"] == 3
    alpha = answer["alpha"]
    assert (1 - alpha**4) / (1 - alpha) == pytest.approx(2.5)
    estimate = estimate_alpha(EngineCounts("sglang", 100, 300, 150))
    assert 0 < estimate.standard_error < 0.1


def test_llama_cpp_rounds_without_drafts(tmp_path, capsys):
    """llama.cpp counts every decoding step as a round, drafted or not: 220 rounds that drafted 50 tokens are
    valid counters (an earlier check refused them), answered at k = 1 and marked approximate."""
    path = tmp_path / "response.json"
    path.write_text(json.dumps({"timings": {"predicted_n": 250, "draft_n": 50, "draft_n_accepted": 30}}))
    status, out, _ = run(capsys, "gamma", "--from-metrics", str(path), "--json")
    assert status == 0
    answer = json.loads(out)
    assert answer["metrics"]["drafts"] == 220 and answer["metrics"]["acceptance_rate"] == pytest.approx(0.6)
    assert "approximate" in answer["alpha_method"]


@pytest.mark.parametrize(
    "counts, message",
    [
        ((100, 400, 500, (90, 80, 70, 60)), "accepted tokens 500 > drafted tokens 400"),
        ((100, 400, 250, (50, 60, 70, 70)), "position 1 accepted 60 > position 0 accepted 50"),
        ((100, 400, 200, (90, 80, 70, 60)), "per-position accepted counts sum to 300"),
        ((0, 0, 0, ()), "no drafts"),
    ],
)
def test_contradicting_counters_exit_2(tmp_path, capsys, counts, message):
    drafts, draft_tokens, accepted, per_position = counts
    path = tmp_path / "metrics.txt"
    path.write_bytes(vllm_dump(drafts, draft_tokens, accepted, per_position))
    status, out, err = run(capsys, "gamma", "--from-metrics", str(path))
    assert status == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("not a metrics file at all {", "not a Prometheus text dump"),
        ("# HELP up up\n# TYPE up gauge\nup 1\n", "no vllm:spec_decode_num_drafts counter"),
        ('{"choices": []}', "neither SGLang's meta_info"),
        ('{"meta_info": {"spec_verify_ct": 3}}', "no spec_draft_token_num, spec_accept_token_num"),
    ],
)
def test_foreign_files_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "file"
    path.write_text(text)
    status, _, err = run(capsys, "gamma", "--from-metrics", str(path))
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    status, _, err = run(capsys, "gamma", "--from-metrics", str(tmp_path / "missing"))
    assert status == 2 and "does not exist" in err


def test_from_metrics_url_against_the_same_dump_as_a_file():
    """--from-metrics URL reads a live /metrics (here a loopback HTTP server serving the shipped vLLM dump) as the
    file gives it; a URL that does not answer is one line, exit 2."""
    import http.server
    import threading
    from pathlib import Path

    from decoders.engines.counters import read_counts_file

    dump = (Path(__file__).resolve().parents[2] / "docs" / "examples" / "vllm_metrics.txt").read_bytes()

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(dump if self.path == "/metrics" else b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        path = Path(__file__).resolve().parents[2] / "docs" / "examples" / "vllm_metrics.txt"
        assert read_counts_file(url) == read_counts_file(str(path)) and read_counts_file(url).drafts == 2000
    finally:
        server.shutdown()
        server.server_close()  # refused from now on, not left to time out in the listen queue
    with pytest.raises(ValueError, match="does not answer"):
        read_counts_file(url)
