"""llama.cpp's own server (decoders.engines.llama_server), started here from the build `.ci/install` makes: plain
against plain passes the two-sample audit and a planted temperature fails it; speculation by n-grams and by a truncated
SmolLM2 (`spectheory export-gguf`) keeps greedy decoding token-identical and reports its counters; bad options are
one-line errors. CI builds the server, so there these tests run; elsewhere they skip when it is missing."""

import os

import pytest

from decoders.audit.engines.sampled import SECOND_SIDE_SEED, compare_runs
from decoders.engines import open_engine
from decoders.engines.base import EngineSampling
from decoders.engines.llama_server import ServerOptions, is_built

if not is_built():
    if os.environ.get("CI"):
        raise RuntimeError("llama-server is not built: the test command's set-up (.ci/install) builds it")
    pytest.skip("llama-server is not built (bash .ci/install builds it)", allow_module_level=True)

#: An open chat prompt of 18 tokens: the server evaluates it for every sample (no prompt cache), so short is cheap.
PROMPT = "<|im_start|>user\nTell me something.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def plain():
    engine = open_engine("llama-server:threads=1")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    from decoders.bench.export import export_truncated_gguf
    from decoders.models.gguf import real_model_path

    return export_truncated_gguf(real_model_path("smollm2"), tmp_path_factory.mktemp("draft") / "smollm2-4.gguf", 4)


def test_plain_against_plain_passes_and_planted_temperature_fails(plain):
    """The server against itself at T = 1 (60 samples of 2 tokens a side, disjoint seeds) passes (false-positive
    probability at most the level, 0.01; p 1.0 when written); a second side asked for T = 0.3 fails (p 1.2e-14)."""
    t1 = EngineSampling(1.0)
    a = plain.generate(PROMPT, 60, 2, t1, seed=0)
    assert len(a.rows) == 60 and a.lost == 0 and a.counters == {}
    assert compare_runs(a, plain.generate(PROMPT, 60, 2, t1, seed=SECOND_SIDE_SEED), 0.01).passed
    assert not compare_runs(a, plain.generate(PROMPT, 60, 2, EngineSampling(0.3), seed=SECOND_SIDE_SEED), 0.01).passed


def test_speculation_keeps_greedy_tokens_against_plain_decoding(plain, draft):
    """Greedy decoding drafted by n-grams and by SmolLM2's first 4 blocks (-md) is the plain server's, token for
    token, and the drafting server reports what it drafted (the plain one nothing)."""
    greedy = EngineSampling(0.0)
    reference = plain.generate(PROMPT, 1, 24, greedy).rows
    for spec in ("spec=ngram-simple", f"spec=draft-simple,draft={draft}"):
        engine = open_engine(f"llama-server:{spec},threads=1")
        try:
            run = engine.generate(PROMPT, 1, 24, greedy, speculate=3)
        finally:
            engine.close()
        assert run.rows == reference, spec
        if "draft-simple" in spec:
            assert 0 <= run.counters["num_accepted_tokens"] <= run.counters["num_draft_tokens"] > 0


@pytest.mark.slow  # 8 s of reading GGUF files; the greedy test above shows llama.cpp takes the draft
def test_truncated_draft_against_its_source(draft):
    """export-gguf keeps the first blocks' tensors and the tokenizer byte for byte and drops the rest."""
    from gguf import GGUFReader

    from decoders.models.gguf import real_model_path

    source, written = GGUFReader(real_model_path("smollm2")), GGUFReader(draft)
    tensors = {t.name: t for t in source.tensors}
    assert int(written.fields["llama.block_count"].contents()) == 4 and len(written.tensors) == 2 + 4 * 9
    assert all(bytes(t.data) == bytes(tensors[t.name].data) for t in written.tensors)
    assert written.fields["tokenizer.ggml.tokens"].contents() == source.fields["tokenizer.ggml.tokens"].contents()


@pytest.mark.parametrize(
    "words, message",
    [
        ("spec=draft-simple", "needs draft=FILE.gguf"),
        ("spec=medusa", "spec must be one of"),
        ("np=0", "slots"),
        ("speed=3", "llama-server options are"),
        ("sampling=typical,spec=ngram-simple", "greedy or probabilistic"),
        ("mirostat=3", "mirostat must be"),
        ("grammar=yaml", "grammar must be one of json"),
        ("mirostat-tau=3", "mirostat-tau needs mirostat=1 or mirostat=2"),
        ("mirostat=2,mirostat-eta=fast", "mirostat-eta must be a number in"),
        ("field=seed:3", "field must be KEY:NUMBER with KEY one of typical_p"),
        ("field=dry_multiplier:strong", "field must be KEY:NUMBER"),
        ("logit-bias=a:1", "logit-bias must be TOKEN:BIAS"),
    ],
)
def test_bad_options_are_one_line_errors(words, message):
    with pytest.raises(ValueError, match=message):
        ServerOptions.parse(words)


