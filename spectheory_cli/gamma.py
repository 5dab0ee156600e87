"""For each alpha, a table of gamma -> expected tokens per iteration (Eq. 1), walltime speedup (Theorem 3.8)
and arithmetic-operations factor (Theorem 3.11), with the optimal gamma marked. gamma = 0 is autoregressive
decoding. With --costs (a `spectheory profile` file) or the --t-* flags, the speedup comes from measured costs
(docs/theory.md §10), Theorem 3.8 beside it. --from-metrics reads an engine's counters (vLLM's Prometheus
dump, SGLang's meta_info, llama.cpp's timings) and answers at the alpha they imply (docs/metrics.md)."""

from __future__ import annotations

import argparse
import json

from spectheory.calculator import format_latex, format_text, gamma_table
from spectheory_cli import UsageError, calibrated, from_metrics
from spectheory_cli.calibrated import COST_FLAGS, add_cost_flags
from spectheory.metrics import DEFINITIONS
from spectheory.speedup import alpha_from_tokens_per_iteration

__doc__ += "\n\nacceptance, in the names every JSON of this toolkit uses:\n" + "\n".join(
    f"  {name}: {meaning}" for name, meaning in DEFINITIONS.items())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--alpha", type=float, nargs="+", metavar="A",
                        help="mean acceptance rate(s) alpha = E[beta], in [0, 1]")
    source.add_argument("--tokens-per-iteration", type=float, metavar="X",
                        help="measured mean tokens per iteration (with the bonus/correction token); "
                             "with --gamma, reports the implied alpha and its table")
    source.add_argument("--from-metrics", metavar="FILE",
                        help="an engine's counters: vLLM's Prometheus text (/metrics), an SGLang response or its "
                             "meta_info (JSON), a llama.cpp server response or its timings (JSON)")
    parser.add_argument("--gamma", type=int, metavar="G",
                        help="the gamma at which --tokens-per-iteration was measured; with --from-metrics, the "
                             "engine's draft length where its counters do not say (SGLang, llama.cpp)")
    parser.add_argument("--c", type=float, default=0.0, help="cost of a draft call relative to a target call (default 0)")
    parser.add_argument("--c-hat", type=float, default=None,
                        help="draft arithmetic per token relative to the target's (default: equal to --c)")
    parser.add_argument("--gamma-max", type=int, default=16, help="largest gamma considered (default 16)")
    costs = parser.add_argument_group("measured costs (docs/theory.md §10)")
    costs.add_argument("--costs", metavar="FILE", help="a cost profile written by `spectheory profile --out`")
    add_cost_flags(costs)
    costs.add_argument("--pair", nargs=2, metavar=("TARGET", "DRAFT"),
                       help="refuse a --costs profile of another pair (names as `spectheory profile` records them)")
    costs.add_argument("--acceptance", type=float, nargs="+", metavar="A",
                       help="per-position acceptance a_1, a_2, ... (instead of Eq. 1 at --alpha)")
    costs.add_argument("--acceptance-from", metavar="FILE",
                       help="with --costs: the acceptance, its outcomes along the texts and the draft's proposal "
                            "lengths of another profile or bench file (a forecast: costs from one device, acceptance "
                            "measured on another; docs/gpu.md)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document: a list, one object per alpha")
    output.add_argument("--latex", action="store_true", help="print LaTeX tabulars")


def run(args: argparse.Namespace) -> int:
    if args.from_metrics:
        return from_metrics.run(args)
    if args.costs or any(getattr(args, name) is not None for name in COST_FLAGS):
        return calibrated.run(args)
    if args.alpha is None and args.tokens_per_iteration is None:
        raise UsageError("spectheory gamma: error: one of the arguments --alpha --tokens-per-iteration --from-metrics is required")
    implied_from = None
    if args.tokens_per_iteration is not None:
        if args.gamma is None:
            raise UsageError("spectheory gamma: error: --tokens-per-iteration needs --gamma")
        alphas = [float(alpha_from_tokens_per_iteration(args.tokens_per_iteration, args.gamma))]
        implied_from = {"tokens_per_iteration": args.tokens_per_iteration, "gamma": args.gamma}
    elif args.gamma is not None:
        raise UsageError("spectheory gamma: error: --gamma goes with --tokens-per-iteration")
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
