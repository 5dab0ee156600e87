"""For each alpha, a table of gamma -> expected tokens per iteration (Eq. 1), walltime speedup (Theorem 3.8)
and arithmetic-operations factor (Theorem 3.11), with the optimal gamma marked. gamma = 0 is autoregressive
decoding. With --costs (a `spectheory profile` file) or the --t-* flags, the speedup comes from measured costs
(docs/theory.md §10), Theorem 3.8 beside it. --from-metrics reads an engine's counters (vLLM's Prometheus
dump, SGLang's meta_info, llama.cpp's timings) and answers at the alpha they imply (docs/metrics.md)."""

from __future__ import annotations

import argparse
import json

from cli import UsageError
from cli.options import COST_FLAGS, add_cost_flags, flag_costs
from spectheory.calculator import (
    answer_table,
    cross_vocabulary_table,
    engine_answer,
    format_cross_vocabulary_text,
    format_engine_answer,
    format_latex,
    format_text,
)
from spectheory.costs import CostProfile, profile_entries
from spectheory.goodput import crossover_batch, goodput_lines, profile_goodput_schedule
from spectheory.metrics import DEFINITIONS, estimate_alpha
from spectheory.speedup import alpha_from_tokens_per_iteration

__doc__ += "\n\nacceptance, in the names every JSON of this toolkit uses:\n" + "\n".join(
    f"  {name}: {meaning}" for name, meaning in DEFINITIONS.items()
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--alpha", type=float, nargs="+", metavar="A", help="mean acceptance rate(s) alpha = E[beta], in [0, 1]"
    )
    source.add_argument(
        "--tokens-per-iteration",
        type=float,
        metavar="X",
        help="measured mean tokens per iteration (with the bonus/correction token); "
        "with --gamma, reports the implied alpha and its table",
    )
    source.add_argument(
        "--from-metrics",
        metavar="FILE|URL",
        help="an engine's counters: vLLM's /metrics (a file, or a live server's URL), an SGLang response "
        "or its meta_info (JSON), a llama.cpp server response or its timings (JSON)",
    )
    parser.add_argument(
        "--gamma",
        type=int,
        metavar="G",
        help="the gamma at which --tokens-per-iteration was measured; with --from-metrics, the "
        "engine's draft length where its counters do not say (SGLang, llama.cpp)",
    )
    parser.add_argument(
        "--c", type=float, default=0.0, help="cost of a draft call relative to a target call (default 0)"
    )
    parser.add_argument(
        "--c-hat", type=float, help="draft arithmetic per token relative to the target's (default: --c)"
    )
    parser.add_argument("--gamma-max", type=int, default=16, help="largest gamma considered (default 16)")
    parser.add_argument(
        "--tokenization-ratio",
        type=float,
        metavar="RHO",
        help="a draft with another tokenizer: target candidates per draft token (e.g. 0.25 for a character-level "
        "draft of a BPE target); --alpha is then per target candidate (docs/theory-vocabularies.md §15)",
    )
    costs = parser.add_argument_group("measured costs (docs/theory.md §10)")
    costs.add_argument("--costs", metavar="FILE", help="a cost profile written by `spectheory profile --out`")
    add_cost_flags(costs)
    costs.add_argument(
        "--pair",
        nargs=2,
        metavar=("TARGET", "DRAFT"),
        help="refuse a --costs profile of another pair (names as `spectheory profile` records them)",
    )
    costs.add_argument(
        "--acceptance",
        type=float,
        nargs="+",
        metavar="A",
        help="per-position acceptance a_1, a_2, ... (instead of Eq. 1 at --alpha)",
    )
    costs.add_argument(
        "--acceptance-from",
        metavar="FILE",
        help="with --costs: the acceptance, its outcomes along the texts and the draft's proposal "
        "lengths of another profile or bench file (a forecast: costs from one device, acceptance "
        "measured on another; docs/gpu.md)",
    )
    output = parser.add_mutually_exclusive_group()
    costs.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        metavar="B",
        help="with measured costs: the goodput-optimal gamma at each of these batch sizes and where speculation stops "
        "paying (docs/theory-goodput.md §16; the verify calls must reach B (gamma + 1) positions)",
    )
    output.add_argument("--json", action="store_true", help="print one JSON document: a list, one object per alpha")
    output.add_argument("--latex", action="store_true", help="print LaTeX tabulars")


def _entries(args: argparse.Namespace, alpha: float | None) -> tuple[dict, str]:
    """The measured costs of the flags (``profile_entries``): the profile, the --t-* flags, the acceptance."""
    return profile_entries(
        args.costs,
        flag_costs(args),
        pair=args.pair,
        acceptance=args.acceptance,
        acceptance_from=args.acceptance_from,
        alpha=alpha,
    )