def test_default_speculation_against_server_flags():
    """With no spec the engine drafts by n-grams (no draft model needed), as the in-process engine's default is
    prompt lookup; spec=none starts no drafter at any speculation length."""
    assert "--spec-type ngram-simple" in " ".join(ServerOptions.parse("").arguments("m.gguf", 4))
    assert "--spec-type" not in " ".join(ServerOptions.parse("spec=none").arguments("m.gguf", 4))
    assert "--spec-type" not in " ".join(ServerOptions.parse("").arguments("m.gguf", 0))
    flags = " ".join(ServerOptions.parse("").arguments("m.gguf", 4))  # the drafter's own length flags
    assert "--spec-ngram-simple-size-m 4" in flags and "--spec-ngram-simple-size-n 4" in flags
    assert "--spec-ngram-simple-size-n 12" in " ".join(ServerOptions.parse("").arguments("m.gguf", 16))
    assert "--spec-ngram-mod-n-max 3" in " ".join(ServerOptions.parse("spec=ngram-mod").arguments("m.gguf", 3))


def test_mirostat_options_against_request_fields():
    """Mirostat's tau and eta are sent with every request as llama-server's fields name them, and named."""
    options = ServerOptions.parse("mirostat=2,mirostat-tau=3,mirostat-eta=1")
    assert options.request_fields() == {"mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 1.0}
    assert ServerOptions.parse("mirostat=2").request_fields() == {"mirostat": 2}


def test_other_samplers_against_request_fields():
    """Any other sampler of llama.cpp's chain reaches every request under its own field name: ``field=`` numbers,
    ``logit-bias=`` pairs and the chain's order."""
    options = ServerOptions.parse(
        "field=dry_multiplier:0.8,field=xtc_probability:0.5,logit-bias=12:-1.5,samplers=top_k;adaptive_p"
    )
    assert options.request_fields() == {
        "dry_multiplier": 0.8,
        "xtc_probability": 0.5,
        "logit_bias": [[12, -1.5]],
        "samplers": ["top_k", "adaptive_p"],
    }
    assert options.sampler_words() == [
        "dry_multiplier 0.8",
        "xtc_probability 0.5",
        "logit bias {12: -1.5}",
        "samplers top_k adaptive_p",
    ]


def test_known_deviations_against_the_paths_they_concern():
    """The engine names the rejection path's Mirostat and adaptive-p bugs, with the sample sizes that saw them, where
    its options meet them (the sampler and probabilistic drafts), and not on the match path or without the sampler."""
    from decoders.models.gguf import real_model_path

    model = real_model_path("smollm2")
    adaptive = "samplers=temperature;adaptive_p"
    lines = {
        words: open_engine(f"llama-server:spec=draft-simple,draft={model},{words}").known_deviations()
        for words in (
            "sampling=probabilistic,mirostat=2",
            "sampling=greedy,mirostat=2",
            "sampling=probabilistic",
            f"sampling=probabilistic,{adaptive}",
            f"sampling=greedy,{adaptive}",
        )
    }
    assert "2,000 samples a side" in lines["sampling=probabilistic,mirostat=2"][0]
    assert len(lines["sampling=probabilistic,mirostat=2"]) == 1
    assert "adaptive-p" in lines[f"sampling=probabilistic,{adaptive}"][0]
    assert len(lines[f"sampling=probabilistic,{adaptive}"]) == 1
    assert lines["sampling=greedy,mirostat=2"] == lines["sampling=probabilistic"] == []
    assert lines[f"sampling=greedy,{adaptive}"] == []


def test_logit_bias_option_reaches_the_server_against_plain_rows(plain):
    """The negative control of the field pass-through: the first token the plain server draws most often after the
    prompt (24 samples of one token) never comes first with ``logit-bias=TOKEN:-100``."""
    rows = plain.generate(PROMPT, 24, 1, EngineSampling(1.0), seed=0).rows
    first = max(set(rows), key=rows.count)[0]
    biased = open_engine(f"llama-server:threads=1,logit-bias={first}:-100")
    try:
        assert all(row[0] != first for row in biased.generate(PROMPT, 24, 1, EngineSampling(1.0), seed=0).rows)
    finally:
        biased.close()


def test_completions_per_request_keep_every_row_against_one_request_each(plain):
    """Eight samples per request (n_cmpl, one prompt evaluation, decoded together in eight slots) are the rows of
    one request per sample on a one-slot server, seed for seed: batching there does not move the law."""
    single = open_engine("llama-server:np=1,completions=1,threads=1")
    try:
        alone = single.generate(PROMPT, 16, 3, EngineSampling(1.0), seed=7)
    finally:
        single.close()
    assert plain.generate(PROMPT, 16, 3, EngineSampling(1.0), seed=7).rows == alone.rows


# 38 s of servers; bench runs end to end in-process (test_llama_engine.py), llama-server in the audits
@pytest.mark.slow
def test_bench_against_plain_decoding(tmp_path, capsys, draft):
    """``bench --engine llama-server`` with a draft model: its greedy tokens are plain decoding's, its call costs
    come from the server's own timings (k new tokens evaluated per verify call, the draft's step measured on a
    server of its own), and the counters add up: each round emits its accepted drafts and one token."""
    import json

    from command import run

    out = tmp_path / "bench.json"
    status, printed, _ = run(
        capsys,
        "bench",
        "--engine",
        f"llama-server:spec=draft-simple,draft={draft},np=1,completions=1,threads=1",
        "--gammas",
        "2",
        "--prompts",
        "1",
        "--max-new-tokens",
        "12",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--out",
        str(out),
    )
    document = json.loads(out.read_text())
    row, costs = document["rows"][0], document["costs"]
    assert status == 0 and row["greedy_equal_to_plain"] is True, printed
    assert len(costs["t_verify"]) == 3 and min(costs["t_verify"]) > 0 and 0 < costs["t_draft"] < costs["t_step"]
    counters = row["counters"]
    assert counters["rounds"] + counters["num_accepted_tokens"] == 12 - 1 and counters["num_draft_tokens"] > 0
    assert row["predicted_speedup"] > 0 and document["engine_settings"]["spec"] == "draft-simple"
    assert costs["t_plain"] == costs["t_verify"][0] + costs["t_sample"] and "cost model's plain step" in printed


def test_load_run_rounds_against_its_counters(draft):
    """Under load (``load_run``, docs/engines-load.md): two requests in flight on a drafting server with two
    slots, each streamed to its tokens, its rounds its tokens after the first less those accepted, the run's counters
    the requests' summed; a concurrency above the slots is refused."""
    engine = open_engine(f"llama-server:spec=draft-simple,draft={draft},np=2,completions=1,threads=1")
    try:
        ids = engine.tokenize(PROMPT)
        run = engine.load_run([ids, ids[3:]], 8, 3, 2)
        assert [request.tokens for request in run.requests] == [8, 8]
        for request in run.requests:
            assert request.rounds == 7 - request.counters["num_accepted_tokens"] >= 0
            assert 0 < request.first_seconds <= request.seconds
        assert run.counters["num_draft_tokens"] == sum(r.counters["num_draft_tokens"] for r in run.requests) > 0
        with pytest.raises(ValueError, match="llama-server:np=3 or more"):
            engine.load_run([ids], 8, 3, 3)
    finally:
        engine.close()


def test_reported_probabilities_under_speculation_against_plain_decoding(plain, draft):
    """The probabilities check passes a plain server against itself (the control: the engine has no
    speculation, so both paths are plain) and fails the speculating one, whose verify rounds report log-probability
    0 and no top list (results/llama_server_n_probs: a finding on this build, not a property we want)."""
    from decoders.audit.engines.greedy import probabilities_check

    ids = plain.tokenize(PROMPT)
    assert probabilities_check(plain.token_logprobs, ids, 8, [2]).passed
    engine = open_engine(f"llama-server:spec=draft-simple,draft={draft},threads=1,np=1,completions=1")
    try:
        found = probabilities_check(engine.token_logprobs, ids, 8, [2])
    finally:
        engine.close()
    first = found.checks[0].first_wrong
    assert not found.passed and first.reported_logprob == 0.0 and first.plain_logprob < -0.01
    assert first.reported_top == [] and len(first.plain_top) == 2
