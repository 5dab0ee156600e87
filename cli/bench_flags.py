"""Flags of `spectheory bench` that choose what is compared instead of the default sweep: transformers' generate
(--hf), trees against chains (--tree), draft-length policies (--policies) or a serving engine's own speculation
(--engine, --against); and the combinations refused."""

from __future__ import annotations

import argparse

from decoders.bench.policy_bench import BENCH_POLICIES
from decoders.bench.spec_bench.questions import is_spec_bench
from decoders.bench.tree_bench import BENCH_TREE_BUDGETS
from decoders.engines import engine_usages
from decoders.sampling import Sampling
from spectheory.vocabularies import METHODS as CROSS_METHODS

__all__ = ["add_comparison_arguments", "check_comparison", "BESIDE_HELP", "check_cross_vocabulary"]

BESIDE_HELP = (
    "--cross-vocabulary: drafts that read --target's own tokens (e.g. copy, ngram, layerskip:K, smollm2-draft), "
    "each timed at every gamma by our speculative decoding in the same interleaved run, with its forecast and answer"
)


def check_cross_vocabulary(args: argparse.Namespace) -> None:
    """``--cross-vocabulary``'s methods known, and ``--beside`` only beside it with each draft named once (a
    ``ValueError`` naming the flag and value); bench and report share it."""
    for method in args.cross_vocabulary or ():
        if method not in CROSS_METHODS:
            raise ValueError(f"--cross-vocabulary {method}: the methods are {', '.join(CROSS_METHODS)}")
    if args.beside is None:
        return
    if args.cross_vocabulary is None:
        raise ValueError(
            f"--beside {' '.join(args.beside)} times same-tokenizer drafts beside a draft with another tokenizer: "
            f"add --cross-vocabulary"
        )
    twice = sorted({name for name in args.beside if args.beside.count(name) > 1})
    if twice:
        raise ValueError(f"--beside {' '.join(args.beside)}: {', '.join(twice)} named more than once")


def add_comparison_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hf",
        action="store_true",
        help="also compare with Hugging Face generate and assisted "
        "generation (a pair of TinyGPTs, converted, or of model directories)",
    )
    parser.add_argument("--hf-gamma", type=int, help="assistant tokens for the comparison (default: best gamma at T=0)")
    parser.add_argument(
        "--tree",
        action="store_true",
        help="instead: the optimal draft tree against the chain at each node budget, T = 0 (docs/theory-trees.md §12)",
    )
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=list(BENCH_TREE_BUDGETS),
        metavar="N",
        help="--tree: nodes per verify call, the root included (default 4 8 16 32)",
    )
    parser.add_argument(
        "--dynamic", metavar="K:D", help="--tree: EAGLE-2's dynamic tree at each budget, K:D branching:depth"
    )
    parser.add_argument(
        "--policies",
        nargs="*",
        metavar="NAME",
        help="instead: draft-length policies against the "
        f"fixed --gammas at each temperature (docs/theory.md §13); no names: all of {' '.join(BENCH_POLICIES)}",
    )
    parser.add_argument(
        "--engine",
        metavar="ENGINE",
        help=f"instead: a serving engine's speed with and without its "
        f"speculation: {engine_usages()} (a local engine on --target's GGUF file, default smollm2; "
        f"a server that speculates by its own settings with --against the plain server's URL; "
        f"docs/engines.md)",
    )
    parser.add_argument("--against", metavar="URL", help="--engine URL: the same model served without speculation")
    parser.add_argument(
        "--cross-vocabulary",
        nargs="+",
        metavar="METHOD",
        help=f"instead: a --draft with another tokenizer than --target's, verified by each METHOD of "
        f"{' '.join(CROSS_METHODS)} (docs/theory-vocabularies.md §15), against our autoregressive decoding, with a "
        f"forecast from --forecast-prompts other prompts (default 4); with --hf transformers' generate and its "
        f"assisted generation with both tokenizers beside it",
    )
    parser.add_argument("--beside", nargs="+", metavar="DRAFT", help=BESIDE_HELP)


def _comparisons(args: argparse.Namespace) -> dict:
    """The other comparisons, each flag with whether it was given."""
    return {"--hf": args.hf, "--tree": args.tree, "--policies": args.policies is not None, "--engine": args.engine}


def check_comparison(args: argparse.Namespace, sampling: Sampling) -> None:
    """One comparison at a time, and its own flags only with it (a ``ValueError`` naming the flag); ``sampling``:
    what the sampling flags besides the temperatures ask for."""
    sampling_given = sampling != Sampling()
    check_cross_vocabulary(args)
    if sampling_given and (args.hf or args.engine):
        raise ValueError(
            f"--{'hf' if args.hf else 'engine'} compares at --temperatures only: drop the other sampling "
            f"flags ({sampling})"
        )
    if args.requests is not None and not args.concurrency:
        raise ValueError(
            f"--requests {args.requests} is the count of requests at each --concurrency: add --concurrency"
        )
    if args.concurrency and not args.engine:
        raise ValueError(
            f"--concurrency {' '.join(map(str, args.concurrency))} puts an --engine under load; our decoders' batch "
            f"sweep is --batch-sizes"
        )
    if args.against is not None and args.engine is None:
        raise ValueError(f"--against {args.against} is the plain server beside --engine URL: add --engine")
    sampled = any(args.temperatures or ())
    if (
        args.engine
        and args.temperatures
        and (len(args.temperatures) > 1 or sampled and (args.against or is_spec_bench(args.task)))
    ):
        raise ValueError(
            f"--temperatures {' '.join(f'{t:g}' for t in args.temperatures)}: --engine benches one temperature at a "
            f"time, and its Spec-Bench table and --against servers greedy only"
        )
    if args.engine and (args.hf or args.tree or args.policies is not None):
        raise ValueError("--engine measures the engine's own speculation: --hf, --tree and --policies do not apply")
    if (
        is_spec_bench(args.task)
        and not args.engine
        and (sampling_given or args.hf or args.tree or args.policies is not None or args.batch_sizes)
    ):
        raise ValueError(
            f"--task {args.task} measures the greedy table only: drop --hf, --tree, --policies, "
            f"--batch-sizes and the sampling flags"
        )
    if is_spec_bench(args.task) and args.text is not None:
        raise ValueError(
            f"--text {args.text}: Spec-Bench's questions are the prompts; drop --text or --task {args.task}"
        )
    if args.hf_gamma is not None and not args.hf:
        raise ValueError(f"--hf-gamma {args.hf_gamma} applies to the Hugging Face comparison: add --hf")
    if args.dynamic is not None and not args.tree:
        raise ValueError(f"--dynamic {args.dynamic} adds dynamic trees to the tree comparison: add --tree")
    if args.policies is not None and (args.hf or args.tree):
        raise ValueError("--policies compares draft-length policies in our decoder: --hf and --tree do not apply")
    if args.forecast_prompts and (args.against or args.tree or args.policies is not None):
        raise ValueError(
            f"--forecast-prompts {args.forecast_prompts} forecasts a gamma sweep or Spec-Bench's table, "
            f"ours or an engine's: --against, --tree (its --dynamic rows carry their own) and --policies "
            f"do not take it"
        )
    if args.cross_vocabulary is not None:
        others = [flag for flag, given in _comparisons(args).items() if given and flag != "--hf"]
        if others or sampling_given or args.task is not None:
            raise ValueError(
                f"--cross-vocabulary measures a draft of another tokenizer at --temperatures only: drop "
                f"{', '.join(others) or 'the sampling flags and --task'}"
            )
    if args.tree and args.hf:
        raise ValueError("--tree compares trees with chains in our decoders: --hf does not apply")
