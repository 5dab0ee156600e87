"""`spectheory schedule` against the cost model: per batch size the gamma CostProfile.optimal_gamma picks, printed
in the engines' settings; bad input exits 2 with one line."""

import json

from cli import main
from spectheory.costs import PROFILE_KIND, CostProfile


def write_profile(path, batch_size, t_verify):
    profile = CostProfile(
        t_step=1.0,
        t_draft=0.05 * batch_size,
        t_verify=t_verify,
        t_iteration=0.02,
        acceptance=(0.8,) * (len(t_verify) - 1),
        batch_size=batch_size,
    )
    path.write_text(json.dumps({"kind": PROFILE_KIND, "profile": profile.as_dict()}))
    return profile


def write_affine_profile(path, widths: int, gammas: int, **record) -> CostProfile:
    """A batch-1 profile whose passes cost 4 ms and 0.25 ms a token (compute-bound early), calls of 1..``widths``
    tokens, acceptance 0.8 at ``gammas`` positions, written to ``path`` with ``record`` (target, draft) beside."""
    profile = CostProfile(
        t_step=4.25e-3,
        t_draft=4e-4,
        t_verify=tuple(4e-3 + 2.5e-4 * n for n in range(1, widths + 1)),
        t_iteration=1e-4,
        acceptance=(0.8,) * gammas,
        batch_size=1,
    )
    path.write_text(json.dumps({"kind": PROFILE_KIND, **record, "profile": profile.as_dict()}))
    return profile


