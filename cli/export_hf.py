"""Write the shipped target and TinyGPT drafts as Hugging Face model directories (GPT-2 weights with identical
logits, and a character-level tokenizer built with the tokenizers library), so that the shipped pair runs
through every Hugging Face path: --target DIR / --draft DIR of the other commands, transformers' generate,
other engines. Nothing is downloaded."""

from __future__ import annotations

import argparse

from cli.options import names
from decoders.bench.export import EXPORTABLE, export_hf
from plumbing.outputs import check_writable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory to write, one model directory per name inside")
    parser.add_argument(
        "--models",
        nargs="+",
        default=["target", "transformer"],
        choices=EXPORTABLE,
        metavar="NAME",
        help=f"what to export: {names(EXPORTABLE)} (default target transformer)",
    )


def run(args: argparse.Namespace) -> int:
    check_writable(args.out, directory=True)
    for path in export_hf(args.out, tuple(args.models)):
        print(path)
    return 0
