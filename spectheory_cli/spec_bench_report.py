"""``report --task spec-bench``: per Spec-Bench category a draft and gamma, or "do not speculate", by the cost
model, with the predicted and measured speedups, the best measured setting, and what one setting for all
categories loses (``measure.spec_bench_report``); the whole table is measured (``bench --task spec-bench --draft
all``) or read with ``--from`` from a saved one. Writes report.json, report.md, report.html and the bar chart."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from measure.bench import BenchSettings
from measure.spec_bench_report import recommend, recommendation_lines
from measure.spec_bench_suite import SUITE_SETTINGS
from paper_figs.report import write_spec_bench_report
from spectheory.outputs import check_writable, strict_loads
from spectheory_cli.spec_bench import ALL, spec_bench_table

__all__ = ["run_spec_bench_report"]

#: The report's flags that Spec-Bench's table has no use for.
UNUSED = ("text", "temperatures", "prompt_length", "tree_budgets", "policies", "windows", "audit_n", "gamma_max")


def _saved(path: str) -> dict:
    """A table written by ``bench --task spec-bench --out`` (one draft or all)."""
    try:
        table = strict_loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"--from {path}: cannot read a JSON table ({error})") from None
    if not isinstance(table, dict) or "categories" not in table or "drafts" not in table:
        raise ValueError(f"--from {path}: not a Spec-Bench table (bench --task spec-bench --draft all --out FILE)")
    return table


def run_spec_bench_report(args: argparse.Namespace) -> int:
    given = [name for name in UNUSED if getattr(args, name, None) is not None]
    if given:
        raise ValueError(f"--task {args.task} does not take --{given[0].replace('_', '-')}")
    check_writable(args.out, directory=True)
    started = time.perf_counter()
    if args.from_table:
        table = _saved(args.from_table)
    else:
        args.draft = args.draft or ALL
        settings = BenchSettings(temperatures=(0.0,), prompts=args.prompts or SUITE_SETTINGS.prompts,
                                 max_new_tokens=args.max_new_tokens or SUITE_SETTINGS.max_new_tokens,
                                 repeats=args.repeats or SUITE_SETTINGS.repeats,
                                 warmup=SUITE_SETTINGS.warmup if args.warmup is None else args.warmup,
                                 seed=args.seed or 0, batch_sizes=())
        table = spec_bench_table(args, settings)
    recommendation = recommend(table)
    paths = write_spec_bench_report(table, recommendation, args.out, command=args.command_line)
    print("\n".join(recommendation_lines(recommendation)))
    print(f"wrote {', '.join(str(path) for path in paths if path.suffix in ('.md', '.html', '.json'))} "
          f"in {time.perf_counter() - started:.0f} s")
    return 0
