"""Flags of `spectheory audit --mutant NAME`: a planted bug's own flags, parsed before the user's, and its name
as the help cites it."""

from __future__ import annotations

__all__ = ["flags_of", "mutant_presets", "tiny_target_flags", "cited"]


def flags_of(sampling) -> list:
    """The flags that ask for ``sampling`` (its settings that differ from the defaults), e.g. a mutant's."""
    flags = ["--temperature", f"{sampling.temperature!r}"]
    for flag, value, default in (
        ("--top-k", sampling.top_k, None),
        ("--top-p", sampling.top_p, None),
        ("--min-p", sampling.min_p, None),
        ("--repetition-penalty", sampling.repetition_penalty, 1.0),
        ("--frequency-penalty", sampling.frequency_penalty, 0.0),
        ("--presence-penalty", sampling.presence_penalty, 0.0),
    ):
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
    if sampling.mirostat:
        flags += [
            "--mirostat",
            str(sampling.mirostat),
            "--mirostat-tau",
            f"{sampling.mirostat_tau!r}",
            "--mirostat-eta",
            f"{sampling.mirostat_eta!r}",
        ]
    return flags


def mutant_presets(argv: list) -> list:
    """A mutant's own flags, parsed before the user's, which override them: `audit --mutant NAME` alone audits the bug
    where it shows (docs/decoders.md, "Planted bugs"). A chain mutant: its sampling, the small models where whole runs
    see it, its ``audit`` flags, and its own exact method (``--exact METHOD``) unless ``--n`` asks for samples; a tree
    mutant: its decoder, verifier, models, tree and horizon, statistically unless ``--exact`` is given."""
    from decoders.audit.mutants import EXACT_SIZES, MUTANTS
    from decoders.audit.tree_mutants import TREE_MUTANTS

    name = argv[argv.index("--mutant") + 1] if "--mutant" in argv[:-1] else None
    chain = {m.name: m for m in MUTANTS}.get(name)
    tree = {m.name: m for m in TREE_MUTANTS}.get(name)
    if chain is not None:
        flags = flags_of(chain.shows_with)
        if chain.exact != "dp":  # whole runs branch on every draw: their smallest sizes
            size = EXACT_SIZES[chain.exact]
            flags += [
                "--vocabulary",
                str(size["vocabulary"]),
                "--gamma",
                str(size["gamma"]),
                "--draft",
                "tabular",
                "--horizon",
                str(size["horizon"]),
            ] + (["--prompt", *map(str, size["prompt"])] if "prompt" in size else [])
        return flags + list(chain.audit) + ([] if "--n" in argv else ["--exact", chain.exact])
    if tree is not None:
        return [
            "--decoder",
            "tree",
            "--verifier",
            tree.verifier,
            *flags_of(tree.shows_with),
            *(tiny_target_flags(tree.audit) if "--exact" in argv else tree.audit),
        ]
    return []


def tiny_target_flags(flags: tuple) -> list:
    """A tree mutant's audit flags without a real target: the exact audit enumerates the tiny one (tinygpt, whose
    positions also show tree-flat-positions exactly)."""
    flags = list(flags)
    if "--target" in flags:
        at = flags.index("--target")
        del flags[at : at + 2]
    return flags


def cited(name: str, shipped: str) -> str:
    """A planted bug's name for the help, with where an engine shipped it."""
    return f"{name} ({shipped})" if shipped else name
