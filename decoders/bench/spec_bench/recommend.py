"""The report's answer per Spec-Bench category (``spectheory report --task spec-bench``, docs/measuring.md,
"Spec-Bench"), from a table of ``decoders.bench.spec_bench.suite.spec_bench_document``.

* Per category the recommended setting is the (draft, gamma) of the largest calibrated speedup among the chain
  rows (the cost model, docs/theory.md §10), or "do not speculate" where none is predicted above 1x; beside it
  its measured speedup, and the best measured setting of the category (the dynamic tree's included, which has no
  prediction, and autoregressive decoding at 1x).
* One setting for all: the (draft, gamma) of the largest predicted overall speedup, overall meaning the
  categories' baseline seconds summed over their speculative seconds summed (Spec-Bench's "overall"); its
  measured overall speedup against the per-category recommendations' measured overall speedup says what a single
  setting loses.
* Noise, where it decides: each measured speedup's standard error over the category's questions
  (``speedup_standard_error``; an exact 1x has none, the dynamic tree's is not measured). A recommendation says
  whether its measured speedup is within the 95% band of the best measured one's (the difference within 1.96
  times the root sum of squares of the two errors), and the one-setting loss carries a 95% half-width by the
  delta method over the categories (independent errors; docs/measuring.md, "Spec-Bench"). None where an error is
  unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from decoders.bench.spec_bench.document import (
    CategoryAnswer,
    OneSetting,
    SpecBenchAnswer,
    SpecBenchCategory,
    SpecBenchTable,
)
from spectheory.intervals import Z95
from spectheory.optimum import best_choice

__all__ = [
    "NO_SPECULATION",
    "Candidate",
    "NOT_SPECULATING",
    "chain_setting",
    "tree_setting",
    "recommend",
    "within_noise",
    "overall_error",
]

NO_SPECULATION = "do not speculate"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A setting the rule chooses among (one category's, or every category's overall): its name, draft and gamma,
    the tokens it drafts per iteration (ties go to fewer), its predicted speedup (the forecast's or the calibrated
    model's; None where the setting is measured only), its measured speedup with the standard error and 95% interval
    (None where unknown, or not yet measured)."""

    setting: str
    draft: str | None = None
    gamma: int | None = None
    drafted: int
    predicted: float | None = None
    measured: float | None = None
    error: float | None = None
    measured_interval: list | None = None


#: Autoregressive decoding as a setting: 1x whether forecast, predicted or measured, exactly.
NOT_SPECULATING = Candidate(
    setting=NO_SPECULATION, drafted=0, predicted=1.0, measured=1.0, error=0.0, measured_interval=[1.0, 1.0]
)


def chain_setting(draft: str, gamma: int) -> str:
    """The name of a chain setting in the table, the forecast and the report."""
    return f"{draft} gamma {gamma}"


def tree_setting(draft: str, nodes: int) -> str:
    """The name of the dynamic tree's setting."""
    return f"dynamic tree ({draft}) {nodes} nodes"


def _settings(measured: SpecBenchCategory) -> list[Candidate]:
    """The settings of one category that have a prediction; the prediction is the forecast
    (``decoders.bench.spec_bench.forecast``, the dynamic tree's included) where the table was forecast, else the cost
    model calibrated on the table's own runs."""
    if measured.forecast is not None:
        errors = {
            chain_setting(name, row.gamma): row.speedup_standard_error
            for name, drafted in measured.drafts.items()
            for row in drafted.rows
        }
        return [
            Candidate(
                setting=row.setting,
                draft=row.draft,
                gamma=row.gamma,
                drafted=row.drafted,
                predicted=row.forecast,
                measured=row.measured,
                error=errors.get(row.setting),
            )
            for row in measured.forecast.judged.rows
        ]
    return [
        Candidate(
            setting=chain_setting(name, row.gamma),
            draft=name,
            gamma=row.gamma,
            drafted=row.gamma,
            predicted=row.calibrated_speedup,
            measured=row.speedup,
            error=row.speedup_standard_error,
        )
        for name, drafted in measured.drafts.items()
        for row in drafted.rows
        if row.calibrated_speedup is not None
    ]


def _overall(weights: dict, speedups: dict) -> float:
    """Sum of the categories' baseline seconds over the sum of their seconds at ``speedups``."""
    return sum(weights.values()) / sum(weights[category] / speedups[category] for category in weights)


def within_noise(a: float, a_error: float | None, b: float, b_error: float | None) -> bool | None:
    """Whether two measured speedups differ by no more than the 95% band of their difference (independent standard
    errors, 0 for an exact 1x); None where an error is unknown."""
    if a_error is None or b_error is None:
        return None
    return abs(a - b) <= Z95 * (a_error**2 + b_error**2) ** 0.5


