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


AUDIT_DRAFTS = "tabular, tinygpt, ngram, copy, random"  # decoders.audit.setups.DRAFTS (imported lazily: torch)
AUDIT_MUTANTS = ("residual-from-p, ratio-q-over-p, q-at-temperature-1, filter-on-target-only, no-rollback, "
                 "verify-one-late, rejected-token-kept, one-uniform, bonus-from-draft, silent-lenience")


def _add_audit(commands) -> None:
    audit = commands.add_parser(
        "audit",
        help="prove or test that a decoder samples exactly the target's distribution",
        description="Audit a decoder configuration on tiny seeded models. By default a statistical audit: n "
                    "sampled continuations tested with randomized PIT (Kolmogorov-Smirnov under three token "
                    "orderings) and a G-test on the first tokens, Bonferroni-combined. With --exact, the "
                    "decoder's exact law of the first --horizon tokens by enumerating its random choices. "
                    "Exit status 0 when it passes, 1 when it fails, 2 for bad arguments.",
    )
    audit.add_argument("--decoder", choices=("speculative", "autoregressive"), default="speculative",
                       help="the decoder to audit (default speculative)")
    audit.add_argument("--mutant", metavar="NAME", help=f"audit a planted-bug speculative decoder: {AUDIT_MUTANTS}")
    audit.add_argument("--target", choices=("tabular", "tinygpt"), default="tinygpt",
                       help="tiny target model (default tinygpt)")
    audit.add_argument("--draft", default="tabular", help=f"tiny draft model: {AUDIT_DRAFTS} (default tabular)")
    audit.add_argument("--vocabulary", type=int, default=5, help="vocabulary of the tiny models (default 5)")
    audit.add_argument("--verifier", choices=VERIFIERS, default="token", help="token (Algorithm 1) or block verification")
    audit.add_argument("--gamma", type=int, default=2, help="draft tokens per iteration (default 2)")
    audit.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, 0 = greedy (default 1)")
    audit.add_argument("--top-k", type=int, help="keep the k most likely tokens")
    audit.add_argument("--top-p", type=float, help="keep the smallest set of tokens with mass >= p")
    audit.add_argument("--lenience", type=float, default=1.0, help="lenience l in (0, 1] (default 1: exact)")
    audit.add_argument("--prompt", type=int, nargs="+", default=[1, 2], metavar="TOKEN", help="prompt (default 1 2)")
    audit.add_argument("--horizon", type=int, default=4, help="tokens generated per sample (default 4)")
    audit.add_argument("--n", type=int, default=20_000, help="statistical: samples (default 20000)")
    audit.add_argument("--level", type=float, default=0.01, help="statistical: significance level (default 0.01)")
    audit.add_argument("--seed", type=int, default=0, help="statistical: random seed (default 0)")
    audit.add_argument("--exact", nargs="?", const="dp", choices=("dp", "whole-run"),
                       help="enumerate exactly instead: dp (prefix dynamic programme, default) or whole-run")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(run=_run_audit)


def _run_audit(args: argparse.Namespace) -> int:
    import torch

    from decoders.audit import exact, setups, statistical
    from decoders.audit.mutants import mutant
    from decoders.autoregressive import generate_autoregressive
    from decoders.sampling import Sampling
    from decoders.speculative import REFERENCE_STEP, SpeculativeConfig

    for name in ("horizon", "n"):
        if getattr(args, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(args, name)}")
    if args.seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {args.seed}")
    if args.mutant is not None and args.decoder != "speculative":
        raise ValueError(f"mutants are speculative decoders, got --decoder {args.decoder}")
    sampling = Sampling(args.temperature, args.top_k, args.top_p)
    config = SpeculativeConfig(args.gamma, sampling, args.lenience, args.verifier)
    step = REFERENCE_STEP if args.mutant is None else mutant(args.mutant).step
    dtype = torch.float64 if args.exact else torch.float32
    target = setups.tiny_target(args.target, args.vocabulary, dtype=dtype)
    draft = setups.tiny_draft(args.draft, target, dtype=dtype) if args.decoder == "speculative" else None
    if any(not 0 <= token < args.vocabulary for token in args.prompt):
        raise ValueError(f"prompt tokens must be in [0, {args.vocabulary}), got {args.prompt}")
    if args.decoder == "speculative":
        generate = setups.speculative_run(target, draft, args.prompt, config, args.horizon, step=step)
        described = (f"speculative ({args.mutant or 'reference'}), {args.verifier} verifier, gamma {args.gamma}, "
                     f"lenience {args.lenience:g}, draft {args.draft}")
    else:
        def generate(prompts, randomness):
            return generate_autoregressive(target, prompts, max_new_tokens=args.horizon, sampling=sampling,
                                           randomness=randomness).tokens
        described = "autoregressive"
    described += f"; target {args.target}, V = {args.vocabulary}, {sampling}, prompt {args.prompt}, horizon {args.horizon}"
    if args.exact:
        reference = exact.autoregressive_law(target, args.prompt, sampling, args.horizon)
        method = args.exact if args.decoder == "speculative" else "whole-run"  # the DP is speculative's
        if method == "dp":
            law, branches = exact.speculative_law(target, draft, args.prompt, config, args.horizon, step=step)
        else:
            law, branches = exact.whole_run_law(lambda randomness: generate([args.prompt], randomness)[0])
        report = exact.compare_laws(law, reference, method=method, horizon=args.horizon, branches=branches)
        summary = (f"exact ({method}): {report.branches} branches, {report.sequences} sequences, total mass "
                   f"{report.total_mass:.15f}, max |law - target| {report.max_abs_difference:.3g}, total variation "
                   f"{report.total_variation:.3g}, tolerance {report.tolerance:g}")
    else:
        report = statistical.audit_sampler(setups.sampler(generate, args.prompt, args.horizon), target, args.prompt,
                                           sampling, n=args.n, horizon=args.horizon, seed=args.seed, draft=draft,
                                           level=args.level)
        tests = ", ".join(f"{name} {value:.3g}" for name, value in report.test_p_values.items())
        summary = (f"statistical: n = {report.n}, p = {report.p_value:.3g} (Bonferroni over {report.tests} tests: "
                   f"{tests}), level {report.level:g}; detects a per-position TV of {report.detectable_tv:.4f} "
                   f"with 90% power; {report.seconds:.1f} s")
    if args.json:
        print(json.dumps({"decoder": described, **report.as_dict()}, indent=2, allow_nan=False))
    else:
        print(f"audit: {described}")
        print(f"{summary}: {'PASS' if report.passed else 'FAIL'}")
    return 0 if report.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectheory", description="Speculative decoding: theory, simulation, decoders, audits.")
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    _add_gamma(commands)
    _add_simulate(commands)
    _add_audit(commands)
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
