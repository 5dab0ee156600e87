"""Simulate speculative iterations and compare the mean tokens per iteration (with its standard error) and
the walltime speedup with the closed forms: Eq. 1 and Theorem 3.8 (iid, token-level), the
position-dependent product (positional), the exact Markov expectation (markov)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from cli import UsageError
from decoders.progress import progress_bar
from plumbing.validation import as_non_negative_int
from sims.families import FAMILIES
from sims.run import PROCESSES, SimulationSpec, run_simulation
from spectheory.block_verification import CHAIN_VERIFIERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--process",
        choices=PROCESSES,
        default="iid",
        help="acceptance process (default iid); token-level draws real tokens from a family",
    )
    parser.add_argument("--alpha", type=float, help="acceptance rate for iid; target mean alpha for token-level")
    parser.add_argument(
        "--gamma",
        type=int,
        help="draft tokens per iteration, at most 1024 (a chunk's memory grows "
        "with it; positional: defaults to the number of --acceptance rates)",
    )
    parser.add_argument(
        "--acceptance",
        type=float,
        nargs="+",
        metavar="A",
        help="positional: acceptance rate of draft position 1, 2, ... given the ones before",
    )
    parser.add_argument(
        "--regime-acceptance", type=float, nargs="+", metavar="A", help="markov: acceptance rate in each regime"
    )
    parser.add_argument(
        "--transition", type=float, nargs="+", metavar="P", help="markov: K x K regime transition matrix, row-major"
    )
    parser.add_argument(
        "--family", choices=FAMILIES, default="mixture", help="token-level: synthetic (p, q) family (default mixture)"
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=100,
        help="token-level: vocabulary size, at most 10000 (memory per context; default 100)",
    )
    parser.add_argument("--lenience", type=float, default=1.0, help="token-level: lenience l in (0, 1] (default 1)")
    parser.add_argument(
        "--verifier",
        choices=CHAIN_VERIFIERS,
        default="token",
        help="token-level: token (Algorithm 1) or block (Sun et al.) verification",
    )
    parser.add_argument("--c", type=float, default=0.0, help="cost of a draft call relative to a target call")
    parser.add_argument("--n", type=int, default=100_000, help="iterations to simulate, at most 10^9 (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _spec(args: argparse.Namespace) -> SimulationSpec:
    gamma = args.gamma
    if gamma is None:
        if args.process != "positional" or args.acceptance is None:
            raise UsageError("spectheory simulate: error: --gamma is required")
        gamma = len(args.acceptance)
    optional = {
        name: None if getattr(args, name) is None else tuple(getattr(args, name))
        for name in ("acceptance", "regime_acceptance", "transition")
    }
    return SimulationSpec(
        process=args.process,
        gamma=gamma,
        c=args.c,
        iterations=args.n,
        alpha=args.alpha,
        family=args.family,
        vocabulary=args.vocabulary,
        lenience=args.lenience,
        verifier=args.verifier,
        **optional,
    )


def _progress(unit: str):
    """Counts iterations (streams for markov), shown on a terminal once a run takes over a second."""

    def progress(sizes):
        with progress_bar(None, total=sum(sizes), desc="simulate", unit=unit, unit_scale=True) as bar:
            for size in sizes:
                yield size
                bar.update(size)

    return progress


def run(args: argparse.Namespace) -> int:
    spec = _spec(args)
    as_non_negative_int("seed", args.seed)
    unit = " streams" if spec.process == "markov" else " iterations"
    summary = run_simulation(np.random.default_rng(args.seed), spec, seed=args.seed, progress=_progress(unit))
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2, allow_nan=False))
        return 0
    print(
        f"process {spec.process}, gamma = {spec.gamma}, c = {spec.c:g}, {spec.iterations} iterations, "
        f"seed {args.seed}; alpha = {summary.alpha:.6f}"
    )
    print(
        f"tokens per iteration: simulated {summary.mean_tokens_per_iteration:.5f} "
        f"+- {summary.standard_error:.5f} (1 SE), theory {summary.theory_tokens_per_iteration:.5f}, "
        f"z = {summary.z_score:+.2f}"
    )
    print(
        f"walltime speedup:     simulated {summary.speedup:.5f} +- {summary.speedup_standard_error:.5f}, "
        f"theory {summary.theory_speedup:.5f}"
    )
    if "eq1_at_mean_alpha" in summary.extra:
        print(f"Eq. 1 at the same mean alpha would say {summary.extra['eq1_at_mean_alpha']:.5f}")
    return 0