def _category(measured: SpecBenchCategory) -> CategoryAnswer:
    """One category's recommendation (the largest prediction; ties to fewer drafted tokens), its measured speedup,
    and the best measured setting, with their standard errors and whether the two are told apart."""
    settings = _settings(measured)
    chosen = best_choice(settings + [NOT_SPECULATING], lambda c: c.predicted, lambda c: c.drafted)
    candidates, tree = settings + [NOT_SPECULATING], measured.dynamic
    if tree and tree_setting(tree.draft, tree.rows[0].nodes) not in {c.setting for c in settings}:
        row = tree.rows[0]  # measured only: the calibrated model does not predict it
        candidates.append(
            Candidate(setting=tree_setting(tree.draft, row.nodes), drafted=row.nodes, measured=row.speedup)
        )
    best = best_choice(candidates, lambda c: c.measured, lambda c: c.drafted)
    return CategoryAnswer(
        recommended=chosen.setting,
        draft=chosen.draft,
        gamma=chosen.gamma,
        predicted_by="model" if measured.forecast is None else "forecast",
        predicted_speedup=chosen.predicted,
        measured_speedup=chosen.measured,
        measured_standard_error=chosen.error,
        best_measured=best.setting,
        best_measured_speedup=best.measured,
        best_measured_standard_error=best.error,
        recommended_over_best=chosen.measured / best.measured,
        within_noise_of_best=within_noise(chosen.measured, chosen.error, best.measured, best.error),
        label=measured.label,
    )


def overall_error(weights: dict, speedups: dict, errors: dict) -> float | None:
    """Standard error of ``_overall(weights, speedups)`` by the delta method, the categories' errors independent:
    d overall / d s_c = overall^2 w_c / (W s_c^2). None where a category's error is unknown."""
    if any(errors[category] is None for category in weights):
        return None
    overall, total = _overall(weights, speedups), sum(weights.values())
    return sum((overall**2 * weights[c] / (total * speedups[c] ** 2) * errors[c]) ** 2 for c in weights) ** 0.5


def _one_setting(categories: dict, per_category: dict) -> OneSetting:
    """The setting of the largest predicted overall speedup (``_overall``, each prediction weighed by its own baseline
    seconds) against the per-category recommendations' measured overall speedup."""
    weights = {
        category: next(iter(measured.drafts.values())).autoregressive_seconds
        for category, measured in categories.items()
    }
    ahead = {
        category: weights[category] if measured.forecast is None else measured.forecast.autoregressive_seconds
        for category, measured in categories.items()
    }  # a forecast weighs by its own baseline seconds
    grids = {category: {c.setting: c for c in _settings(measured)} for category, measured in categories.items()}
    common = set.intersection(*(set(grid) for grid in grids.values()))
    overall = [
        Candidate(
            setting=name,
            drafted=grids[next(iter(grids))][name].drafted,
            predicted=_overall(ahead, {c: grid[name].predicted for c, grid in grids.items()}),
            measured=_overall(weights, {c: grid[name].measured for c, grid in grids.items()}),
            error=overall_error(
                weights,
                {c: grid[name].measured for c, grid in grids.items()},
                {c: grid[name].error for c, grid in grids.items()},
            ),
        )
        for name in sorted(common)
    ] + [NOT_SPECULATING]
    one = best_choice(overall, lambda c: c.predicted, lambda c: c.drafted)
    each = _overall(weights, {c: row.measured_speedup for c, row in per_category.items()})
    each_error = overall_error(
        weights,
        {c: row.measured_speedup for c, row in per_category.items()},
        {c: row.measured_standard_error for c, row in per_category.items()},
    )
    loss_error = (
        None
        if one.error is None or each_error is None
        else one.measured / each * ((one.error / one.measured) ** 2 + (each_error / each) ** 2) ** 0.5
    )
    return OneSetting(
        setting=one.setting,
        predicted_overall=one.predicted,
        measured_overall=one.measured,
        per_category_measured_overall=each,
        loss=1 - one.measured / each,
        loss_standard_error=loss_error,
        loss_within_noise=None if loss_error is None else abs(1 - one.measured / each) <= Z95 * loss_error,
    )


def recommend(table: SpecBenchTable) -> SpecBenchAnswer:
    """Per category the recommendation (``_category``), and one setting for all against them (``_one_setting``)."""
    per_category = {category: _category(measured) for category, measured in table.categories.items()}
    return SpecBenchAnswer(categories=per_category, one_setting=_one_setting(table.categories, per_category))
