"""The report's answer per Spec-Bench category (``spectheory report --task spec-bench``, docs/measuring.md,
"Spec-Bench"), from a table of ``measure.spec_bench_suite.spec_bench_document``.

* Per category the recommended setting is the (draft, gamma) of the largest calibrated speedup among the chain
  rows (the cost model, docs/theory.md §10), or "do not speculate" where none is predicted above 1x; beside it
  its measured speedup, and the best measured setting of the category (the dynamic tree's included, which has no
  prediction, and autoregressive decoding at 1x).
* One setting for all: the (draft, gamma) of the largest predicted overall speedup, overall meaning the
  categories' baseline seconds summed over their speculative seconds summed (Spec-Bench's "overall"); its
  measured overall speedup against the per-category recommendations' measured overall speedup says what a single
  setting loses.
"""

from __future__ import annotations

from spectheory.optimum import best_choice, best_gamma_row

__all__ = ["NO_SPECULATION", "recommend", "recommendation_lines"]

NO_SPECULATION = "do not speculate"


def _settings(measured: dict) -> list:
    """The chain settings of one category that have a prediction: {draft, gamma, predicted, measured}."""
    return [{"draft": name, "gamma": row["gamma"], "predicted": row["calibrated_speedup"], "measured": row["speedup"]}
            for name, drafted in measured["drafts"].items() for row in drafted["rows"]
            if row["calibrated_speedup"] is not None]


def _name(setting: dict) -> str:
    return NO_SPECULATION if setting["draft"] is None else f"{setting['draft']} gamma {setting['gamma']}"


def _overall(weights: dict, speedups: dict) -> float:
    """Sum of the categories' baseline seconds over the sum of their seconds at ``speedups``."""
    return sum(weights.values()) / sum(weights[category] / speedups[category] for category in weights)


def _category(measured: dict) -> dict:
    """One category's recommendation, its measured speedup, and the best measured setting."""
    settings = _settings(measured)
    chosen = best_gamma_row(settings, "predicted")
    if chosen["predicted"] <= 1.0:
        chosen = {"draft": None, "gamma": None, "predicted": 1.0, "measured": 1.0}
    tree = measured.get("dynamic")
    candidates = [(_name(s), s["measured"]) for s in settings] + [(NO_SPECULATION, 1.0)] + (
        [(f"dynamic tree ({tree['draft']}) {tree['rows'][0]['nodes']} nodes", tree["rows"][0]["speedup"])] if tree else [])
    best = best_choice(candidates, lambda c: c[1], lambda c: 0)
    return {"recommended": _name(chosen), "draft": chosen["draft"], "gamma": chosen["gamma"],
            "predicted_speedup": chosen["predicted"], "measured_speedup": chosen["measured"],
            "best_measured": best[0], "best_measured_speedup": best[1],
            "recommended_over_best": chosen["measured"] / best[1]}


def recommend(document: dict) -> dict:
    """Per category the recommendation (``_category``), and one setting for all against them."""
    categories = document["categories"]
    per_category = {category: dict(_category(measured), label=measured["label"])
                    for category, measured in categories.items()}
    weights = {category: next(iter(measured["drafts"].values()))["autoregressive_seconds"]
               for category, measured in categories.items()}
    grids = {category: {(s["draft"], s["gamma"]): s for s in _settings(measured)}
             for category, measured in categories.items()}
    common = set.intersection(*(set(grid) for grid in grids.values()))
    overall = [{"draft": draft, "gamma": gamma,
                "predicted": _overall(weights, {c: grid[(draft, gamma)]["predicted"] for c, grid in grids.items()}),
                "measured": _overall(weights, {c: grid[(draft, gamma)]["measured"] for c, grid in grids.items()})}
               for draft, gamma in sorted(common)] + [{"draft": None, "gamma": None, "predicted": 1.0, "measured": 1.0}]
    one = best_choice(overall, lambda s: s["predicted"], lambda s: s["gamma"] or 0)
    each = _overall(weights, {c: row["measured_speedup"] for c, row in per_category.items()})
    return {"categories": per_category,
            "one_setting": {"setting": _name(one), "predicted_overall": one["predicted"],
                            "measured_overall": one["measured"], "per_category_measured_overall": each,
                            "loss": 1 - one["measured"] / each}}


def recommendation_lines(recommendation: dict) -> list:
    """The recommendation as printed lines."""
    lines = [f"{'category':<27}{'recommended':<24}{'predicted':>10}{'measured':>10}  {'best measured':<30}"
             f"{'speedup':>8}{'ratio':>7}"]
    for row in recommendation["categories"].values():
        lines.append(f"{row['label']:<27}{row['recommended']:<24}{row['predicted_speedup']:>9.2f}x"
                     f"{row['measured_speedup']:>9.2f}x  {row['best_measured']:<30}{row['best_measured_speedup']:>7.2f}x"
                     f"{row['recommended_over_best']:>7.3f}")
    one = recommendation["one_setting"]
    lines.append(f"one setting for all categories: {one['setting']}, predicted overall {one['predicted_overall']:.2f}x, "
                 f"measured {one['measured_overall']:.2f}x; the per-category settings measure {one['per_category_measured_overall']:.2f}x "
                 f"overall: one setting loses {100 * one['loss']:.1f}%")
    return lines
