"""Flags of `spectheory bench` that choose what is compared instead of the default sweep: transformers' generate
(--hf), trees against chains (--tree) or draft-length policies (--policies); and the combinations refused."""

from __future__ import annotations

import argparse

from measure.policy_bench import BENCH_POLICIES
from measure.tree_bench import TREE_BUDGETS

__all__ = ["add_comparison_arguments", "check_comparison"]


def add_comparison_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hf", action="store_true", help="also compare with Hugging Face generate and assisted "
                        "generation (a pair of TinyGPTs, converted, or of model directories)")
    parser.add_argument("--hf-gamma", type=int, help="assistant tokens for the comparison (default: best gamma at T=0)")
    parser.add_argument("--tree", action="store_true", help="instead: the optimal draft tree against the chain at each "
                        "node budget, T = 0 (docs/theory.md §12)")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(TREE_BUDGETS), metavar="N",
                        help="--tree: nodes per verify call, the root included (default 4 8 16 32)")
    parser.add_argument("--dynamic", metavar="K:D", help="--tree: EAGLE-2's dynamic tree at each budget, K:D branching:depth")
    parser.add_argument("--policies", nargs="*", metavar="NAME", help="instead: draft-length policies against the "
                        f"fixed --gammas at each temperature (docs/theory.md §13); no names: all of {' '.join(BENCH_POLICIES)}")


def check_comparison(args: argparse.Namespace) -> None:
    """One comparison at a time, and its own flags only with it (a ``ValueError`` naming the flag)."""
    if args.hf_gamma is not None and not args.hf:
        raise ValueError(f"--hf-gamma {args.hf_gamma} applies to the Hugging Face comparison: add --hf")
    if args.dynamic is not None and not args.tree:
        raise ValueError(f"--dynamic {args.dynamic} adds dynamic trees to the tree comparison: add --tree")
    if args.policies is not None and (args.hf or args.tree):
        raise ValueError("--policies compares draft-length policies in our decoder: --hf and --tree do not apply")
    if args.tree and args.hf:
        raise ValueError("--tree compares trees with chains in our decoders: --hf does not apply")
