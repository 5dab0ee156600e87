"""For each draft and temperature, alpha = mean sum_x min(p, q) along held-out text, and alpha from the
acceptance counts of speculative runs from held-out prompts; the JSON gives those runs in the engines' words
too (acceptance_rate, mean_acceptance_length, per_position_acceptance_rate: docs/metrics.md)."""

from __future__ import annotations

import argparse

from cli.options import add_device, add_target, add_text, draft_help
from cli.task_flags import task_name
from decoders.bench.alpha import MAX_PROMPTS, alpha_markdown
from decoders.bench.documents import SpecBenchAlphaDocument
from decoders.bench.runs import (
    SPEC_BENCH_PROMPTS,
    SPEC_BENCH_TOKENS,
    TEXT_PROMPTS,
    TEXT_TOKENS,
    AlphaRun,
    alpha_document,
    spec_bench_alpha_document,
)
from decoders.bench.spec_bench.questions import LABELS, TASK
from plumbing.outputs import check_writable, write_json, write_text


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
        f"(each is decoded for {TEXT_TOKENS} tokens; default {TEXT_PROMPTS}; with --task {TASK}: questions per "
        f"category, each decoded for {SPEC_BENCH_TOKENS} tokens, default {SPEC_BENCH_PROMPTS})",
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


def _category_table(document: SpecBenchAlphaDocument, category: str) -> str:
    """One category's estimates as ``alpha_markdown``'s table under its label."""
    estimates = [estimate for estimate in document.estimates if estimate.category == category]
    return f"{LABELS[category]}:\n" + alpha_markdown(estimates)


def _emit(args: argparse.Namespace, document, table: str) -> int:
    """Write the JSON (--out) and the Markdown (--markdown), print the Markdown."""
    if args.out:
        write_json(args.out, document.as_dict(), command=args.command_line)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    return 0


def run(args: argparse.Namespace) -> int:
    request = AlphaRun(
        drafts=None if args.drafts is None else tuple(args.drafts),
        temperatures=tuple(args.temperatures),
        target=args.target,
        text=args.text,
        task=args.task,
        windows=args.windows,
        prompts=args.prompts,
        gamma=args.gamma,
        seed=args.seed,
        device=args.device,
    )
    for path in (args.out, args.markdown):
        if path:
            check_writable(path)
    if request.task:  # one table per category
        document = spec_bench_alpha_document(request)
        return _emit(args, document, "\n".join(_category_table(document, category) for category in document.prompts))
    document = alpha_document(request)
    return _emit(args, document, alpha_markdown(list(document.estimates)))
