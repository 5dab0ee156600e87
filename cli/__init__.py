"""``spectheory <command>``: the error contract and a lazy command table.

Each command is a module of this package with ``add_arguments(parser)`` and ``run(args) -> exit status``, and
optionally ``presets(argv) -> flags`` parsed before the user's (who override them);
only the module of the command that runs is imported (so ``spectheory gamma`` never imports torch). Bad
input, argparse's or a ``ValueError`` from the packages, is one line on stderr and exit status 2; memory
exhausted, one line and 3; Ctrl-C, one line and 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from cli.commands import COMMANDS
from spectheory import __version__

__all__ = ["main", "build_parser", "COMMANDS", "UsageError"]

USAGE_ERROR = 2
OUT_OF_MEMORY = 3  # the machine ran out of memory: neither a verdict (an audit's 0 or 1) nor bad input (2)
OOM_MESSAGES = ("out of memory", "can't allocate memory")  # torch's CUDA and CPU allocators
INTERRUPTED = 130


class UsageError(Exception):
    """A usage error, printed as one line (argparse's own message is several)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


def _module(name: str):
    return importlib.import_module(f"cli.{name.replace('-', '_')}")


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
    except (MemoryError, RuntimeError) as error:  # torch's allocator raises RuntimeErrors (OutOfMemoryError is one)
        if isinstance(error, RuntimeError) and not any(words in str(error).lower() for words in OOM_MESSAGES):
            raise
        print(
            f"{prog}: error: out of memory ({(str(error).strip() or 'MemoryError').splitlines()[0]}): ask for less "
            f"work (see {prog} --help)",
            file=sys.stderr,
        )
        return OUT_OF_MEMORY
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return USAGE_ERROR
