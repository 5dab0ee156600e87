"""``spectheory <command>``: the error contract and a lazy command table.

Each command is a module of this package with ``add_arguments(parser)`` and ``run(args) -> exit status``, and
optionally ``presets(argv) -> flags`` parsed before the user's (who override them);
only the module of the command that runs is imported (so ``spectheory gamma`` never imports torch). Bad
input, argparse's or a ``ValueError`` from the packages, is one line on stderr and exit status 2; Ctrl-C
is one line and exit status 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from spectheory import __version__

__all__ = ["main", "build_parser", "COMMANDS", "UsageError"]

USAGE_ERROR = 2
INTERRUPTED = 130

#: name -> one-line summary; the command's module is ``spectheory.cli.<name>``.
COMMANDS = {
    "gamma": "optimal gamma, expected tokens, speedup and operations for given alpha and c",
    "tree": "the optimal draft tree under a node budget: expected tokens, speedup, the best chain beside it",
    "simulate": "Monte-Carlo tokens per iteration and speedup, beside their closed forms",
    "audit": "prove or test that a decoder samples exactly the target's distribution",
    "train": "train the shipped target and drafts on the stdlib corpus (seeded, resumable)",
    "alpha": "measured acceptance rate alpha of the shipped drafts (Table 3 analogue)",
    "bench": "measure c, tokens per iteration and speedup of the shipped pair against Theorem 3.8",
    "profile": "measure the cost profile of a pair (t_step, t_draft, t_verify(k), t_iteration, acceptance)",
    "schedule": "draft length per batch size from cost profiles at several batch sizes, in the engines' settings",
    "diverge": "where an engine's greedy output leaves ours, the target's margin there: numerics or a bug",
    "figs": "regenerate the papers' figures and tables (PNG and PDF; Markdown and CSV) from cached results",
    "report": "the main job: measure a target/draft pair, recommend gamma, audit, benchmark, write report.md/.html",
    "export-hf": "write the shipped pair as Hugging Face model directories (GPT-2 weights, character tokenizer)",
}


class UsageError(Exception):
    """A usage error, printed as one line (argparse's own message is several)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


def _module(name: str):
    return importlib.import_module(f"spectheory.cli.{name.replace('-', '_')}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s arguments are added (and its module imported)."""
    parser = _Parser(prog="spectheory", description="Speculative decoding: theory, simulation, decoders, audits.")
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    for name, summary in COMMANDS.items():
        subparser = commands.add_parser(name, help=summary)
        if name == command:
            module = _module(name)
            subparser.description = module.__doc__
            subparser.formatter_class = argparse.RawDescriptionHelpFormatter
            module.add_arguments(subparser)
            subparser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in argv if not word.startswith("-")), None)
    prog = "spectheory"
    try:  # building the parser imports the command's module (torch for most): Ctrl-C may land there too
        parser = build_parser(command if command in COMMANDS else None)
        presets = getattr(_module(command), "presets", None) if command in COMMANDS else None
        at = argv.index(command) + 1 if presets else 0  # a command's own flags go before the user's, who override them
        args = parser.parse_args(argv[:at] + presets(argv[at:]) + argv[at:] if presets else argv)
        if args.command is None:
            raise UsageError(f"{prog}: error: a command is required (see {prog} --help)")
        prog = f"{prog} {args.command}"
        args.command_line = "spectheory " + " ".join(argv)  # recorded in results
        return args.run(args)
    except UsageError as error:
        print(error, file=sys.stderr)
    except ValueError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return USAGE_ERROR
