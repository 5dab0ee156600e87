"""Flags of `spectheory audit`: the sampling flags (docs/theory.md §14 gives their order and each engine's), defined
once and turned into a ``decoders.sampling.Sampling`` (the engine audit reads the ones an engine takes), and a
planted bug's own flags."""

from __future__ import annotations

import argparse

__all__ = ["add_sampling_arguments", "sampling_from", "logit_bias", "flags_of", "mutant_presets", "cited"]


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
    if temperature:
        group.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, 0 = greedy (default 1)")
    group.add_argument("--top-k", type=int, help="keep the k most likely tokens")
    group.add_argument("--top-p", type=float, help="keep the smallest set of tokens with mass >= p")
    group.add_argument("--min-p", type=float, help="keep the tokens at least this times as likely as the most likely")
    group.add_argument("--stop", type=int, nargs="+", metavar="TOKEN", default=[],
                       help="token ids that end a row (vLLM's stop_token_ids): nothing follows one; the audits pad "
                            "a row that stopped with its stop token")
    grammar = group.add_mutually_exclusive_group()
    grammar.add_argument("--regex", metavar="R", help="constrain the output to this regular expression (xgrammar; "
                         "needs --stop, the token that ends a complete output; a tiny model's token i is the letter "
                         "chr(97 + i), the shipped pair's are characters)")
    grammar.add_argument("--json-schema", metavar="FILE", help="constrain the output to JSON of this schema (xgrammar)")
    grammar.add_argument("--grammar", metavar="FILE", help="constrain the output to this EBNF grammar (xgrammar's "
                         "GBNF dialect, root rule `root`)")


def sampling_from(args: argparse.Namespace):
    """The ``Sampling`` the flags ask for (its checks name a bad value's flag); its grammar is a ``GrammarSpec``,
    compiled once the model's vocabulary is known (``Sampling.bound``)."""
    from decoders.grammar import GrammarSpec
    from decoders.sampling import Sampling
    from decoders.harness.inputs import read_text

    grammar = None
    if getattr(args, "regex", None) is not None:
        grammar = GrammarSpec("regex", args.regex)
    for kind, path in (("json-schema", getattr(args, "json_schema", None)), ("ebnf", getattr(args, "grammar", None))):
        if path is not None:
            grammar = GrammarSpec(kind, read_text(path, f"--{'grammar' if kind == 'ebnf' else kind}"))
    return Sampling(getattr(args, "temperature", 1.0), args.top_k, args.top_p, args.min_p, args.repetition_penalty,
                    args.frequency_penalty, args.presence_penalty, args.penalize_prompt, tuple(args.logit_bias),
                    tuple(args.stop), grammar)


def flags_of(sampling) -> list:
    """The flags that ask for ``sampling`` (its settings that differ from the defaults), e.g. a mutant's."""
    flags = ["--temperature", f"{sampling.temperature!r}"]
    for flag, value, default in (("--top-k", sampling.top_k, None), ("--top-p", sampling.top_p, None),
                                 ("--min-p", sampling.min_p, None),
                                 ("--repetition-penalty", sampling.repetition_penalty, 1.0),
                                 ("--frequency-penalty", sampling.frequency_penalty, 0.0),
                                 ("--presence-penalty", sampling.presence_penalty, 0.0)):
        if value != default:
            flags += [flag, f"{value!r}"]
    if sampling.penalize_prompt:
        flags.append("--penalize-prompt")
    if sampling.logit_bias:
        flags += ["--logit-bias"] + [f"{token}={bias!r}" for token, bias in sampling.logit_bias]
    if sampling.stop:
        flags += ["--stop"] + [str(token) for token in sampling.stop]
    if sampling.grammar is not None:  # a mutant's grammar is a regex: its text is the flag's value
        flags += [sampling.grammar.flag, sampling.grammar.source]
    return flags


def mutant_presets(argv: list) -> list:
    """A mutant's own flags (its sampling, and small models where whole runs see it; a tree mutant's decoder,
    verifier, models, tree and horizon), parsed before the user's, which override them: `audit --mutant NAME` alone
    audits the bug where it shows, and a bare `--exact` by the bug's own method (``spectheory.cli.audit``)."""
    from decoders.audit.mutants import MUTANTS
    from decoders.audit.tree_mutants import TREE_MUTANTS

    name = argv[argv.index("--mutant") + 1] if "--mutant" in argv[:-1] else None
    chain = {m.name: m for m in MUTANTS}.get(name)
    tree = {m.name: m for m in TREE_MUTANTS}.get(name)
    if chain is not None and chain.exact != "dp":  # whole runs branch on every draw: V = 3, gamma 1, short rows
        return [*flags_of(chain.shows_with), "--vocabulary", "3", "--gamma", "1", "--draft", "tabular", "--horizon",
                "2" if chain.exact == "batch" else "3"]
    if chain is not None:
        return flags_of(chain.shows_with)
    if tree is not None:
        return ["--decoder", "tree", "--verifier", tree.verifier, *flags_of(tree.shows_with), *tree.audit]
    return []


def cited(name: str, shipped: str) -> str:
    """A planted bug's name for the help, with where an engine shipped it."""
    return f"{name} ({shipped})" if shipped else name
