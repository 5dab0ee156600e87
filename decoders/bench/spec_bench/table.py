"""Spec-Bench's table from ``decoders.bench.spec_bench.suite.spec_bench_document`` (docs/measuring.md, "Spec-Bench"):
for each category and draft the best setting at T = 0 by measured speedup, with the mean accepted tokens per target
call, alpha, the measured speedup over our autoregressive decoder with its spread over repeats, the cost model's
calibrated prediction beside it, and whether every prompt's greedy tokens equal autoregressive decoding's; an engine's
rows (``document["engine"]["table"]``, over its own plain decoding) in the same keys. Two layouts: one line per category
and draft, and Spec-Bench's own (a draft per line, a category per column)."""

from __future__ import annotations

import math

from decoders.bench.rows import TableRow
from decoders.bench.spec_bench.recommend import chain_setting, tree_setting
from spectheory.optimum import best_gamma_row

__all__ = [
    "best_row",
    "table_row",
    "CHOSEN_KEYS",
    "category_rows",
    "table_lines",
    "matrix_lines",
    "spec_bench_lines",
    "forecast_lines",
]


def best_row(rows: list) -> dict:
    """The T = 0 row of the largest measured speedup (ties: the smallest gamma)."""
    greedy = [row for row in rows if row["temperature"] == 0]
    if not greedy:
        raise ValueError("the Spec-Bench table is at T = 0: give --temperatures 0")
    return best_gamma_row(greedy)


#: What a table row takes from the setting it shows (``table_row``).
CHOSEN_KEYS = (
    "setting",
    "gamma",
    "mean_acceptance_length",
    "acceptance_rate",
    "alpha",
    "speedup",
    "speedup_spread",
    "calibrated_speedup",
    "calibrated_over_measured",
)


def table_row(category: str, label: str, draft: str, prompts: list, chosen: dict, greedy_equal: bool) -> TableRow:
    """One (category, draft) line in the engines' words (docs/metrics.md): the prompts' counts, and of ``chosen``
    (the best setting, our decoders' or an engine's) the ``CHOSEN_KEYS``."""
    return TableRow(
        category=category,
        label=label,
        draft=draft,
        prompts=len(prompts),
        cut=sum(p["cut"] > 0 for p in prompts),
        prompt_tokens=sum(p["tokens"] for p in prompts) / len(prompts),
        **{key: chosen[key] for key in CHOSEN_KEYS},
        forecast_speedup=chosen.get("forecast_speedup"),
        greedy_equal=greedy_equal,
    )


def _row(category: str, label: str, draft: str, prompts: list, rows: list, setting, forecast) -> TableRow:
    """One (category, draft) line of our decoders: the best of ``rows``, named by ``setting(best)``, with
    ``forecast(best)``, the forecast of that setting (None without one)."""
    best = best_row(rows)
    return table_row(
        category,
        label,
        draft,
        prompts,
        dict(best, setting=setting(best), alpha=best["alpha_counts"], forecast_speedup=forecast(best)),
        all(all(row["greedy_equal"]) for row in rows),
    )


def _forecasts(measured: dict) -> dict:
    """{setting: forecast speedup} of a category's judged forecast (``decoders.bench.spec_bench.forecast``), {}
    without."""
    forecast = measured.get("forecast")
    return {} if forecast is None else {row["setting"]: row["forecast"] for row in forecast["judged"]["rows"]}


def category_rows(document: dict) -> list:
    """One ``TableRow`` per category and draft (then the dynamic tree, then the engine's), in the table's order."""
    rows = []
    for category, measured in document["categories"].items():
        forecasts = _forecasts(measured)
        for name, drafted in measured["drafts"].items():
            prompts = measured["prompts"][str(drafted["prompt_room"])]
            rows.append(
                _row(
                    category,
                    measured["label"],
                    name,
                    prompts,
                    drafted["rows"],
                    lambda best: f"gamma {best['gamma']}",
                    lambda best, name=name: forecasts.get(chain_setting(name, best["gamma"])),
                )
            )
        if measured.get("dynamic"):
            tree = measured["dynamic"]
            rows.append(
                _row(
                    category,
                    measured["label"],
                    f"dynamic tree ({tree['draft']})",
                    measured["prompts"][str(tree["prompt_room"])],
                    tree["rows"],
                    lambda best: f"{best['nodes']} nodes",
                    lambda best: forecasts.get(tree_setting(tree["draft"], best["nodes"])),
                )
            )
    engine = document.get("engine")
    return rows + ([TableRow.from_dict(row) for row in engine["table"]] if engine else [])


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


def spec_bench_lines(document: dict) -> list:
    """The table as printed lines: Spec-Bench's layout, then the line per category and draft."""
    rows = category_rows(document)
    s = document["settings"]
    lines = (
        [
            f"Spec-Bench, {document['target']}, T = 0, batch 1, {s['prompts']} prompts per category, "
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
    return lines + forecast_lines(document)


def forecast_lines(document: dict) -> list:
    """Per category the forecast's recommendation judged on the table (``decoders.bench.spec_bench.forecast``), and the
    seconds of both; none where the table was not forecast."""
    forecast = document.get("forecast")
    if not forecast:
        return []
    lines = [
        f"the forecast ({forecast['questions']} other questions per category, costs timed on one over "
        f"{forecast['repeats']} repeats) took {forecast['seconds']:.0f} s, the table that checks it "
        f"{document['sweep_seconds']:.0f} s ({100 * forecast['seconds'] / document['sweep_seconds']:.0f}%)"
    ]
    if forecast.get("withheld"):
        return lines + [forecast["withheld"]]
    for measured in document["categories"].values():
        judged = measured["forecast"]["judged"]
        ratios = [row["forecast_over_measured"] for row in judged["rows"]]
        inside = [row["inside_interval"] for row in judged["rows"] if row["inside_interval"] is not None]
        lines.append(
            f"{measured['label']}: recommended {judged['recommended']} (forecast "
            f"{judged['recommended_forecast']:.2f}x, measured {judged['recommended_measured']:.2f}x), best "
            f"measured {judged['best_measured']} {judged['best_measured_speedup']:.2f}x: loses "
            f"{100 * judged['loss']:.1f}%{_inside_best(judged)}; forecast/measured {min(ratios):.3f}-"
            f"{max(ratios):.3f} over {len(ratios)} settings, inside the measured 95% interval at "
            f"{sum(inside)} of {len(inside)}"
        )
    return lines


def _inside_best(judged: dict) -> str:
    within = judged["within_best_interval"]
    return (
        ""
        if within is None or judged["loss"] == 0
        else (" (inside the best's 95% interval)" if within else " (below the best's 95% interval)")
    )
