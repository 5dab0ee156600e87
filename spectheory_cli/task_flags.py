"""``--task``: a task on the held-out text (``measure.tasks``) or Spec-Bench (``measure.spec_bench``), and the
settings a Spec-Bench bench takes unless the user gives them (docs/measuring.md, "Spec-Bench")."""

from __future__ import annotations

import argparse

from measure.spec_bench import CATEGORIES, TASK, is_spec_bench, spec_bench_categories
from measure.tasks import TASKS

#: A Spec-Bench bench's defaults: two questions per category, 64 new tokens, greedy, no batch sweep -- the six
#: categories of one draft in about 5 minutes on 2 cores with SmolLM2 (docs/measuring.md).
SPEC_BENCH_PRESETS = ["--prompts", "2", "--max-new-tokens", "64", "--temperatures", "0", "--repeats", "2",
                      "--batch-sizes"]
TASK_HELP = (f"prompts from a task on the held-out text ({', '.join(TASKS)}), or Spec-Bench's questions, "
             f"{TASK}[:CATEGORY,...] of {', '.join(CATEGORIES)} (--prompts per category; defaults "
             f"{' '.join(SPEC_BENCH_PRESETS)})")


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
        value = arg.partition("=")[2] if arg.startswith("--task=") else argv[i + 1] if arg == "--task" and \
            i + 1 < len(argv) else None
        if is_spec_bench(value):
            return list(SPEC_BENCH_PRESETS)
    return []
