"""Flags of `spectheory audit`: the sampling flags (docs/theory-sampling.md §14 gives their order and each engine's),
defined once and turned into a ``decoders.sampling.Sampling`` (the engine audit reads the ones an engine takes), and
whose sampler is audited."""

from __future__ import annotations

import argparse

from decoders.bench.inputs import read_text
from decoders.grammar import GrammarSpec
from decoders.sampling import Sampling

__all__ = ["add_sampling_arguments", "add_sampler_arguments", "sampling_from", "logit_bias"]


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


def add_sampling_arguments(parser: argparse.ArgumentParser, temperature: bool = True) -> None:
    """The sampling flags (``temperature``: with --temperature, which bench replaces by its --temperatures)."""
    group = parser.add_argument_group("sampling, in this order (docs/theory-sampling.md §14)")
    group.add_argument(
        "--logit-bias", type=logit_bias, nargs="+", metavar="TOKEN=VALUE", default=[], help="add VALUE to TOKEN's logit"
    )
    group.add_argument(
        "--repetition-penalty",
        "--repeat-penalty",
        type=float,
        default=1.0,
        help="CTRL's rule over the prompt and the output: positive logits of seen tokens divided by it, "
        "negative ones multiplied (default 1: off)",
    )
    group.add_argument(
        "--frequency-penalty",
        type=float,
        default=0.0,
        help="minus this times each token's count in the output (default 0)",
    )
    group.add_argument(
        "--presence-penalty",
        type=float,
        default=0.0,
        help="minus this for each token present in the output (default 0)",
    )
    group.add_argument(
        "--penalize-prompt",
        action="store_true",
        help="frequency and presence penalties count the prompt's tokens too (vLLM: output only)",
    )
    if temperature:
        group.add_argument(
            "--temperature", type=float, default=1.0, help="sampling temperature, 0 = greedy (default 1)"
        )
    group.add_argument("--top-k", type=int, help="keep the k most likely tokens")
    group.add_argument("--top-p", type=float, help="keep the smallest set of tokens with mass >= p")
    group.add_argument("--min-p", type=float, help="keep the tokens at least this times as likely as the most likely")
    group.add_argument(
        "--stop",
        type=int,
        nargs="+",
        metavar="TOKEN",
        default=[],
        help="token ids that end a row (vLLM's stop_token_ids): nothing follows one; the audits pad "
        "a row that stopped with its stop token",
    )
    group.add_argument(
        "--mirostat",
        type=int,
        choices=(0, 1, 2),
        default=0,
        help="end with llama.cpp's Mirostat 1 or 2, a sampler with a state (docs/theory-sampling.md §14; default 0: "
        "off)",
    )
    group.add_argument("--mirostat-tau", type=float, default=5.0, help="Mirostat's target surprise in bits (default 5)")
    group.add_argument("--mirostat-eta", type=float, default=0.1, help="Mirostat's learning rate (default 0.1)")
    grammar = group.add_mutually_exclusive_group()
    grammar.add_argument(
        "--regex",
        metavar="R",
        help="constrain the output to this regular expression (xgrammar; "
        "needs --stop, the token that ends a complete output; a tiny model's token i is the letter "
        "chr(97 + i), the shipped pair's are characters)",
    )
    grammar.add_argument("--json-schema", metavar="FILE", help="constrain the output to JSON of this schema (xgrammar)")
    grammar.add_argument(
        "--grammar",
        metavar="FILE",
        help="constrain the output to this EBNF grammar (xgrammar's GBNF dialect, root rule `root`)",
    )


def sampling_from(args: argparse.Namespace):
    """The ``Sampling`` the flags ask for (its checks name a bad value's flag); its grammar is a ``GrammarSpec``,
    compiled once the model's vocabulary is known (``Sampling.bound``)."""

    grammar = None
    if getattr(args, "regex", None) is not None:
        grammar = GrammarSpec("regex", args.regex)
    for kind, path in (("json-schema", getattr(args, "json_schema", None)), ("ebnf", getattr(args, "grammar", None))):
        if path is not None:
            grammar = GrammarSpec(kind, read_text(path, f"--{'grammar' if kind == 'ebnf' else kind}"))
    return Sampling(
        getattr(args, "temperature", 1.0),
        args.top_k,
        args.top_p,
        args.min_p,
        args.repetition_penalty,
        args.frequency_penalty,
        args.presence_penalty,
        args.penalize_prompt,
        tuple(args.logit_bias),
        tuple(args.stop),
        grammar,
        args.mirostat,
        args.mirostat_tau,
        args.mirostat_eta,
    )


def add_sampler_arguments(parser: argparse.ArgumentParser, samplers: tuple, schedules: tuple) -> None:
    """Whose sampler `spectheory audit` tests: ours, transformers' (``samplers``; its assistant's ``schedules``) or
    an engine's samples in a file."""
    parser.add_argument(
        "--sampler",
        choices=samplers,
        default="ours",
        help="whose sampler: ours (the decoder), hf-generate (transformers' sampling) or hf-assisted "
        "(its assisted generation, with --draft as assistant); the last two on model directories, "
        "one generate call per sample (default ours)",
    )
    assisted = parser.add_argument_group("hf-assisted: transformers' assistant settings")
    assisted.add_argument("--assistant-tokens", type=int, default=5, help="num_assistant_tokens (default 5)")
    assisted.add_argument("--assistant-schedule", choices=schedules, default="constant", help="(default constant)")
    assisted.add_argument("--assistant-confidence", type=float, default=0.0, help="confidence threshold, 0 = off")
    parser.add_argument(
        "--samples",
        metavar="FILE.jsonl",
        help="audit the continuations an engine sampled instead of a decoder of ours: one line "
        '{"prompt": [ids], "tokens": [ids]} each, one prompt, as many tokens on every line (n '
        "and horizon are the file's); the sampling flags say what the engine was asked for",
    )
