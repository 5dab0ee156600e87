"""On the shipped pair (or --target/--draft, with --text): the forecast first (a cost profile on other prompts and the
gamma it recommends), then alpha along held-out text and the gamma sweep at batch 1 that checks it, a statistical
audit at T = 1 and the figures; report.json, report.md and report.html in --out. About three minutes on a 2-core
CPU; a real model gets a smaller budget, about twelve minutes. --task spec-bench: a draft per category."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from decoders.audit.statistical import MAX_SAMPLES
from decoders.models import zoo
from decoders.models.gguf import is_gguf_file
from measure.alpha import MAX_PROMPTS, MAX_WINDOWS
from measure.bench import MAX_REPEATS
from jobs.report import pair_report, spec_bench_report
from jobs.spec_bench import ALL
from measure.report import REAL_MODEL_SETTINGS, ReportSettings, summary_lines
from measure.spec_bench import TASK, is_spec_bench
from measure.spec_bench_report import recommendation_lines
from paper_figs.report import write_report, write_spec_bench_report
from spectheory_cli.options import add_compile, add_device, add_target, add_text, draft_help
from spectheory_cli.task_flags import report_spec_bench_settings, task_name
from spectheory.calculator import MAX_TABLE_GAMMA

DEFAULTS = ReportSettings()
BUDGET = ("windows", "prompts", "max_new_tokens", "repeats", "warmup", "audit_n", "gamma_max", "seed", "forecast_prompts",
          "forecast_cost_prompts", "forecast_repeats")
HELP = {"windows": f"held-out windows for alpha along text, 2 to {MAX_WINDOWS} (standard errors are over windows)",
        "prompts": f"benchmark prompts, decoded one at a time, at most {MAX_PROMPTS} (each is decoded in full per run)",
        "max_new_tokens": "tokens generated per prompt; prompt + tokens + gamma + 1 must fit the target's context",
        "repeats": f"timed repeats, median reported, at most {MAX_REPEATS}",
        "warmup": f"untimed runs first, at most {MAX_REPEATS}",
        "audit_n": f"audit: sampled continuations, 2 to {MAX_SAMPLES:,} (memory of the [n, horizon] tests)",
        "gamma_max": f"largest gamma the calculator considers, at most {MAX_TABLE_GAMMA}", "seed": "random seed",
        "forecast_prompts": "other prompts the forecast measures acceptance along",
        "forecast_cost_prompts": "the first of them that its cost profile times", "forecast_repeats": "its timed repeats"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="report", help="output directory (default report)")
    add_target(parser)
    parser.add_argument("--draft", help=draft_help("transformer") + "; with --task spec-bench default all: the table")
    add_text(parser, "alpha, the benchmark's prompts and the audit's prompt")
    parser.add_argument("--task", type=task_name, help="benchmark prompts from a task on the held-out text instead "
                        f"of windows of it (default: windows; rewrite for a real model), or {TASK}[:CATEGORY,...]: a "
                        "draft and gamma per Spec-Bench category")
    parser.add_argument("--from", dest="from_table", metavar="FILE", help=f"--task {TASK}: read the table from FILE "
                        f"(bench --task {TASK} --draft all --out FILE) instead of measuring it")
    add_device(parser), add_compile(parser)
    parser.add_argument("--temperatures", type=float, nargs="+", metavar="T",
                        help="temperatures (default " + " ".join(f"{t:g}" for t in DEFAULTS.temperatures) + ")")
    parser.add_argument("--gammas", type=int, nargs="+", metavar="G",
                        help=f"benchmarked gammas (default {min(DEFAULTS.gammas)} to {max(DEFAULTS.gammas)}; "
                             f"{' '.join(map(str, REAL_MODEL_SETTINGS.gammas))} for a real model)")
    parser.add_argument("--prompt-length", type=int, help=f"benchmark prompt tokens (default {DEFAULTS.prompt_length}; "
                                                          f"{REAL_MODEL_SETTINGS.prompt_length} for a real model)")
    parser.add_argument("--tree-budgets", type=int, nargs="*", metavar="N",
                        help="tree against chain at these node budgets, T = 0, where both models have tree attention "
                             f"(default {' '.join(map(str, DEFAULTS.tree_budgets))}; "
                             f"{' '.join(map(str, REAL_MODEL_SETTINGS.tree_budgets))} for a real model; none: skip)")
    parser.add_argument("--policies", nargs="*", metavar="NAME",
                        help=f"draft-length policies against the best fixed gamma (default {' '.join(DEFAULTS.policies)};"
                             " none for a real model, where they took 11 of the report's 25 minutes; none: skip)")
    for name in BUDGET:
        default, real = getattr(DEFAULTS, name), getattr(REAL_MODEL_SETTINGS, name)
        parser.add_argument("--" + name.replace("_", "-"), type=int, help=f"{HELP[name]} (default {default}"
                            + ("" if real == default else f"; {real} for a real model") + ")")


def _settings(args: argparse.Namespace) -> ReportSettings:
    """The flags given, over the real-model budget for a real model or GGUF file, else the shipped pair's."""
    real = args.target in zoo.REAL_MODELS or (args.target is not None and is_gguf_file(args.target))
    base = REAL_MODEL_SETTINGS if real else DEFAULTS
    given = {name: getattr(args, name) for name in BUDGET + ("temperatures", "gammas", "task", "prompt_length", "tree_budgets", "policies")
             if getattr(args, name, None) is not None}
    given.update({name: tuple(given[name]) for name in ("temperatures", "gammas", "tree_budgets", "policies") if name in given})
    return replace(base, **given)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if is_spec_bench(args.task):
        table, recommendation = spec_bench_report(report_spec_bench_settings(args), args.task, draft=args.draft or ALL,
                                                  from_table=args.from_table, target=args.target, device=args.device,
                                                  compile=args.compile, out=args.out, forecast_questions=args.forecast_prompts)
        paths = write_spec_bench_report(table, recommendation, args.out, command=args.command_line)
        lines = recommendation_lines(recommendation)
    elif args.from_table:
        raise ValueError(f"--from reads a Spec-Bench table: give --task {TASK}")
    else:
        document = pair_report(_settings(args), target=args.target, draft=args.draft or "transformer",  # checked first
                               text=args.text, device=args.device, compile=args.compile, out=args.out, command=args.command_line)
        paths, lines = write_report(document, args.out), summary_lines(document.as_dict())
    print("\n".join(lines))
    print(f"wrote {', '.join(str(path) for path in paths if path.suffix in ('.md', '.html', '.json'))} "
          f"in {time.perf_counter() - started:.0f} s")
    return 0
