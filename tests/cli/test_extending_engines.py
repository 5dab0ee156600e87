"""An engine kind registered from outside the package (docs/extending.md): one ``register_engine`` call, and
`spectheory audit --engine` opens it by its spec, lists it in its errors and audits it like a shipped one, and
`spectheory bench --engine` benches one that has the capabilities the bench reads."""

import json

import pytest
from engine_standin import MarkovEngine

from cli import main
from decoders.engines import ENGINE_KINDS, PER_REQUEST, EngineKind, EngineRun, register_engine
from decoders.models.corpus import encode_text
from decoders.zoo import ZOO


class ToyEngine(MarkovEngine):
    """The Markov stand-in; ``toy:bug`` draws at half the temperature whenever it speculates (a planted deviation)."""

    def __init__(self, planted: bool) -> None:
        super().__init__()
        self.planted = planted

    def generate(self, prompt, n, horizon, sampling, *, speculate=0, seed=0, progress=None) -> EngineRun:
        self.applied_temperature = sampling.temperature / 2 if self.planted and speculate else None
        return super().generate(prompt, n, horizon, sampling, speculate=speculate, seed=seed, progress=progress)


class BenchableToy(ToyEngine):
    """The toy with what the bench reads (``decoders.engines.bench.BENCH_CAPABILITIES``): the shipped target's file as
    its model (our decoder's speed beside is measured on it), the corpus's character ids, and made-up costs and
    counters: a verify call of k tokens costs 10 + k ms, and speculating gamma tokens accepts gamma // 2 a round."""

    model_path = ZOO / "target.pt"

    def __init__(self) -> None:
        super().__init__(False)

    def tokenize(self, prompt: str) -> list:
        return encode_text(None, prompt)

    def call_costs(self, ids, max_tokens) -> dict:
        return {
            "t_verify": [0.010 + 0.001 * k for k in range(1, max_tokens + 1)],
            "t_sample": 0.0,
            "t_round": 0.0,
            "t_draft": 0.001,
        }

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0) -> tuple:
        rounds = -(-horizon // (1 + speculate // 2))
        counters = (
            {"num_draft_tokens": speculate * rounds, "num_accepted_tokens": horizon - rounds, "rounds": rounds}
            if speculate
            else {}
        )
        return [1] * horizon, counters, 0.001, 0.001 * (rounds if speculate else horizon)


@pytest.fixture
def benchable():
    kind = register_engine(
        EngineKind(
            "toy-bench",
            "toy-bench",
            lambda spec: spec == "toy-bench",
            lambda spec, **_: BenchableToy(),
            PER_REQUEST,
            "a benchable stand-in",
        )
    )
    yield kind
    del ENGINE_KINDS[kind.name]


def test_registered_engine_through_bench_against_its_declared_costs(benchable, tmp_path, capsys):
    """`bench --engine toy-bench`: every gamma's row holds the stand-in's counters (gamma 2 accepts 1 token a round,
    gamma 4 two: 2 and 3 tokens per round) and the cost model's speedup from its declared costs."""
    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--engine",
                "toy-bench",
                "--gammas",
                "2",
                "4",
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
            ]
        )
        == 0
    )
    document = json.loads(out.read_text())
    rows = {row["gamma"]: row for row in document["rows"]}
    assert sorted(rows) == [2, 4] and all(row["predicted_speedup"] > 0 for row in rows.values())
    assert [rows[g]["counters"]["num_accepted_tokens"] / rows[g]["counters"]["rounds"] for g in (2, 4)] == [1, 2]
    printed = capsys.readouterr().out
    assert (
        document["ours_tokens_per_second"] > 0
        and printed.startswith("markov (target.pt")
        and "recommended: gamma 4" in printed
    ), printed  # 3 tokens a round for 15 + 4 ms beat 2 for 13 + 2 ms


@pytest.fixture
def toy():
    """The toy kind, registered for one test."""
    kind = register_engine(
        EngineKind(
            "toy",
            "toy[:bug]",
            lambda spec: spec.partition(":")[0] == "toy",
            lambda spec, **_: ToyEngine(spec == "toy:bug"),
            PER_REQUEST,
            "a stand-in",
        )
    )
    yield kind
    del ENGINE_KINDS[kind.name]


def test_registered_engine_through_audit_against_a_planted_deviation(toy, tmp_path):
    """`audit --engine toy` (its speculating side against its plain one, 2,000 a side at T = 1) passes; `toy:bug`,
    which halves the temperature when speculating, fails (the two-sample test at level 0.01: a false failure has
    probability at most 1%, seeds fixed)."""
    verdicts = []
    for spec in ("toy", "toy:bug"):
        out = tmp_path / f"{spec}.json"
        status = main(
            ["audit", "--engine", spec, "--n", "2000", "--horizon", "2", "--temperature", "1", "--out", str(out)]
        )
        verdicts.append((status, json.loads(out.read_text())["passed"]))
    assert verdicts == [(0, True), (1, False)]


def test_unknown_engine_error_lists_the_registered_kinds(toy, capsys):
    assert main(["audit", "--engine", "nope", "--temperature", "1"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "toy[:bug]" in error and "llama-server[:OPTIONS]" in error, error


def test_registered_engine_without_bench_capabilities_is_refused_in_one_line(toy, capsys):
    """`bench --engine toy`: the stand-in has none of the bench's capabilities, so the bench says which, before any
    run (it used to fail with an AttributeError on model_path)."""
    assert main(["bench", "--engine", "toy", "--prompts", "1", "--gammas", "2", "--max-new-tokens", "4"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "tokenize, model_path, generate_ids, call_costs" in error, error
