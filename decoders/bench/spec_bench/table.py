"""Spec-Bench's table from ``decoders.bench.spec_bench.suite.spec_bench_document`` (docs/measuring.md, "Spec-Bench"):
for each category and draft the best setting at T = 0 by measured speedup, with the mean accepted tokens per target
call, alpha, the measured speedup over our autoregressive decoder with its spread over repeats, the cost model's
calibrated prediction beside it, and whether every prompt's greedy tokens equal autoregressive decoding's; an engine's
rows (``table.engine.table``, over its own plain decoding) in the same keys. Two layouts: one line per category
and draft, and Spec-Bench's own (a draft per line, a category per column)."""

from __future__ import annotations

import math

from decoders.bench.rows import TableRow
from decoders.bench.spec_bench.document import CategoryJudgement, SpecBenchCategory, SpecBenchTable
from decoders.bench.spec_bench.recommend import chain_setting, tree_setting
from spectheory.optimum import best_gamma_row

__all__ = [
    "best_row",
    "prompt_counts",
    "category_rows",
    "table_lines",
    "matrix_lines",
    "spec_bench_lines",
    "forecast_lines",
]


def best_row(rows: tuple):
    """The T = 0 row (``BenchRow`` or ``DynamicTreeRow``) of the largest measured speedup (ties: the smallest gamma)."""
    greedy = [row for row in rows if row.temperature == 0]
    if not greedy:
        raise ValueError("the Spec-Bench table is at T = 0: give --temperatures 0")
    return best_gamma_row(greedy)


def prompt_counts(prompts: list) -> dict[str, int | float]:
    """A table row's counts of a category's ``prompts`` (as recorded: tokens and cut each): how many, how many were
    cut to fit, and their mean tokens (``TableRow``'s keywords)."""
    return {
        "prompts": len(prompts),
        "cut": sum(p["cut"] > 0 for p in prompts),
        "prompt_tokens": sum(p["tokens"] for p in prompts) / len(prompts),
    }


def _chain_rows(category: str, measured: SpecBenchCategory, forecasts: dict) -> list[TableRow]:
    """A line per draft of our decoders at its best gamma, with the forecast of that setting where there is one."""
    lines = []
    for name, drafted in measured.drafts.items():
        best = best_row(drafted.rows)
        lines.append(
            TableRow(
                category=category,
                label=measured.label,
                draft=name,
                **prompt_counts(measured.prompts[str(drafted.prompt_room)]),
                setting=f"gamma {best.gamma}",
                gamma=best.gamma,
                mean_acceptance_length=best.mean_acceptance_length,
                acceptance_rate=best.acceptance_rate,
                alpha=best.alpha_counts,
                speedup=best.speedup,
                speedup_spread=best.speedup_spread,
                calibrated_speedup=best.calibrated_speedup,
                calibrated_over_measured=best.calibrated_over_measured,
                forecast_speedup=forecasts.get(chain_setting(name, best.gamma)),
                greedy_equal=all(all(row.greedy_equal) for row in drafted.rows),
            )
        )
    return lines


def _tree_row(category: str, measured: SpecBenchCategory, forecasts: dict) -> TableRow:
    """The dynamic tree's line (measured only: no alpha from counts, no calibrated model)."""
    tree = measured.dynamic
    best = best_row(tree.rows)
    return TableRow(
        category=category,
        label=measured.label,
        draft=f"dynamic tree ({tree.draft})",
        **prompt_counts(measured.prompts[str(tree.prompt_room)]),
        setting=f"{best.nodes} nodes",
        gamma=None,
        mean_acceptance_length=best.mean_acceptance_length,
        acceptance_rate=best.acceptance_rate,
        alpha=None,
        speedup=best.speedup,
        speedup_spread=best.speedup_spread,
        calibrated_speedup=None,
        calibrated_over_measured=None,
        forecast_speedup=forecasts.get(tree_setting(tree.draft, best.nodes)),
        greedy_equal=all(all(row.greedy_equal) for row in tree.rows),
    )


def category_rows(table: SpecBenchTable) -> list[TableRow]:
    """One ``TableRow`` per category and draft (then the dynamic tree, then the engine's), in the table's order."""
    rows = []
    for category, measured in table.categories.items():
        judged = measured.forecast and measured.forecast.judged
        forecasts = {} if not judged else {row.setting: row.forecast for row in judged.rows}
        rows += _chain_rows(category, measured, forecasts)
        if measured.dynamic is not None:
            rows.append(_tree_row(category, measured, forecasts))
    return rows + (list(table.engine.table) if table.engine else [])