def _table(args: argparse.Namespace, alpha: float | None, calibrated: bool):
    """``answer_table`` at ``alpha`` with the measured costs (``profile_entries``) where ``calibrated``."""
    if not calibrated:
        return (*answer_table(alpha, args.c, args.c_hat, args.gamma_max), None)
    entries, described = _entries(args, alpha)
    return (
        *answer_table(
            alpha, args.c, None, 0, entries=entries, described=described, per_position=args.acceptance is not None
        ),
        described,
    )


def _goodput(args: argparse.Namespace) -> int:
    """--concurrency: the goodput schedule of the measured costs (``spectheory.goodput.profile_goodput_schedule``)."""
    entries, _ = _entries(args, None if args.alpha is None else args.alpha[0])
    schedule = profile_goodput_schedule(CostProfile.from_dict(entries), args.concurrency)
    if args.json:
        rows = [choice.as_dict() for choice in schedule]
        print(json.dumps({"rows": rows, "crossover": crossover_batch(schedule)}, indent=2, allow_nan=False))
    else:
        print("\n".join(goodput_lines(schedule)))
    return 0


def run(args: argparse.Namespace) -> int:
    calibrated = bool(args.costs) or any(
        getattr(args, n) is not None for n in COST_FLAGS + ("acceptance", "acceptance_from")
    )
    if args.concurrency and (not calibrated or args.from_metrics or args.tokenization_ratio is not None):
        raise ValueError("--concurrency takes measured costs (--costs FILE or the --t-* flags) and nothing else")
    if args.tokenization_ratio is not None:
        if args.alpha is None or args.latex or calibrated or args.from_metrics:
            raise ValueError(
                "--tokenization-ratio takes --alpha (and --c, --gamma-max), printed as text or --json; not measured "
                "costs, --from-metrics or --latex"
            )
        results = [
            cross_vocabulary_table(alpha, args.c, args.tokenization_ratio, args.gamma_max) for alpha in args.alpha
        ]
        print(
            json.dumps([result.as_dict() for result in results], indent=2, allow_nan=False)
            if args.json
            else "\n\n".join(map(format_cross_vocabulary_text, results))
        )
        return 0
    if args.from_metrics:
        if args.acceptance is not None:
            raise ValueError("--from-metrics measures the acceptance itself; drop --acceptance")
        from decoders.engines.counters import read_counts_file  # here: `gamma` alone loads only the theory

        counts = read_counts_file(args.from_metrics)
        estimate = estimate_alpha(counts, args.gamma)
        table, speedups, text, _ = _table(args, estimate.alpha, args.costs or args.t_verify_ms is not None)
        answer = engine_answer(counts, estimate, table, speedups)
        print(
            json.dumps(answer, indent=2, allow_nan=False) if args.json else format_engine_answer(counts, answer, text)
        )
        return 0
    if calibrated:
        if args.tokens_per_iteration is not None or (args.alpha is not None and len(args.alpha) > 1):
            raise ValueError("measured costs take at most one --alpha")
        if args.concurrency:
            return _goodput(args)
        table, _, text, described = _table(args, None if args.alpha is None else args.alpha[0], True)
        print(json.dumps(dict(table.as_dict(), costs_from=described), indent=2, allow_nan=False) if args.json else text)
        return 0
    if args.alpha is None and args.tokens_per_iteration is None:
        raise UsageError(
            "spectheory gamma: error: one of the arguments --alpha --tokens-per-iteration --from-metrics is required"
        )
    if (args.tokens_per_iteration is None) != (args.gamma is None):
        raise ValueError(
            "--gamma goes with --tokens-per-iteration"
            if args.tokens_per_iteration is None
            else "--tokens-per-iteration needs --gamma"
        )
    implied_from = (
        None if args.gamma is None else {"tokens_per_iteration": args.tokens_per_iteration, "gamma": args.gamma}
    )
    alphas = (
        [float(alpha_from_tokens_per_iteration(args.tokens_per_iteration, args.gamma))] if implied_from else args.alpha
    )
    results = [answer_table(alpha, args.c, args.c_hat, args.gamma_max)[0] for alpha in alphas]
    if args.json:
        print(
            json.dumps(
                [
                    dict(result.as_dict(), **({"implied_from": implied_from} if implied_from else {}))
                    for result in results
                ],
                indent=2,
                allow_nan=False,
            )
        )
        return 0
    if implied_from:
        print(
            f"{args.tokens_per_iteration:g} tokens per iteration at gamma = {args.gamma} implies "
            f"alpha = {alphas[0]:.6f} (inverse of Eq. 1)\n"
        )
    print("\n\n".join((format_latex if args.latex else format_text)(result) for result in results))
    return 0
