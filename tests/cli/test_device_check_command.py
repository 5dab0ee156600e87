"""`spectheory device-check --dry-run` on the CPU: the prepared GPU check's every section runs at tiny sizes, so the
command a GPU machine runs (`.ci/device-check`, docs/gpu.md) cannot rot between the sessions that have one."""

import json

import pytest

from decoders.bench.device_document import DeviceCheckDocument
from plumbing.outputs import without_provenance
from tests.command import not_strict_json, run

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("device_check")
    from cli import main

    status = main(["device-check", "--device", "cpu", "--dry-run", "--out", str(out)])
    saved = without_provenance(json.loads((out / "device_check.json").read_text()))
    return status, out, DeviceCheckDocument.from_dict(saved)


def test_dry_run_passes_every_section_against_autoregressive_and_exact_law(dry_run):
    status, out, document = dry_run
    assert status == 0 and not [s.name for s in document.sections if s.failed or s.skipped]
    exact_cases = document.section("exact").result
    assert [case.passed for case in exact_cases.values()] == [not name.endswith("(must fail)") for name in exact_cases]
    for decodings in document.section("greedy").result.values():
        assert all(d.equal and d.first_difference is None for d in decodings.values()), decodings
    # the reference at 300 samples (level 0.01: a false failure has probability at most 1%, seed fixed); the
    # planted residual-from-p bug fails the same test (p 1.9e-8 at seed 0)
    assert [c.passed for c in document.section("statistical").result.values()] == [True, False]
    assert not_strict_json(out) == []


def test_dry_run_profiles_are_read_by_the_calculators(dry_run, capsys):
    _, out, document = dry_run
    profiles = sorted(out.glob("profile_*.json"))
    assert [p.name for p in profiles] == sorted(
        s.result.file for s in document.sections if s.name.startswith("profile ")
    )
    for path in profiles:
        document = json.loads(path.read_text())
        # a profile whose checks failed on this machine's load is refused (docs/forecasts.md), the same one read as
        # written before the checks is taken: the calculators read the file either way
        refused = 0 if document["checks"]["passed"] else 2
        assert run(capsys, "gamma", "--costs", str(path), "--acceptance", "0.8", "0.7", "--json")[0] == refused
        del document["checks"]
        path.write_text(json.dumps(document))
        assert run(capsys, "gamma", "--costs", str(path), "--acceptance", "0.8", "0.7", "--json")[0] == 0
        status, printed, _ = run(capsys, "tree", "--costs", str(path), "--alpha", "0.7", "--budget", "4", "--json")
        assert status == 0 and json.loads(printed)


def test_call_table_holds_every_batch_and_width(dry_run):
    tables = {s.name: s.result for s in dry_run[2].sections if s.name.startswith("calls ")}
    assert tables and all(sorted(t.seconds_per_call) == ["1", "2"] for t in tables.values())
    for table in tables.values():
        for widths in table.seconds_per_call.values():
            assert sorted(widths, key=int) == ["1", "4"]
            assert all(0 < low <= median <= high for low, median, high in widths.values())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device", "cpu", "--budget-seconds", "0"], "budget_seconds"),
        (["--device", "cuda:7"], "CUDA devices"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, argv, message):
    status, _, err = run(capsys, "device-check", "--dry-run", "--out", str(tmp_path / "out"), *argv)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_compiled_section_holds_every_part(dry_run):
    """The compiled section on CPU (the static-cache path uncompiled, tiny shapes: test_compiled.py traces its graphs
    with dynamo): ms per token of the three paths, the compiled pair's profile, and the timing-only chain at every
    alpha and gamma beside its prediction."""
    from decoders.bench.compiled_check import COMPILED_DRY_RUN

    (section,) = [s for s in dry_run[2].sections if s.name.startswith("compiled ")]
    result = section.result
    for rows in result.per_token_ms.values():
        for path in ("eager", "compiled", "transformers_static_generate"):
            low, median, high = getattr(rows, path)
            assert 0 < low <= median <= high, (path, rows)
    assert list(result.profiles) == ["+".join(pair) for pair in COMPILED_DRY_RUN.profile_pairs]
    chain = result.timing_chain
    assert [(row.alpha, row.gamma) for row in chain] == [
        (a, g) for a in COMPILED_DRY_RUN.alphas for g in COMPILED_DRY_RUN.gammas
    ]
    assert all(row.measured_speedup > 0 and row.predicted_speedup > 0 for row in chain), chain


def test_shape_build_against_the_global_generator():
    """A shape's random model is the same for the same seed, and building it leaves the caller's global generator
    where it was (its weights come from a generator of its own: library code never seeds the global RNG)."""
    import torch

    from decoders.bench.device_check import LlamaShape

    shape = LlamaShape("tiny", 64, 128, 2, 4, 2, vocab_size=100, max_position_embeddings=64)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = shape.build("cpu", torch.float32, seed=5)
    assert torch.equal(torch.rand(3), expected)
    second = shape.build("cpu", torch.float32, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(first.model.parameters(), second.model.parameters()))
    other = shape.build("cpu", torch.float32, seed=6)  # control: another seed draws other weights
    assert not torch.equal(first.model.model.embed_tokens.weight, other.model.model.embed_tokens.weight)
