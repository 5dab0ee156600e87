"""``--task``: a task on the held-out text (``decoders.bench.prompts``) or Spec-Bench
(``decoders.bench.spec_bench.questions``), and the settings a Spec-Bench bench takes unless the user gives them
(docs/measuring.md, "Spec-Bench")."""

from __future__ import annotations

import argparse

from decoders.bench.bench import BenchSettings
from decoders.bench.prompts import TASKS
from decoders.bench.spec_bench.questions import CATEGORIES, TASK, is_spec_bench, spec_bench_categories
from decoders.bench.spec_bench.run import SUITE_SETTINGS

#: A Spec-Bench bench's defaults (``decoders.bench.spec_bench.run.SUITE_SETTINGS``): two questions per category, 32
#: new tokens, greedy, no batch sweep -- the whole SmolLM2 table within 30 minutes on 2 cores (docs/measuring.md).
SPEC_BENCH_PRESETS = [
    "--prompts",
    str(SUITE_SETTINGS.prompts),
    "--max-new-tokens",
    str(SUITE_SETTINGS.max_new_tokens),
    "--temperatures",
    "0",
    "--repeats",
    str(SUITE_SETTINGS.repeats),
    "--warmup",
    str(SUITE_SETTINGS.warmup),
    "--batch-sizes",
]
TASK_HELP = (
    f"prompts from a task on the held-out text ({', '.join(TASKS)}), or Spec-Bench's questions, "
    f"{TASK}[:CATEGORY,...] of {', '.join(CATEGORIES)} (--prompts per category; defaults "
    f"{' '.join(SPEC_BENCH_PRESETS)})"
)


def task_name(value: str) -> str:
    """An argparse type: one of ``TASKS`` or a Spec-Bench task naming known categories."""
    if value in TASKS:
        return value
    try:
        spec_bench_categories(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error}; or one of {', '.join(TASKS)}") from None
    return value


def spec_bench_presets(argv: list) -> list:
    """``SPEC_BENCH_PRESETS`` where ``argv`` asks for a Spec-Bench task, else nothing."""
    for i, arg in enumerate(argv):
        value = (
            arg.partition("=")[2]
            if arg.startswith("--task=")
            else argv[i + 1]
            if arg == "--task" and i + 1 < len(argv)
            else None
        )
        if is_spec_bench(value):
            return list(SPEC_BENCH_PRESETS)
    return []


#: The report's flags that Spec-Bench's table has no use for.
UNUSED_BY_SPEC_BENCH = (
    "text",
    "temperatures",
    "prompt_length",
    "tree_budgets",
    "policies",
    "windows",
    "audit_n",
    "gamma_max",
    "forecast_cost_prompts",
)


def report_spec_bench_settings(args: argparse.Namespace) -> BenchSettings:
    """``report --task spec-bench``'s settings: the flags given over ``SUITE_SETTINGS``; a ValueError naming a flag
    the table does not take."""
    given = [name for name in UNUSED_BY_SPEC_BENCH if getattr(args, name, None) is not None]
    if given:
        raise ValueError(f"--task {args.task} does not take --{given[0].replace('_', '-')}")
    return BenchSettings(
        temperatures=(0.0,),
        prompts=args.prompts or SUITE_SETTINGS.prompts,
        max_new_tokens=args.max_new_tokens or SUITE_SETTINGS.max_new_tokens,
        repeats=args.repeats or SUITE_SETTINGS.repeats,
        warmup=SUITE_SETTINGS.warmup if args.warmup is None else args.warmup,
        seed=args.seed or 0,
        batch_sizes=(),
    )
