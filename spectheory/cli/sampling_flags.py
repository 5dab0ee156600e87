"""The sampling flags of `spectheory audit` (docs/theory.md §14 gives their order and each engine's), defined once
and turned into a ``decoders.sampling.Sampling``; the engine audit reads the ones an engine takes."""

from __future__ import annotations

import argparse

__all__ = ["add_sampling_arguments", "sampling_from", "logit_bias"]


def logit_bias(value: str) -> tuple:
    """``TOKEN=VALUE`` -> (token, bias) (an argparse type: a bad one is the usual one-line usage error)."""
    token, _, bias = value.partition("=")
    try:
        pair = (int(token), float(bias))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not TOKEN=VALUE (e.g. 3=-1.5)") from None
    if pair[0] < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: the token id must be >= 0")
    return pair


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampling, in this order (docs/theory.md §14)")
    group.add_argument("--logit-bias", type=logit_bias, nargs="+", metavar="TOKEN=VALUE", default=[],
                       help="add VALUE to TOKEN's logit")
    group.add_argument("--repetition-penalty", "--repeat-penalty", type=float, default=1.0,
                       help="CTRL's rule over the prompt and the output: positive logits of seen tokens divided by it, "
                            "negative ones multiplied (default 1: off)")
    group.add_argument("--frequency-penalty", type=float, default=0.0,
                       help="minus this times each token's count in the output (default 0)")
    group.add_argument("--presence-penalty", type=float, default=0.0,
                       help="minus this for each token present in the output (default 0)")
    group.add_argument("--penalize-prompt", action="store_true",
                       help="frequency and presence penalties count the prompt's tokens too (vLLM: output only)")
    group.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, 0 = greedy (default 1)")
    group.add_argument("--top-k", type=int, help="keep the k most likely tokens")
    group.add_argument("--top-p", type=float, help="keep the smallest set of tokens with mass >= p")
    group.add_argument("--min-p", type=float, help="keep the tokens at least this times as likely as the most likely")


def sampling_from(args: argparse.Namespace):
    """The ``Sampling`` the flags ask for (its checks name a bad value's flag)."""
    from decoders.sampling import Sampling

    return Sampling(args.temperature, args.top_k, args.top_p, args.min_p, args.repetition_penalty,
                    args.frequency_penalty, args.presence_penalty, args.penalize_prompt, tuple(args.logit_bias))
