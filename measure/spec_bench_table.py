"""Spec-Bench's per-category table from ``measure.runs.spec_bench_document`` (docs/measuring.md, "Spec-Bench"):
for each category the best gamma at T = 0 by measured speedup, with the mean accepted tokens per target call,
alpha, the measured speedup over our autoregressive decoder with its spread over repeats, the cost model's
calibrated prediction beside it, and whether every prompt's greedy tokens equal autoregressive decoding's."""

from __future__ import annotations

from spectheory.optimum import best_choice

__all__ = ["category_rows", "table_lines", "spec_bench_lines"]


def _best(rows: list) -> dict:
    """The T = 0 row of the largest measured speedup (ties: the smallest gamma)."""
    greedy = [row for row in rows if row["temperature"] == 0]
    if not greedy:
        raise ValueError("the Spec-Bench table is at T = 0: give --temperatures 0")
    return best_choice(greedy, lambda row: row["speedup"], lambda row: row["gamma"])


def category_rows(document: dict) -> list:
    """One dict per category, in the table's order, in the engines' words (docs/metrics.md)."""
    rows = []
    for category, measured in document["categories"].items():
        best = _best(measured["rows"])
        greedy_rows = [row for row in measured["rows"] if row["temperature"] == 0]
        rows.append({"category": category, "label": measured["label"], "draft": document["draft"],
                     "prompts": len(measured["prompts"]), "cut": sum(p["cut"] > 0 for p in measured["prompts"]),
                     "prompt_tokens": sum(p["tokens"] for p in measured["prompts"]) / len(measured["prompts"]),
                     "gamma": best["gamma"], "mean_acceptance_length": best["mean_acceptance_length"],
                     "acceptance_rate": best["acceptance_rate"], "alpha": best["alpha_counts"],
                     "speedup": best["speedup"], "speedup_spread": best["speedup_spread"],
                     "calibrated_speedup": best["calibrated_speedup"],
                     "calibrated_over_measured": best["calibrated_over_measured"],
                     "greedy_equal": all(all(row.get("greedy_equal", [False])) for row in greedy_rows)})
    return rows


def table_lines(rows: list) -> list:
    """The header and one line per category of ``rows`` (``category_rows``'s keys; an engine's too)."""
    lines = [f"{'category':<27}{'prompts':>8}{'cut':>5}{'tokens':>8}{'gamma':>6}{'tok/call':>9}{'alpha':>7}"
             f"{'speedup':>9}{'spread':>15}{'model':>7}{'greedy':>8}"]
    for row in rows:
        low, _, high = row["speedup_spread"]
        alpha = "-" if row["alpha"] is None else f"{row['alpha']:.3f}"
        lines.append(f"{row['label']:<27}{row['prompts']:>8}{row['cut']:>5}{row['prompt_tokens']:>8.0f}"
                     f"{row['gamma']:>6}{row['mean_acceptance_length']:>9.2f}{alpha:>7}{row['speedup']:>8.2f}x"
                     f"{f'{low:.2f}-{high:.2f}x':>15}{row['calibrated_speedup']:>6.2f}x"
                     f"{'equal' if row['greedy_equal'] else 'DIFFER':>8}")
    return lines


def spec_bench_lines(document: dict) -> list:
    """The table as printed lines."""
    rows = category_rows(document)
    lines = [f"Spec-Bench, {document['target']} with draft {document['draft']}, T = 0, batch 1, "
             f"{document['settings']['prompts']} prompts per category, {document['settings']['max_new_tokens']} new "
             f"tokens each; speedup over our autoregressive decoder at the best of gammas "
             f"{', '.join(map(str, document['settings']['gammas']))}"] + table_lines(rows)
    if any(row["cut"] for row in rows):
        lines.append(f"cut: prompts longer than {document['prompt_room']} tokens lost their front (the context "
                     f"leaves no more room beside the new tokens)")
    return lines
