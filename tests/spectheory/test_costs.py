"""The cost model (docs/theory.md §10) against Theorem 3.8, against a scan for its optimum, and the
along-text replay against simulation and against the positional formula."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectheory.costs import CostProfile, affine_optimal_gamma, affine_speedup, calibrated_sequence_speedup
from spectheory.positional import expected_iterations_along, expected_tokens_positional
from spectheory.speedup import walltime_improvement


@settings(max_examples=50)
@given(alpha=st.floats(0.01, 0.99), c=st.floats(0.0, 1.0), t_step=st.floats(1e-4, 1.0), gamma=st.integers(1, 12))
def test_cost_profile_against_theorem_3_8(alpha, c, t_step, gamma):
    """t_draft = c t_step, t_verify = t_step, t_iteration = 0 is Theorem 3.8."""
    profile = CostProfile(t_step, c * t_step, (t_step,) * (gamma + 1), 0.0, (alpha,) * gamma)
    assert profile.speedup(gamma) == pytest.approx(float(walltime_improvement(alpha, gamma, c)), rel=1e-12)
    assert profile.speedup(gamma, alpha) == pytest.approx(profile.speedup(gamma), rel=1e-12)


@settings(max_examples=50)
@given(
    alpha=st.floats(0.05, 0.99),
    t_draft=st.floats(0.0, 0.5),
    v0=st.floats(0.1, 2.0),
    v1=st.floats(0.0, 0.3),
    t_iteration=st.floats(0.0, 0.5),
    t_step=st.floats(0.2, 2.0),
)
def test_affine_optimal_gamma_against_scan(alpha, t_draft, v0, v1, t_iteration, t_step):
    """The closed-form optimum (Theorem 3.8's at c_eff, or 0) against the best of gamma = 0..64 by scanning."""
    gammas = np.arange(1, 65)
    speedups = np.concatenate([[1.0], affine_speedup(alpha, gammas, t_step, t_draft, v0, v1, t_iteration)])
    best = int(affine_optimal_gamma(alpha, t_step, t_draft, v0, v1, t_iteration, gamma_max=64))
    assert speedups[best] == pytest.approx(speedups.max(), rel=1e-9)
    profile = CostProfile(t_step, t_draft, tuple(v0 + v1 * k for k in range(1, 66)), t_iteration, (alpha,) * 64)
    assert profile.speedup(best, alpha) == pytest.approx(speedups[best], rel=1e-9)


def test_expected_iterations_along_against_simulation():
    """Monte-Carlo iterations over a text with easy and hard spans: within 4.5 standard errors (false-positive
    probability about 7e-6); negative control: the positional formula at the text's mean rates is off."""
    rng = np.random.default_rng(3)
    text = np.repeat(rng.choice([0.95, 0.2], size=40), 5)  # [200], spans of 5
    gamma, runs = 4, 4000
    draws = rng.random((runs, len(text) + gamma + 1))
    counts = []
    for row in draws:
        position, iterations = 0, 0
        while position < len(text):
            accepted = 0
            while (
                accepted < gamma
                and position + accepted < len(text)
                and row[position + accepted] < text[position + accepted]
            ):
                accepted += 1
            position, iterations = position + accepted + 1, iterations + 1
        counts.append(iterations)
    mean, error = np.mean(counts), np.std(counts, ddof=1) / np.sqrt(runs)
    assert abs(expected_iterations_along(text, gamma) - mean) < 4.5 * error
    positional = len(text) / float(expected_tokens_positional([text.mean()] * gamma))
    assert abs(positional - mean) > 10 * error


def test_expected_iterations_along_constant_text_against_positional():
    text = np.full(20000, 0.8)
    assert len(text) / expected_iterations_along(text, 5) == pytest.approx(
        float(expected_tokens_positional([0.8] * 5)), rel=1e-3
    )
    assert expected_iterations_along([1.0] * 9, 2) == 3 and expected_iterations_along([0.0] * 4, 3) == 4


def test_sequence_speedup_tends_to_the_per_token_speedup():
    per_token = 4.0 * 2e-3 / 6e-3
    assert calibrated_sequence_speedup(1e9, 4.0, 2e-3, 6e-3, target_prefill=1e-2, draft_prefill=2e-3) == pytest.approx(
        per_token, rel=1e-6
    )
    assert calibrated_sequence_speedup(64, 4.0, 2e-3, 6e-3, target_prefill=1e-2, draft_prefill=2e-3) < per_token


def test_profile_errors():
    with pytest.raises(ValueError, match="a cost profile needs acceptance for positions"):
        CostProfile(1.0, 0.1, (1.0,), 0.0, ())
    with pytest.raises(ValueError, match="a cost profile needs t_draft"):
        CostProfile.from_dict({"t_step": 1.0, "t_verify": [1, 1], "t_iteration": 0, "acceptance": [0.5]})
    with pytest.raises(ValueError, match="gamma must be in"):
        CostProfile(1.0, 0.1, (1.0, 1.0), 0.0, (0.5,)).speedup(2)
    with pytest.raises(ValueError, match="acceptance"):
        CostProfile(1.0, 0.1, (1.0, 1.0), 0.0, (1.5,))
    with pytest.raises(ValueError, match="t_overhead must give gamma = 1..gamma_max \\(1 values\\), got 2"):
        CostProfile(1.0, 0.1, (1.0, 1.0), 0.0, (0.5,), t_overhead=(0.1, 0.2))
    with pytest.raises(ValueError, match="t_overhead"):
        CostProfile(1.0, 0.1, (1.0, 1.0), 0.0, (0.5,), t_overhead=(-0.1,))
    with pytest.raises(ValueError, match="drafts must be at least 1"):  # t_overhead[-1] would answer silently
        CostProfile(1.0, 0.1, (1.0, 1.0), 0.0, (0.5,), t_overhead=(0.3,)).overhead_seconds(0)


def test_proposal_fractions_against_their_verify_widths():
    """A draft that proposes m = 0..gamma_max tokens with the given fractions: an iteration at gamma verifies
    min(m, gamma) + 1 positions; all mass at gamma_max is the profile without fractions."""
    t_verify, fractions = (1.0, 2.0, 4.0, 8.0), (0.5, 0.25, 0.0, 0.25)
    profile = CostProfile(1.0, 0.1, t_verify, 0.2, (0.5, 0.5, 0.5), proposal_fractions=fractions)
    assert profile.verify_seconds(1) == 0.5 * 1 + 0.5 * 2
    assert profile.verify_seconds(3) == 0.5 * 1 + 0.25 * 2 + 0.25 * 8
    assert profile.iteration_seconds(2) == pytest.approx(2 * 0.1 + 0.5 * 1 + 0.25 * 2 + 0.25 * 4 + 0.2)
    full = CostProfile(1.0, 0.1, t_verify, 0.2, (0.5, 0.5, 0.5))
    assert CostProfile.from_dict(dict(full.as_dict(), proposal_fractions=[0, 0, 0, 1])).speedup(2) == full.speedup(2)
    assert CostProfile.from_dict(profile.as_dict()) == profile
    with pytest.raises(ValueError, match="proposal_fractions must give m = 0..gamma_max"):
        CostProfile(1.0, 0.1, t_verify, 0.2, (0.5, 0.5, 0.5), proposal_fractions=(0.5, 0.5))


def test_with_acceptance_keeps_the_iteration_seconds_of_the_profiled_gammas():
    """Another acceptance of fewer positions: an iteration at gamma <= g costs what the profile's did (proposals
    folded at g verify the same widths); more positions extend the overheads by t_draft per token, and a
    short-proposing draft's lengths past gamma_max are refused."""
    fractions, overhead = (0.5, 0.25, 0.0, 0.25), (0.3, 0.5, 0.6)
    profile = CostProfile(
        1.0,
        0.1,
        (1.0, 2.0, 4.0, 8.0, 9.0),
        0.2,
        (0.5, 0.5, 0.5),
        proposal_fractions=fractions,
        t_overhead=overhead,
        acceptance_along_text=((1.0, 0.0),),
    )
    shorter = profile.with_acceptance([0.9, 0.8])
    assert shorter.proposal_fractions == (0.5, 0.25, 0.25) and shorter.t_overhead == (0.3, 0.5)
    assert [shorter.iteration_seconds(g) for g in (1, 2)] == [profile.iteration_seconds(g) for g in (1, 2)]
    assert shorter.acceptance_along_text == () and shorter.tokens_per_iteration(2) == 1 + 0.9 + 0.9 * 0.8
    plain = CostProfile(1.0, 0.1, (1.0, 2.0, 4.0, 8.0, 9.0), 0.2, (0.5, 0.5, 0.5), t_overhead=overhead)
    assert plain.with_acceptance([0.5] * 4).t_overhead == pytest.approx((0.3, 0.5, 0.6, 0.7))
    with pytest.raises(ValueError, match="proposal lengths up to gamma_max 3"):
        profile.with_acceptance([0.5] * 4)


def test_with_text_takes_the_text_and_keeps_the_costs():
    """Costs of one profile, acceptance of another: every cost as measured, the text's acceptance, proposal
    lengths and outcomes along its texts (dropped where the two decode different numbers of rows per call)."""
    costs = CostProfile(1.0, 0.1, (1.0, 2.0, 4.0, 8.0), 0.2, (0.5, 0.5, 0.5), t_overhead=(0.3, 0.5, 0.6))
    text = CostProfile(
        9.0,
        9.0,
        (9.0, 9.0, 9.0),
        9.0,
        (0.8, 0.6),
        proposal_fractions=(0.5, 0.0, 0.5),
        acceptance_along_text=((1.0, 0.0, 1.0),),
        alpha=0.7,
    )
    forecast = costs.with_text(text)
    assert (forecast.t_step, forecast.t_verify, forecast.t_overhead) == (1.0, costs.t_verify, (0.3, 0.5))
    assert (forecast.acceptance, forecast.proposal_fractions, forecast.alpha) == ((0.8, 0.6), (0.5, 0.0, 0.5), 0.7)
    assert forecast.acceptance_along_text == text.acceptance_along_text
    assert forecast.iteration_seconds(2) == 0.5 + 0.5 * 1.0 + 0.5 * 4.0
    batched = CostProfile(1.0, 0.1, (1.0, 2.0, 4.0), 0.2, (0.5, 0.5), batch_size=2)
    assert batched.with_text(text).acceptance_along_text == ()


def test_profile_json_engine_names_against_the_metrics_conversions():
    """A profile's JSON names its per-position acceptance as the engines do (docs/metrics.md): the conditional
    rates are ``acceptance`` itself, the unconditional ones their running products (0.8, 0.8 x 0.5); reading the
    JSON back ignores the aliases."""
    profile = CostProfile(t_step=1.0, t_draft=0.1, t_verify=(1.0, 1.1, 1.2), t_iteration=0.0, acceptance=(0.8, 0.5))
    document = profile.as_dict()
    assert document["conditional_acceptance_rate"] == [0.8, 0.5]
    assert document["per_position_acceptance_rate"] == pytest.approx([0.8, 0.4])
    assert CostProfile.from_dict(document) == profile
