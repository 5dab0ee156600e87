"""Run every paper_figs script: Leviathan et al. Figs. 2-5 and Tables 1, 3, 4 and 5 analogues, simulation
against theory, Stern et al. Fig. 4 analogue and the dynamic-gamma heat map. Measured panels read the JSON
in --results; --recompute reruns the simulations and measurements first (tens of minutes on a CPU)."""

from __future__ import annotations

import argparse

import paper_figs
from cli.options import names
from decoders.progress import progress_bar
from plumbing.outputs import check_writable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="figures", help="directory for the figures (default figures)")
    parser.add_argument("--results", default="results", help="directory of the cached results (default results)")
    parser.add_argument("--recompute", action="store_true", help="rerun the simulations and measurements first")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=paper_figs.SCRIPTS,
        metavar="NAME",
        help=f"just these scripts: {names(paper_figs.SCRIPTS)}",
    )


def run(args: argparse.Namespace) -> int:
    check_writable(args.out, directory=True)  # before any recomputation
    if args.recompute:
        check_writable(args.results, directory=True)
    written = paper_figs.make_all(
        args.out,
        args.results,
        names=tuple(args.only or paper_figs.SCRIPTS),
        recompute=args.recompute,
        progress=lambda items, **options: progress_bar(None, items, **options),
    )
    for name, paths in written.items():
        print(f"{name}: {', '.join(str(path) for path in paths)}")
    return 0
