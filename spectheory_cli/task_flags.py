"""``--task``: a task on the held-out text (``measure.tasks``) or Spec-Bench (``measure.spec_bench``), and the
settings a Spec-Bench bench takes unless the user gives them (docs/measuring.md, "Spec-Bench")."""

from __future__ import annotations

import argparse

from measure.spec_bench import CATEGORIES, TASK, is_spec_bench, spec_bench_categories
from measure.spec_bench_suite import SUITE_SETTINGS
from measure.tasks import TASKS

#: A Spec-Bench bench's defaults (``measure.spec_bench_suite.SUITE_SETTINGS``): two questions per category, 48 new
#: tokens, greedy, no batch sweep -- the whole SmolLM2 table within 30 minutes on 2 cores (docs/measuring.md).
SPEC_BENCH_PRESETS = ["--prompts", str(SUITE_SETTINGS.prompts), "--max-new-tokens", str(SUITE_SETTINGS.max_new_tokens),
                      "--temperatures", "0", "--repeats", str(SUITE_SETTINGS.repeats), "--warmup",
                      str(SUITE_SETTINGS.warmup), "--batch-sizes"]
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
