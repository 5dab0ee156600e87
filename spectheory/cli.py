"""``spectheory <command>``: thin argument parsing over the packages.

Bad input (argparse's or a ``ValueError`` from the packages) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

import numpy as np
from tqdm import tqdm

from sims.families import FAMILIES
from sims.run import PROCESSES, SimulationSpec, run_simulation
from spectheory import __version__
from spectheory.block_verification import VERIFIERS
from spectheory.calculator import format_latex, format_text, gamma_table
from spectheory.speedup import alpha_from_tokens_per_iteration

__all__ = ["main", "build_parser"]

USAGE_ERROR = 2


class _UsageError(Exception):
    """Raised instead of argparse's multi-line usage message."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message}")


def _add_gamma(commands) -> None:
    gamma = commands.add_parser(
        "gamma",
        help="optimal gamma, expected tokens, speedup and operations for given alpha and c",
        description="For each alpha, a table of gamma -> expected tokens per iteration (Eq. 1), "
                    "walltime speedup (Theorem 3.8) and arithmetic-operations factor (Theorem 3.11), "
                    "with the optimal gamma marked. gamma = 0 is autoregressive decoding.",
    )
    source = gamma.add_mutually_exclusive_group(required=True)
    source.add_argument("--alpha", type=float, nargs="+", metavar="A",
                        help="mean acceptance rate(s) alpha = E[beta], in [0, 1]")
    source.add_argument("--tokens-per-iteration", type=float, metavar="X",
                        help="measured mean tokens per iteration (with the bonus/correction token); "
                             "with --gamma, reports the implied alpha and its table")
    gamma.add_argument("--gamma", type=int, metavar="G", help="the gamma at which --tokens-per-iteration was measured")
    gamma.add_argument("--c", type=float, default=0.0,
                       help="cost of a draft call relative to a target call (default 0)")
    gamma.add_argument("--c-hat", type=float, default=None,
                       help="draft arithmetic per token relative to the target's (default: equal to --c)")
    gamma.add_argument("--gamma-max", type=int, default=16, help="largest gamma considered (default 16)")
    output = gamma.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document: a list, one object per alpha")
    output.add_argument("--latex", action="store_true", help="print LaTeX tabulars")
    gamma.set_defaults(run=_run_gamma)


def _run_gamma(args: argparse.Namespace) -> int:
    implied_from = None
    if args.tokens_per_iteration is not None:
        if args.gamma is None:
            raise _UsageError("spectheory gamma: error: --tokens-per-iteration needs --gamma")
        alphas = [float(alpha_from_tokens_per_iteration(args.tokens_per_iteration, args.gamma))]
        implied_from = {"tokens_per_iteration": args.tokens_per_iteration, "gamma": args.gamma}
    elif args.gamma is not None:
        raise _UsageError("spectheory gamma: error: --gamma goes with --tokens-per-iteration")
    else:
        alphas = args.alpha
    c_hat = args.c if args.c_hat is None else args.c_hat
    results = [gamma_table(alpha, args.c, c_hat, args.gamma_max) for alpha in alphas]
    if args.json:
        documents = [dict(result.as_dict(), **({"implied_from": implied_from} if implied_from else {}))
                     for result in results]
        print(json.dumps(documents, indent=2, allow_nan=False))
        return 0
    if implied_from:
        print(f"{args.tokens_per_iteration:g} tokens per iteration at gamma = {args.gamma} implies "
              f"alpha = {alphas[0]:.6f} (inverse of Eq. 1)\n")
    render = format_latex if args.latex else format_text
    print("\n\n".join(render(result) for result in results))
    return 0


