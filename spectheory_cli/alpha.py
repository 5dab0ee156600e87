"""For each draft and temperature, alpha = mean sum_x min(p, q) along held-out text, and alpha from the
acceptance counts of speculative runs from held-out prompts; the JSON gives those runs in the engines' words
too (acceptance_rate, mean_acceptance_length, per_position_acceptance_rate: docs/metrics.md)."""

from __future__ import annotations

import argparse

from measure.alpha import MAX_PROMPTS, AlphaEstimate, alpha_markdown, check_windows
from measure.runs import alpha_document
from spectheory_cli.options import add_device, add_target, add_text, draft_help
from spectheory.outputs import check_writable, write_json, write_text
from spectheory.validation import as_int, as_positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target(parser)
    parser.add_argument("--drafts", nargs="+", default=None, metavar="DRAFT", help=draft_help(None))
    add_text(parser, "alpha's windows and prompts")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0], metavar="T",
                        help="temperatures (default 0 1)")
    parser.add_argument("--windows", type=int, default=32, help="held-out windows of 256 tokens (at most the models' "
                                                                "context), 2 to 10000 (standard errors are over "
                                                                "windows; default 32)")
    parser.add_argument("--prompts", type=int, default=16, help=f"held-out prompts for the acceptance counts, at most "
                        f"{MAX_PROMPTS} (each is decoded for 128 tokens; default 16)")
    parser.add_argument("--gamma", type=int, default=4, help="gamma of the counted runs (default 4); 64 + 128 + gamma + 1 "
                        "must fit the target's context of 256")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_device(parser)
    parser.add_argument("--out", help="write the estimates as JSON here")
    parser.add_argument("--markdown", help="write the Markdown table here")


def run(args: argparse.Namespace) -> int:
    check_windows(args.windows)
    as_int("prompts", args.prompts, low=1, high=MAX_PROMPTS)
    as_positive_int("gamma", args.gamma)
    for path in (args.out, args.markdown):
        if path:
            check_writable(path)
    document = alpha_document(args.drafts, tuple(args.temperatures), target=args.target, text=args.text,
                              windows=args.windows, prompts=args.prompts, gamma=args.gamma, seed=args.seed,
                              device=args.device)
    table = alpha_markdown([AlphaEstimate(**estimate) for estimate in document["estimates"]])
    if args.out:
        write_json(args.out, document, command=args.command_line)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    return 0
