"""For each draft and temperature, alpha = mean sum_x min(p, q) along held-out text, and alpha from the
acceptance counts of speculative runs from held-out prompts; the JSON gives those runs in the engines' words
too (acceptance_rate, mean_acceptance_length, per_position_acceptance_rate: docs/metrics.md)."""

from __future__ import annotations

import argparse

from cli.options import add_device, add_target, add_text, draft_help
from cli.task_flags import task_name
from decoders.bench.alpha import MAX_PROMPTS, AlphaEstimate, alpha_markdown, check_windows
from decoders.bench.runs import alpha_document, spec_bench_alpha_document
from decoders.bench.spec_bench.questions import LABELS, TASK, is_spec_bench
from plumbing.outputs import check_writable, write_json, write_text
from plumbing.validation import as_int, as_positive_int

SPEC_BENCH_PROMPTS, SPEC_BENCH_TOKENS = 4, 48  # questions per category, tokens decoded from each


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target(parser)
    parser.add_argument("--drafts", nargs="+", default=None, metavar="DRAFT", help=draft_help(None))
    add_text(parser, "alpha's windows and prompts")
    parser.add_argument(
        "--temperatures", type=float, nargs="+", default=[0.0, 1.0], metavar="T", help="temperatures (default 0 1)"
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=32,
        help="held-out windows of 256 tokens (at most the models' "
        "context), 2 to 10000 (standard errors are over "
        "windows; default 32)",
    )
    parser.add_argument(
        "--prompts",
        type=int,
        help=f"held-out prompts for the acceptance counts, at most {MAX_PROMPTS} "
        f"(each is decoded for 128 tokens; default 16; with --task {TASK}: questions per category, "
        f"each decoded for {SPEC_BENCH_TOKENS} tokens, default {SPEC_BENCH_PROMPTS})",
    )
    parser.add_argument(
        "--task",
        type=task_name,
        help=f"{TASK}[:CATEGORY,...]: alpha per Spec-Bench category on its "
        "questions and the target's continuations of them (--windows does not apply)",
    )
    parser.add_argument(
        "--gamma",
        type=int,
        default=4,
        help="gamma of the counted runs (default 4); 64 + 128 + gamma + 1 must fit the target's context of 256",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_device(parser)
    parser.add_argument("--out", help="write the estimates as JSON here")
    parser.add_argument("--markdown", help="write the Markdown table here")


def _category_table(document: dict, category: str) -> str:
    """One category's estimates as ``alpha_markdown``'s table under its label."""
    estimates = [
        AlphaEstimate(**{key: value for key, value in estimate.items() if key != "category"})
        for estimate in document["estimates"]
        if estimate["category"] == category
    ]
    return f"{LABELS[category]}:\n" + alpha_markdown(estimates)


def _spec_bench(args: argparse.Namespace) -> int:
    """--task spec-bench: one table per category."""
    if args.text is not None:
        raise ValueError(
            f"--text {args.text}: Spec-Bench's questions are the prompts; drop --text or --task {args.task}"
        )
    document = spec_bench_alpha_document(
        args.drafts,
        tuple(args.temperatures),
        args.task,
        target=args.target,
        prompts=args.prompts or SPEC_BENCH_PROMPTS,
        gamma=args.gamma,
        max_new_tokens=SPEC_BENCH_TOKENS,
        seed=args.seed,
        device=args.device,
    )
    return _emit(args, document, "\n".join(_category_table(document, category) for category in document["prompts"]))


def _emit(args: argparse.Namespace, document: dict, table: str) -> int:
    """Write the JSON (--out) and the Markdown (--markdown), print the Markdown."""
    if args.out:
        write_json(args.out, document, command=args.command_line)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    return 0


def run(args: argparse.Namespace) -> int:
    check_windows(args.windows)
    as_int("prompts", args.prompts or 16, low=1, high=MAX_PROMPTS)
    as_positive_int("gamma", args.gamma)
    for path in (args.out, args.markdown):
        if path:
            check_writable(path)
    if is_spec_bench(args.task):
        return _spec_bench(args)
    if args.task is not None:
        raise ValueError(f"--task {args.task}: alpha takes {TASK}[:CATEGORY,...] only (the other tasks are bench's)")
    document = alpha_document(
        args.drafts,
        tuple(args.temperatures),
        target=args.target,
        text=args.text,
        windows=args.windows,
        prompts=args.prompts or 16,
        gamma=args.gamma,
        seed=args.seed,
        device=args.device,
    )
    return _emit(args, document, alpha_markdown([AlphaEstimate(**estimate) for estimate in document["estimates"]]))