def _number(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def _times(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table_lines(rows: list) -> list:
    """The header and one line per row of ``category_rows``."""
    lines = [
        f"{'category':<27}{'draft':<23}{'prompts':>8}{'cut':>5}{'tokens':>8}{'setting':>10}{'tok/call':>9}"
        f"{'alpha':>7}{'speedup':>9}{'spread':>13}{'forecast':>9}{'model':>8}{'greedy':>8}"
    ]
    for row in rows:
        low, _, high = row.speedup_spread
        lines.append(
            f"{row.label:<27}{row.draft:<23}{row.prompts:>8}{row.cut:>5}{row.prompt_tokens:>8.0f}"
            f"{row.setting:>10}{row.mean_acceptance_length:>9.2f}{_number(row.alpha, '.3f'):>7}"
            f"{row.speedup:>8.2f}x{f'{low:.2f}-{high:.2f}x':>13}{_times(row.forecast_speedup):>9}"
            f"{_times(row.calibrated_speedup):>8}"
            f"{'equal' if row.greedy_equal else 'DIFFER':>8}"
        )
    return lines


def matrix_lines(rows: list) -> list:
    """Spec-Bench's layout: a draft per line, each category's best speedup per column, then the mean accepted
    tokens per call over the categories and the geometric mean of the speedups."""
    categories = list(dict.fromkeys((row.category, row.label) for row in rows))
    drafts = list(dict.fromkeys(row.draft for row in rows))
    cells = {(row.category, row.draft): row for row in rows}
    lines = [
        f"{'draft':<23}"
        + "".join(f"{label.split()[0][:10]:>11}" for _, label in categories)
        + f"{'tok/call':>10}{'geo. mean':>11}"
    ]
    for draft in drafts:
        mine = [cells.get((category, draft)) for category, _ in categories]
        present = [row for row in mine if row]
        mean = math.exp(sum(math.log(row.speedup) for row in present) / len(present))
        lines.append(
            f"{draft:<23}"
            + "".join(f"{_number(row and row.speedup, '.2f') + ('x' if row else ''):>11}" for row in mine)
            + f"{sum(row.mean_acceptance_length for row in present) / len(present):>10.2f}{mean:>10.2f}x"
        )
    return lines


def spec_bench_lines(table: SpecBenchTable) -> list:
    """The table as printed lines: Spec-Bench's layout, then the line per category and draft."""
    rows = category_rows(table)
    s = table.settings
    lines = (
        [
            f"Spec-Bench, {table.target}, T = 0, batch 1, {s['prompts']} prompts per category, "
            f"{s['max_new_tokens']} new tokens each; speedup at each draft's best gamma over our autoregressive "
            f"decoder (an engine's: over its own plain decoding)"
        ]
        + matrix_lines(rows)
        + [""]
        + table_lines(rows)
    )
    if any(row.cut for row in rows):
        lines.append(
            "cut: prompts longer than the draft's context leaves room for (beside the new tokens) lost their front"
        )
    lines.append(
        "forecast: from other questions of the category, made before the table was timed; model: the cost "
        "model calibrated on the table's own runs, a diagnostic"
    )
    return lines + forecast_lines(table)


def forecast_lines(table: SpecBenchTable) -> list:
    """Per category the forecast's recommendation judged on the table (``decoders.bench.spec_bench.forecast``), and the
    seconds of both; none where the table was not forecast."""
    forecast = table.forecast
    if not forecast:
        return []
    lines = [
        f"the forecast ({forecast.questions} other questions per category, costs timed on one over "
        f"{forecast.repeats} repeats) took {forecast.seconds:.0f} s, the table that checks it "
        f"{table.sweep_seconds:.0f} s ({100 * forecast.seconds / table.sweep_seconds:.0f}%)"
    ]
    if forecast.withheld:
        return lines + [forecast.withheld]
    for measured in table.categories.values():
        judged = measured.forecast.judged
        ratios = [row.forecast_over_measured for row in judged.rows]
        inside = [row.inside_interval for row in judged.rows if row.inside_interval is not None]
        lines.append(
            f"{measured.label}: recommended {judged.recommended} (forecast "
            f"{judged.recommended_forecast:.2f}x, measured {judged.recommended_measured:.2f}x), best "
            f"measured {judged.best_measured} {judged.best_measured_speedup:.2f}x: loses "
            f"{100 * judged.loss:.1f}%{_inside_best(judged)}; forecast/measured {min(ratios):.3f}-"
            f"{max(ratios):.3f} over {len(ratios)} settings, inside the measured 95% interval at "
            f"{sum(inside)} of {len(inside)}"
        )
    return lines


def _inside_best(judged: CategoryJudgement) -> str:
    within = judged.within_best_interval
    return (
        ""
        if within is None or judged.loss == 0
        else (" (inside the best's 95% interval)" if within else " (below the best's 95% interval)")
    )
