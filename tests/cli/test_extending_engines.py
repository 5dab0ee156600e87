"""An engine kind registered from outside the package (docs/extending.md): one ``register_engine`` call, and
`spectheory audit --engine` opens it by its spec, lists it in its errors and audits it like a shipped one."""

import json

import pytest

from engine_standin import MarkovEngine
from engines import ENGINE_KINDS, PER_REQUEST, EngineKind, EngineRun, register_engine
from spectheory_cli import main


class ToyEngine(MarkovEngine):
    """The Markov stand-in; ``toy:bug`` draws at half the temperature whenever it speculates (a planted deviation)."""

    def __init__(self, planted: bool) -> None:
        super().__init__()
        self.planted = planted

    def generate(self, prompt, n, horizon, sampling, *, speculate=0, seed=0, progress=None) -> EngineRun:
        self.applied_temperature = sampling.temperature / 2 if self.planted and speculate else None
        return super().generate(prompt, n, horizon, sampling, speculate=speculate, seed=seed, progress=progress)


@pytest.fixture
def toy():
    """The toy kind, registered for one test."""
    kind = register_engine(EngineKind("toy", "toy[:bug]", lambda spec: spec.partition(":")[0] == "toy",
                                      lambda spec, **_: ToyEngine(spec == "toy:bug"), PER_REQUEST, "a stand-in"))
    yield kind
    del ENGINE_KINDS[kind.name]


def test_registered_engine_through_audit_against_a_planted_deviation(toy, tmp_path):
    """`audit --engine toy` (its speculating side against its plain one, 2,000 a side at T = 1) passes; `toy:bug`,
    which halves the temperature when speculating, fails (the two-sample test at level 0.01: a false failure has
    probability at most 1%, seeds fixed)."""
    verdicts = []
    for spec in ("toy", "toy:bug"):
        out = tmp_path / f"{spec}.json"
        status = main(["audit", "--engine", spec, "--n", "2000", "--horizon", "2", "--temperature", "1", "--out",
                       str(out)])
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
    assert error.count("\n") == 1 and "model_path, tokenize, generate_ids, call_costs" in error, error
