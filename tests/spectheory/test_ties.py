"""The tie rule of docs/theory.md §3 held by every optimiser against "do not speculate": at break-even (alpha = c,
where gamma = 1 gives exactly (1 + alpha) / (1 + c) = 1) and one ulp either side, each picks gamma 0 (no draft
tokens); the control, alpha above c by 1e-6, must make each pick a draft, so the test can fail."""

import numpy as np
import pytest

from spectheory.calculator import calibrated_table, gamma_table
from spectheory.costs import CostProfile, affine_optimal_gamma, batch_schedule
from spectheory.optimum import TIE_RTOL, beats, best_choice, best_gamma_row, first_best
from spectheory.speedup import optimal_gamma, walltime_improvement
from spectheory.trees import hardware_optimal_tree, optimal_tree


def _profile(alpha: float, c: float) -> CostProfile:
    """A measured-cost profile whose gamma = 1 speedup is (1 + alpha) / (1 + c): t_step = t_verify = 1, drafts c."""
    return CostProfile(t_step=1.0, t_draft=c, t_verify=(1.0, 1.0, 1.0), t_iteration=0.0, acceptance=(alpha, alpha))


#: name -> (alpha, c) -> the draft tokens it picks (gamma, or a tree's nodes but the root).
OPTIMISERS = {
    "theorem 3.8 (optimal_gamma)": lambda a, c: int(optimal_gamma(a, c, 64)),
    "gamma calculator (gamma_table)": lambda a, c: gamma_table(a, c, c, 8).optimal_gamma,
    "cost model (CostProfile.optimal_gamma)": lambda a, c: _profile(a, c).optimal_gamma(),
    "cost model table (calibrated_table)": lambda a, c: calibrated_table(_profile(a, c)).optimal_gamma,
    "affine cost model (affine_optimal_gamma)": lambda a, c: int(affine_optimal_gamma(a, 1.0, c, 1.0, 0.0)),
    "schedule (batch_schedule)": lambda a, c: batch_schedule({1: _profile(a, c)})[0]["gamma"],
    "tree programme (hardware_optimal_tree)": lambda a, c: (
        hardware_optimal_tree([a], t_step=1.0, t_draft=c, t_verify=[1.0, 1.0])[0].tree.size - 1
    ),
    "measured picks (best_choice: report, bench, schedule)": lambda a, c: best_choice(
        [(0, 1.0), (1, float(walltime_improvement(a, 1, c)))], lambda m: m[1], lambda m: m[0]
    )[0],
    "best row of a sweep (best_gamma_row: bench, report, Spec-Bench, engines)": lambda a, c: best_gamma_row(
        [{"gamma": 1, "speedup": float(walltime_improvement(a, 1, c))}, {"gamma": 0, "speedup": 1.0}]
    )["gamma"],
}

BREAK_EVEN = [0.5, 0.25, 0.9999999999999999]  # the last: the float that failed CI (alpha = c = 1 - 2^-53)


@pytest.mark.parametrize("name", OPTIMISERS)
@pytest.mark.parametrize("c", BREAK_EVEN)
def test_break_even_against_do_not_speculate(name, c):
    pick = OPTIMISERS[name]
    for alpha in (np.nextafter(c, 0.0), c, np.nextafter(c, 1.0)):
        assert pick(float(alpha), c) == 0, f"{name} at alpha = {alpha!r}, c = {c!r}"
    if c < 0.99:  # at c = 1 - 2^-53 no alpha <= 1 gets beyond the tolerance: (1 + 1) / (1 + c) - 1 = 2^-54
        assert pick(c * (1 + 1e-6), c) >= 1, f"control: {name} at alpha = c (1 + 1e-6), c = {c!r}"


def test_optimal_tree_stops_where_a_node_adds_only_a_tie():
    for acceptance, nodes in ((0.0, 1), (1e-12, 1), (1e-6, 2)):  # the 2-node tree scores 1 + a against 1
        assert optimal_tree([acceptance], 2)[0].size == nodes, acceptance


def test_first_best_against_its_definition():
    assert first_best([1.0, 1.0 + TIE_RTOL / 2, 1.5, 1.5 * (1 + TIE_RTOL / 2), 1.2]) == 2
    assert first_best([1.0, 1.0 + 2 * TIE_RTOL]) == 1
    assert first_best([-np.inf, 1.0]) == 1
    assert bool(beats(1.0 + 2 * TIE_RTOL, 1.0)) and not bool(beats(1.0 + TIE_RTOL / 2, 1.0))
    for bad in ([], [np.nan, 1.0], [-np.inf]):
        with pytest.raises(ValueError, match="values must be speedups"):
            first_best(bad)