def test_schedule_against_the_cost_model(tmp_path, capsys):
    profiles = {
        b: write_profile(tmp_path / f"b{b}.json", b, tuple(1.0 + 0.02 * b * k for k in range(9))) for b in (1, 8, 32)
    }
    assert main(["schedule", "--costs", *(str(tmp_path / f"b{b}.json") for b in (32, 1, 8)), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gammas = {b: p.optimal_gamma() for b, p in profiles.items()}
    assert [row["gamma"] for row in document["rows"]] == [gammas[1], gammas[8], gammas[32]]
    assert gammas[1] > gammas[32]  # verification and drafts cost more at larger batches
    assert document["draft_len_schedule"] == {str(b): g for b, g in gammas.items()}
    assert document["num_speculative_tokens_per_batch_size"] == [
        [1, 7, gammas[1]],
        [8, 31, gammas[8]],
        [32, None, gammas[32]],
    ]


def test_schedule_refuses_two_profiles_at_one_batch_size(tmp_path, capsys):
    write_profile(tmp_path / "a.json", 4, (1.0, 1.1, 1.2))
    write_profile(tmp_path / "b.json", 4, (1.0, 1.1, 1.2))
    assert main(["schedule", "--costs", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "two cost profiles at batch size 4" in error


def test_schedule_from_a_batch_sweep_against_its_measurements(tmp_path, capsys):
    """A bench's batch sweep holds a profile per batch size and temperature and the speedups measured at its
    gammas: the schedule is the cost model's at the asked temperature, and each measured best gamma is printed
    beside it (0 where nothing measured above 1x)."""
    profiles = {
        b: write_profile(tmp_path / "unused.json", b, tuple(1.0 + 0.02 * b * k for k in range(5))) for b in (1, 32)
    }
    measured = {(1, 2): 1.3, (1, 4): 1.5, (32, 2): 0.9, (32, 4): 0.7}
    sweep = {
        "batches": {
            "profiles": {f"{b},{t}": p.as_dict() for b, p in profiles.items() for t in ("0", "1")},
            "rows": [{"batch_size": b, "temperature": 0.0, "gamma": g, "speedup": s} for (b, g), s in measured.items()],
        }
    }
    (tmp_path / "bench.json").write_text(json.dumps(sweep))
    assert main(["schedule", "--costs", str(tmp_path / "bench.json"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["gamma"] for row in rows] == [profiles[1].optimal_gamma(), profiles[32].optimal_gamma()]
    assert [(row["measured_speedup"], row["measured_best_gamma"]) for row in rows] == [
        ({"2": 1.3, "4": 1.5}, 4),
        ({"2": 0.9, "4": 0.7}, 0),
    ]
    assert main(["schedule", "--costs", str(tmp_path / "bench.json"), "--temperature", "0.5"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "has no temperature 0.5 (it has 0, 1)" in error
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    assert main(["schedule", "--costs", str(tmp_path / "other.json")]) == 2
    assert "is not a cost profile" in capsys.readouterr().err


def test_concurrency_against_the_goodput_search(tmp_path, capsys):
    """`schedule --costs PROFILE --concurrency ...` (docs/theory-goodput.md §16): one batch-1 profile whose calls reach
    160 positions (4 ms a pass, 0.25 ms a token: compute-bound early) gives per concurrency the gamma of
    ``spectheory.goodput.profile_goodput_schedule``, falling as the batch grows, and the crossover; a concurrency
    whose gamma 1 needs wider calls, or two profiles, exit 2 with one line."""
    from spectheory.goodput import crossover_batch, profile_goodput_schedule

    path = tmp_path / "profile.json"
    profile = write_affine_profile(path, 160, 8)
    batches = ["1", "2", "4", "8", "16"]
    assert main(["schedule", "--costs", str(path), "--concurrency", *batches, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = profile_goodput_schedule(profile, [1, 2, 4, 8, 16])
    assert [row["gamma"] for row in document["rows"]] == [c.gamma for c in expected]
    assert document["crossover"] == crossover_batch(expected)
    gammas = [c.gamma for c in expected]
    assert gammas == sorted(gammas, reverse=True) and gammas[0] > gammas[-1]
    assert main(["schedule", "--costs", str(path), "--concurrency", "1", "128"]) == 2
    assert "measure wider calls (`spectheory profile --verify-widths 256`)" in capsys.readouterr().err
    assert main(["schedule", "--costs", str(path), str(path), "--concurrency", "1"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_gamma_concurrency_against_schedule(tmp_path, capsys):
    """`gamma --costs PROFILE --concurrency ...` answers as `schedule` does (one search: the printed lines are the
    same); without measured costs it exits 2 with one line."""
    path = tmp_path / "profile.json"
    write_affine_profile(path, 64, 6, target="t", draft="d")
    assert main(["schedule", "--costs", str(path), "--concurrency", "1", "4", "16"]) == 0
    scheduled = capsys.readouterr().out.splitlines()
    assert main(["gamma", "--costs", str(path), "--concurrency", "1", "4", "16"]) == 0
    assert capsys.readouterr().out.splitlines() == scheduled[:-1]  # schedule adds vLLM's setting
    assert main(["gamma", "--alpha", "0.8", "--concurrency", "4"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_concurrency_against_a_batch_sweep(tmp_path, capsys):
    """`schedule --concurrency --against BENCH`: beside the forecast, each measured (batch, gamma) of the bench's batch
    sweep with the forecast's goodput speedup there (``spectheory.goodput.goodput_speedup``) and their ratio."""
    from spectheory.goodput import goodput_speedup, profile_goodput_costs

    path = tmp_path / "profile.json"
    profile = write_affine_profile(path, 80, 4)
    rows = [
        {"batch_size": b, "temperature": 0.0, "gamma": g, "speedup": 1.25} for b in (1, 16) for g in (2, 4)
    ]  # what the sweep's reader takes of a bench (decoders.bench.documents.BatchSweep)
    bench = tmp_path / "bench.json"
    bench.write_text(
        json.dumps({"batches": {"rows": rows, "profiles": {"1,0": profile.as_dict(), "16,0": profile.as_dict()}}})
    )
    assert main(["schedule", "--costs", str(path), "--concurrency", "1", "16", "--against", str(bench)]) == 0
    printed = capsys.readouterr().out.splitlines()
    costs = profile_goodput_costs(profile)
    for b in (1, 16):
        for g in (2, 4):
            ahead = goodput_speedup(None, g, b, costs, tokens_per_iteration=profile.tokens_per_iteration(g))
            assert f"{b:>5} {g:>5} {ahead:>8.3f}x {1.25:>8.3f}x {ahead / 1.25:>18.3f}" in printed
    assert main(["schedule", "--costs", str(path), "--against", str(bench)]) == 2
    assert "--against goes with --concurrency" in capsys.readouterr().err
