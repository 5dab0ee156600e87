"""`spectheory gamma --from-metrics FILE`: an engine's counters, in its vocabulary and the theory's, then the
calculator at the alpha they imply and what changing the engine's draft length to its optimum gains
(docs/metrics.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spectheory.calculator import calibrated_table, format_calibrated_text, format_text, gamma_table
from spectheory_cli import UsageError
from spectheory.costs import CostProfile
from spectheory.metrics import estimate_alpha


def _counts(path: str):
    from engines.counters import read_counts  # here: `gamma` alone loads only the theory

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--from-metrics {path!r} does not exist")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--from-metrics {path!r} is not text (a Prometheus dump or a JSON response)") from None
    try:
        return read_counts(text)
    except ValueError as error:
        raise ValueError(f"--from-metrics {path!r}: {error}") from None


def _speedups(args: argparse.Namespace, alpha: float) -> tuple[dict, object, str]:
    """gamma -> predicted speedup, the table and its text: calibrated with measured costs, else Theorem 3.8."""
    if args.costs or args.t_verify_ms is not None:
        from spectheory_cli import calibrated
        entries, described = calibrated.cost_entries(args)
        table = calibrated_table(CostProfile.from_dict(entries), alpha=alpha, c=args.c if args.c else None)
        speedups = {row.gamma: row.calibrated_speedup for row in table.table}
        return speedups, table, f"cost profile: {described}\n{format_calibrated_text(table)}"
    table = gamma_table(alpha, args.c, args.c if args.c_hat is None else args.c_hat, args.gamma_max)
    return {row.gamma: row.speedup for row in table.table}, table, format_text(table)


def run(args: argparse.Namespace) -> int:
    if args.acceptance is not None:
        raise UsageError("spectheory gamma: error: --from-metrics measures the acceptance itself; drop --acceptance")
    counts = _counts(args.from_metrics)
    estimate = estimate_alpha(counts, args.gamma)
    args.alpha = [estimate.alpha]
    speedups, table, text = _speedups(args, estimate.alpha)
    current, best = estimate.gamma, table.optimal_gamma
    change = speedups[best] / speedups[current] if current in speedups else None
    answer = {"engine_gamma": current, "recommended_gamma": best, "speedup_at_engine_gamma": speedups.get(current),
              "recommended_speedup": speedups[best], "speedup_change": change}
    if args.json:
        print(json.dumps({"metrics": counts.as_dict(), "alpha": estimate.alpha,
                          "alpha_standard_error": estimate.standard_error, "alpha_method": estimate.method,
                          **answer, "table": table.as_dict()}, indent=2, allow_nan=False))
        return 0
    rates = ", ".join(f"{r:.3f}" for r in counts.per_position_acceptance_rate) or "not reported"
    conditional = ", ".join(f"{r:.3f}" for r in counts.conditional_acceptance_rate) or "not reported"
    print(f"{counts.engine}: {counts.drafts:g} drafts, {counts.draft_tokens:g} draft tokens "
          f"({counts.draft_length:.2f} per draft), {counts.accepted_tokens:g} accepted")
    print(f"  acceptance_rate {counts.acceptance_rate:.4f}, mean_acceptance_length {counts.mean_acceptance_length:.4f}")
    print(f"  per_position_acceptance_rate (unconditional): {rates}")
    print(f"  conditional_acceptance_rate: {conditional}")
    print(f"  alpha = {estimate.alpha:.4f} +- {estimate.standard_error:.4f} (1 SE; {estimate.method})\n")
    print(text)
    if change is None:
        print(f"\nthe engine's draft length {current} is beyond the table (--gamma-max {max(speedups)})")
    else:
        print(f"\nthe engine drafts {current} per round: predicted {speedups[current]:.3f}x; gamma {best} predicts "
              f"{speedups[best]:.3f}x ({change:.3f} times the current speed)")
    return 0
