"""On the shipped pair (or --target/--draft, with --text): the forecast first (a cost profile on other prompts and the
gamma it recommends), then alpha along held-out text and the gamma sweep at batch 1 that checks it, a statistical
audit at T = 1 and the figures; report.json, report.md and report.html in --out. --full adds trees, policies and
every gamma to 8 over 128 tokens (its help gives both times); a real model has its own budget. --task spec-bench.
--cross-vocabulary: a draft with another tokenizer, each method measured, forecast and audited."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from cli.bench_flags import BESIDE_HELP, check_cross_vocabulary
from cli.options import add_compile, add_device, add_target, add_text, draft_help
from cli.task_flags import report_spec_bench_settings, task_name
from decoders import zoo
from decoders.audit.statistical import MAX_SAMPLES
from decoders.bench.alpha import MAX_PROMPTS, MAX_WINDOWS
from decoders.bench.bench import MAX_REPEATS
from decoders.bench.bench_lines import cross_vocabulary_lines, recommendation_lines, summary_lines
from decoders.bench.report.settings import FULL_SETTINGS, REAL_MODEL_SETTINGS, ReportRun, ReportSettings
from decoders.bench.spec_bench.forecast import SPEC_BENCH_FORECAST_QUESTIONS
from decoders.bench.spec_bench.questions import TASK, is_spec_bench
from decoders.bench.spec_bench.run import ALL, SpecBenchRun
from decoders.jobs.report import SpecBenchReportRun, cross_vocabulary_report, pair_report, spec_bench_report
from decoders.models.gguf import is_gguf_file
from paper_figs.report import write_cross_vocabulary_report, write_report, write_spec_bench_report
from spectheory.calculator import MAX_TABLE_GAMMA
from spectheory.vocabularies import METHODS as CROSS_METHODS

DEFAULTS = ReportSettings()
#: What the committed reports took on 2 cores (results/report and results/report_full; a test holds them to the files).
MAIN_SECONDS, FULL_SECONDS = 173, 834
HELP = {
    "windows": f"held-out windows for alpha along text, 2 to {MAX_WINDOWS} (standard errors are over windows)",
    "prompts": f"benchmark prompts, decoded one at a time, at most {MAX_PROMPTS} (each is decoded in full per run)",
    "max_new_tokens": "tokens generated per prompt; prompt + tokens + gamma + 1 must fit the target's context",
    "repeats": f"timed repeats, median reported, at most {MAX_REPEATS}",
    "warmup": f"untimed runs first, at most {MAX_REPEATS}",
    "audit_n": f"audit: sampled continuations, 2 to {MAX_SAMPLES:,} (memory of the [n, horizon] tests)",
    "gamma_max": f"largest gamma the calculator considers, at most {MAX_TABLE_GAMMA}",
    "seed": "random seed",
    "forecast_prompts": "other prompts the forecast measures acceptance along",
    "forecast_cost_prompts": "the first of them that its cost profile times",
    "forecast_repeats": "its timed repeats",
    "temperatures": "temperatures",
    "gammas": "benchmarked gammas",
    "prompt_length": "benchmark prompt tokens",
    "tree_budgets": "tree against chain at these node budgets, T = 0, where both models have tree attention",
    "policies": "draft-length policies against the best fixed gamma",
}
LISTS = {"temperatures": ("+", float), "gammas": ("+", int), "tree_budgets": ("*", int), "policies": ("*", str)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="report", help="output directory (default report)")
    add_target(parser)
    parser.add_argument("--draft", help=draft_help("transformer") + "; with --task spec-bench default all: the table")
    add_text(parser, "alpha, the benchmark's prompts and the audit's prompt")
    parser.add_argument(
        "--task",
        type=task_name,
        help="benchmark prompts from a task on the held-out text instead "
        f"of windows of it (default: windows; rewrite for a real model), or {TASK}[:CATEGORY,...]: a "
        "draft and gamma per Spec-Bench category",
    )
    parser.add_argument(
        "--from",
        dest="from_table",
        metavar="FILE",
        help=f"--task {TASK}: read the table from FILE "
        f"(bench --task {TASK} --draft all --out FILE) instead of measuring it",
    )
    parser.add_argument(
        "--cross-vocabulary",
        nargs="+",
        metavar="METHOD",
        help=f"a --draft with another tokenizer than the real --target's, verified by each METHOD of "
        f"{' '.join(CROSS_METHODS)}: measured and forecast, then audited at T = 1 (docs/theory-vocabularies.md §15)",
    )
    parser.add_argument("--beside", nargs="+", metavar="DRAFT", help=BESIDE_HELP)
    add_device(parser), add_compile(parser)
    parser.add_argument(
        "--full",
        action="store_true",
        help="the shipped pair's full report: every gamma to 8 over 128 "
        f"tokens, trees and policies ({FULL_SECONDS} s on 2 cores against the default's {MAIN_SECONDS} s)",
    )
    for name, text in HELP.items():  # the budget: none given, the defaults (or --full's, or a real model's)
        nargs, kind = LISTS.get(name, (None, int))
        parser.add_argument("--" + name.replace("_", "-"), type=kind, nargs=nargs, help=f"{text} {_defaults(name)}")


def _defaults(name: str) -> str:
    """'(default X; Y with --full; Z for a real model)', the last two where they differ from X; "none" for ()."""
    values = [
        " ".join(map(str, value)) or "none" if isinstance(value, tuple) else str(value)
        for value in (getattr(settings, name) for settings in (DEFAULTS, FULL_SETTINGS, REAL_MODEL_SETTINGS))
    ]
    return (
        f"(default {values[0]}"
        + "".join(
            f"; {value} {where}"
            for value, where in zip(values[1:], ("with --full", "for a real model"))
            if value != values[0]
        )
        + ")"
    )


def _settings(args: argparse.Namespace) -> ReportSettings:
    """The flags given, over the real-model budget for a real model or GGUF file, else the shipped pair's."""
    real = args.target in zoo.REAL_MODELS or (args.target is not None and is_gguf_file(args.target))
    if real and args.full:
        raise ValueError(f"--full is the shipped pair's full budget; --target {args.target} has its own: drop --full")
    base = REAL_MODEL_SETTINGS if real else FULL_SETTINGS if args.full else DEFAULTS
    given = {name: getattr(args, name) for name in (*HELP, "task") if getattr(args, name, None) is not None}
    given.update({name: tuple(given[name]) for name in LISTS if name in given})
    return replace(base, **given)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_cross_vocabulary(args)
    if args.cross_vocabulary is not None and (args.task is not None or args.from_table or args.full):
        raise ValueError("--cross-vocabulary reports on held-out windows: drop --task, --from and --full")
    if args.from_table and not is_spec_bench(args.task):
        raise ValueError(f"--from reads a Spec-Bench table: give --task {TASK}")
    if is_spec_bench(args.task):
        table = SpecBenchRun(
            report_spec_bench_settings(args),
            args.task,
            draft=args.draft or ALL,
            target=args.target,
            device=args.device,
            compile=args.compile,
            forecast_questions=SPEC_BENCH_FORECAST_QUESTIONS
            if args.forecast_prompts is None
            else args.forecast_prompts,
        )
        request = SpecBenchReportRun(table, from_table=args.from_table, out=args.out, command=args.command_line)
        report = spec_bench_report(request)
        paths = write_spec_bench_report(report, request.out, command=request.command)
        lines = recommendation_lines(report.recommendation)
    else:
        request = ReportRun(
            settings=_settings(args),
            target=args.target,
            draft=args.draft or "transformer",
            text=args.text,
            device=args.device,
            compile=args.compile,
            out=args.out,
            command=args.command_line,
            cross_vocabulary=tuple(args.cross_vocabulary or ()),
            beside=tuple(args.beside or ()),
        )
        paths, lines = _pair_or_cross_vocabulary(request)
    print("\n".join(lines))
    print(
        f"wrote {', '.join(str(path) for path in paths if path.suffix in ('.md', '.html', '.json'))} "
        f"in {time.perf_counter() - started:.0f} s"
    )
    return 0


def _pair_or_cross_vocabulary(request: ReportRun) -> tuple:
    """The files written and the lines printed of a report on a pair, or on a draft of another tokenizer."""
    if request.cross_vocabulary:
        document = cross_vocabulary_report(request)
        paths = write_cross_vocabulary_report(document, request.out, command=request.command)
        return paths, cross_vocabulary_lines(document)
    document = pair_report(request)
    return write_report(document, request.out), summary_lines(document)
