"""`spectheory schedule` against the cost model: per batch size the gamma CostProfile.optimal_gamma picks, printed
in the engines' settings; bad input exits 2 with one line."""

import json

from spectheory.cli import main
from spectheory.costs import PROFILE_KIND, CostProfile


def write_profile(path, batch_size, t_verify):
    profile = CostProfile(t_step=1.0, t_draft=0.05 * batch_size, t_verify=t_verify, t_iteration=0.02,
                          acceptance=(0.8,) * (len(t_verify) - 1), batch_size=batch_size)
    path.write_text(json.dumps({"kind": PROFILE_KIND, "profile": profile.as_dict()}))
    return profile


def test_schedule_against_the_cost_model(tmp_path, capsys):
    profiles = {b: write_profile(tmp_path / f"b{b}.json", b, tuple(1.0 + 0.02 * b * k for k in range(9)))
                for b in (1, 8, 32)}
    assert main(["schedule", "--costs", *(str(tmp_path / f"b{b}.json") for b in (32, 1, 8)), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gammas = {b: p.optimal_gamma() for b, p in profiles.items()}
    assert [row["gamma"] for row in document["rows"]] == [gammas[1], gammas[8], gammas[32]]
    assert gammas[1] > gammas[32]  # verification and drafts cost more at larger batches
    assert document["draft_len_schedule"] == {str(b): g for b, g in gammas.items()}
    assert document["num_speculative_tokens_per_batch_size"] == [[1, 7, gammas[1]], [8, 31, gammas[8]],
                                                                 [32, None, gammas[32]]]


def test_schedule_refuses_two_profiles_at_one_batch_size(tmp_path, capsys):
    write_profile(tmp_path / "a.json", 4, (1.0, 1.1, 1.2))
    write_profile(tmp_path / "b.json", 4, (1.0, 1.1, 1.2))
    assert main(["schedule", "--costs", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "two cost profiles at batch size 4" in error