def _add_simulate(commands) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="Monte-Carlo tokens per iteration and speedup, beside their closed forms",
        description="Simulate speculative iterations and compare the mean tokens per iteration (with its "
                    "standard error) and the walltime speedup with the closed forms: Eq. 1 and Theorem 3.8 "
                    "(iid, token-level), the position-dependent product (positional), the exact Markov "
                    "expectation (markov).",
    )
    simulate.add_argument("--process", choices=PROCESSES, default="iid",
                          help="acceptance process (default iid); token-level draws real tokens from a family")
    simulate.add_argument("--alpha", type=float, help="acceptance rate for iid; target mean alpha for token-level")
    simulate.add_argument("--gamma", type=int, help="draft tokens per iteration (positional: defaults to the "
                                                    "number of --acceptance rates)")
    simulate.add_argument("--acceptance", type=float, nargs="+", metavar="A",
                          help="positional: acceptance rate of draft position 1, 2, ... given the ones before")
    simulate.add_argument("--regime-acceptance", type=float, nargs="+", metavar="A",
                          help="markov: acceptance rate in each regime")
    simulate.add_argument("--transition", type=float, nargs="+", metavar="P",
                          help="markov: K x K regime transition matrix, row-major")
    simulate.add_argument("--family", choices=FAMILIES, default="mixture",
                          help="token-level: synthetic (p, q) family (default mixture)")
    simulate.add_argument("--vocabulary", type=int, default=100, help="token-level: vocabulary size (default 100)")
    simulate.add_argument("--lenience", type=float, default=1.0, help="token-level: lenience l in (0, 1] (default 1)")
    simulate.add_argument("--verifier", choices=VERIFIERS, default="token",
                          help="token-level: token (Algorithm 1) or block (Sun et al.) verification")
    simulate.add_argument("--c", type=float, default=0.0, help="cost of a draft call relative to a target call")
    simulate.add_argument("--n", type=int, default=100_000, help="iterations to simulate (default 100000)")
    simulate.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(run=_run_simulate)


def _simulation_spec(args: argparse.Namespace) -> SimulationSpec:
    gamma = args.gamma
    if gamma is None:
        if args.process != "positional" or args.acceptance is None:
            raise _UsageError("spectheory simulate: error: --gamma is required")
        gamma = len(args.acceptance)
    return SimulationSpec(process=args.process, gamma=gamma, c=args.c, iterations=args.n, alpha=args.alpha,
                          acceptance=None if args.acceptance is None else tuple(args.acceptance),
                          regime_acceptance=None if args.regime_acceptance is None else tuple(args.regime_acceptance),
                          transition=None if args.transition is None else tuple(args.transition),
                          family=args.family, vocabulary=args.vocabulary, lenience=args.lenience,
                          verifier=args.verifier)


def _run_simulate(args: argparse.Namespace) -> int:
    spec = _simulation_spec(args)
    if args.seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {args.seed}")

    def progress(sizes):
        """Counts iterations (streams for markov), shown on a terminal once a run takes over a second."""
        unit = " streams" if spec.process == "markov" else " iterations"
        with tqdm(total=sum(sizes), desc="simulate", unit=unit, unit_scale=True, delay=1.0, disable=None,
                  file=sys.stderr) as bar:
            for size in sizes:
                yield size
                bar.update(size)

    summary = run_simulation(np.random.default_rng(args.seed), spec, seed=args.seed, progress=progress)
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2, allow_nan=False))
        return 0
    print(f"process {spec.process}, gamma = {spec.gamma}, c = {spec.c:g}, {spec.iterations} iterations, "
          f"seed {args.seed}; alpha = {summary.alpha:.6f}")
    print(f"tokens per iteration: simulated {summary.mean_tokens_per_iteration:.5f} "
          f"+- {summary.standard_error:.5f} (1 SE), theory {summary.theory_tokens_per_iteration:.5f}, "
          f"z = {summary.z_score:+.2f}")
    print(f"walltime speedup:     simulated {summary.speedup:.5f} +- {summary.speedup_standard_error:.5f}, "
          f"theory {summary.theory_speedup:.5f}")
    if "eq1_at_mean_alpha" in summary.extra:
        print(f"Eq. 1 at the same mean alpha would say {summary.extra['eq1_at_mean_alpha']:.5f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectheory", description="Speculative decoding: theory, simulation, decoders, audits.")
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    _add_gamma(commands)
    _add_simulate(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    prog = parser.prog
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise _UsageError(f"{prog}: error: a command is required (see {prog} --help)")
        prog = f"{prog} {args.command}"
        return args.run(args)
    except _UsageError as error:
        print(error, file=sys.stderr)
    except ValueError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
