"""Audit a decoder configuration on tiny seeded models. By default a statistical audit: n sampled continuations
tested with randomized PIT (Kolmogorov-Smirnov under three token orderings) and a G-test on the first tokens,
Bonferroni-combined. --exact: the decoder's exact law of the first --horizon tokens by enumerating its random
choices. --engine: a serving engine's sampler. Exit status 0 when it passes, 1 when it fails, 2 for bad input.

The command's own flags are here: --mutant NAME's presets (a planted bug's flags, parsed before the user's) and
--engine's (at temperature 0 an engine's greedy tokens with speculation against its plain greedy tokens at every
--gammas; above it, its samples with speculation against a second sample by the two-sample test: the engine plain,
a second server, a file, or our model of its GGUF file; docs/engines.md)."""

import argparse
import json
from dataclasses import fields

from cli.audit_flags import add_sampler_arguments, add_sampling_arguments, sampling_from
from cli.options import names
from decoders.audit.engines.request import ENGINE_PROMPT, EngineAuditRequest, audit_engine
from decoders.audit.mutants import EXACT_SIZES, MUTANTS
from decoders.audit.request import DECODERS, MAX_EXACT_BRANCHES, METHODS, SAMPLERS, AuditRequest
from decoders.audit.runs import SHIPPED_PROMPT, TEXT_PROMPT_TOKENS, deviation_lines, run_audit
from decoders.audit.setups import MAX_VOCABULARY, TARGETS
from decoders.audit.statistical import MAX_SAMPLES
from decoders.audit.tree_mutants import TREE_MUTANTS
from decoders.drafts import FROM_TARGET, SHIPPED, TINY, draft_names
from decoders.engine_results import SAMPLE_KEYS
from decoders.engines import EngineSampling, engine_usages
from decoders.models.hf_generate import SCHEDULES
from decoders.policies import POLICIES
from decoders.verification import CHAIN_VERIFIERS, TREE_VERIFIERS
from decoders.zoo import REAL_MODELS
from spectheory.vocabularies import METHODS as CROSS_METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--decoder", choices=DECODERS, default="speculative", help="the decoder to audit (default speculative)"
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help=f"audit a planted-bug speculative decoder, under its own flags "
        f"(explicit ones override): {names(cited(m.name, m.shipped) for m in MUTANTS)}; a planted "
        f"tree bug: {names(cited(m.name, m.engine) for m in TREE_MUTANTS)}",
    )
    parser.add_argument(
        "--policy",
        metavar="NAME",
        help=f"a draft-length policy for the speculative decoder, capped at "
        f"--gamma (docs/theory.md §13): {names(POLICIES)}",
    )
    parser.add_argument(
        "--tree",
        default="kary:2:2",
        metavar="SHAPE",
        help="--decoder tree: a static tree, chain:G, kary:K:D or parents:-1,0,0,1, or EAGLE-2's dynamic "
        "tree dynamic:K:D:N (branching, depth, budget; target-only verifier) (default kary:2:2)",
    )
    parser.add_argument(
        "--target",
        default="tinygpt",
        metavar="TARGET",
        help=f"tiny target model ({names(TARGETS)}), shipped (the trained target), a real model "
        f"({names(REAL_MODELS)}), a GGUF file or a Hugging Face model directory (read locally, "
        f"never downloaded); all but the tiny ones statistically only (default tinygpt)",
    )
    parser.add_argument(
        "--draft",
        help=f"tiny draft model: {names(draft_names(TINY))} (default tabular); with --target "
        f"shipped a shipped draft: {names(draft_names(SHIPPED))} (default transformer); "
        f"with a real model, GGUF file or model directory as target: a draft built from "
        f"it ({names(draft_names(FROM_TARGET))}), or a GGUF file or model directory with "
        f"the same tokenizer (or another: --cross-vocabulary, or --sampler hf-assisted)",
    )
    add_sampler_arguments(parser, SAMPLERS, SCHEDULES)
    parser.add_argument(
        "--cross-vocabulary",
        choices=CROSS_METHODS,
        help="a --draft with another tokenizer than the real --target's, verified by this method "
        "(docs/theory-vocabularies.md §15), audited statistically; --sampler hf-assisted takes such a draft "
        "without it (transformers picks its own method)",
    )
    parser.add_argument("--vocabulary", type=int, default=5, help=f"tiny models' vocabulary, 2 to {MAX_VOCABULARY}")
    parser.add_argument(
        "--verifier",
        choices=CHAIN_VERIFIERS + TREE_VERIFIERS,
        help="token (Algorithm 1, the default) or block verification; with --decoder tree "
        f"{', '.join(TREE_VERIFIERS)} (default target-only)",
    )
    parser.add_argument(
        "--gamma",
        type=int,
        default=2,
        help="draft tokens per iteration (default 2); prompt + horizon "
        "+ gamma + 1 must fit the target's context (64 for the tiny models, 256 shipped)",
    )
    parser.add_argument("--lenience", type=float, default=1.0, help="lenience l in (0, 1] (default 1: exact)")
    parser.add_argument("--prompt", type=int, nargs="+", metavar="TOKEN", help="prompt token ids (default 1 2)")
    parser.add_argument(
        "--prompt-text",
        help=f"shipped target or model directory: the prompt as text, tokenized by the "
        f"target's tokenizer (default {SHIPPED_PROMPT!r})",
    )
    parser.add_argument(
        "--text",
        metavar="FILE",
        help=f"shipped target or model directory: the prompt is a window "
        f"of {TEXT_PROMPT_TOKENS} tokens of this UTF-8 text (the whole "
        f"text if shorter), drawn with --seed",
    )
    parser.add_argument(
        "--horizon",
        type=int,
        help="tokens generated per sample (default 4; with --exact "
        "V^horizon is at most 100000, e.g. horizon 7 at V = 5)",
    )
    parser.add_argument(
        "--n",
        type=int,
        help=f"statistical: samples, 2 to {MAX_SAMPLES:,} (memory of the [n, horizon] tests; default 20000)",
    )
    parser.add_argument("--level", type=float, default=0.01, help="statistical: significance level (default 0.01)")
    parser.add_argument("--seed", type=int, default=0, help="statistical: random seed (default 0)")
    parser.add_argument(
        "--exact",
        nargs="?",
        const="",
        metavar="{" + ",".join(METHODS) + "}",
        help="enumerate exactly instead: dp (prefix dynamic programme; the default, or --mutant's own "
        "method), whole-run, or batch (whole runs of two rows of the prompt, against the product "
        f"of the target's law); counted as it runs, and refused in one line past "
        f"{MAX_EXACT_BRANCHES['dp']:,} branches (dp) or {MAX_EXACT_BRANCHES['whole-run']:,} whole "
        f"runs",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_sampling_arguments(parser)
    add_engine_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if engine_requested(args):
        document, lines = audit_engine(engine_request(args), out=args.out, command=args.command_line)
        verdict = {key: value for key, value in document.as_dict().items() if key not in SAMPLE_KEYS}
        print("\n".join(lines) + (f"\n{json.dumps(verdict, allow_nan=False)}" if args.json else ""))
        return 0 if document.passed else 1
    if args.samples is not None and (args.n is not None or args.horizon is not None):
        raise ValueError("--samples takes n and the horizon from the file: drop --n and --horizon")
    own = next((m.exact for m in MUTANTS if m.name == args.mutant), METHODS[0])  # a bare --exact: the bug's method
    given = dict(
        vars(args),
        verifier=args.verifier or ("target-only" if args.decoder == "tree" else "token"),
        exact=own if args.exact == "" else args.exact,
        sampling=sampling_from(args),
        prompt=args.prompt and tuple(args.prompt),
        horizon=4 if args.horizon is None else args.horizon,
        n=20_000 if args.n is None else args.n,
    )
    request = AuditRequest(**{f.name: given[f.name] for f in fields(AuditRequest) if f.name in given})
    outcome = run_audit(request)
    where = deviation_lines(outcome.report)  # a failed audit: where it deviates
    print(
        json.dumps({"decoder": outcome.described, **outcome.report.as_dict()}, indent=2, allow_nan=False)
        if args.json
        else f"audit: {outcome.described}\n{outcome.summary}: {'PASS' if outcome.report.passed else 'FAIL'}"
        + (f"\n{where}" if where else "")
    )
    return 0 if outcome.report.passed else 1


# --engine: a serving engine's sampler (docs/engines.md)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engines (docs/engines.md)")
    group.add_argument(
        "--engine",
        metavar="ENGINE",
        help=f"audit a serving engine: {engine_usages()} (a local engine reads --target's GGUF file, default smollm2)",
    )
    group.add_argument(
        "--against",
        metavar="WHAT",
        help="the second sample: plain (the engine without speculation, "
        "the default), a server URL, or a samples file (JSON Lines); or model: our float32 model of "
        "the same GGUF file, by the statistical audit",
    )
    group.add_argument(
        "--speculate",
        type=int,
        help="the in-process engine's draft tokens per step (default 4; a server speculates by its own settings)",
    )
    group.add_argument(
        "--gammas",
        type=int,
        nargs="+",
        default=list(range(1, 9)),
        help="temperature 0: the speculation lengths checked for greedy equality (default 1..8)",
    )
    group.add_argument("--concurrency", type=int, default=4, help="requests in flight to a server (default 4)")
    group.add_argument("--out", metavar="FILE.json", help="write the verdict and the samples as JSON")


def engine_requested(args: argparse.Namespace) -> bool:
    return args.engine is not None or args.against is not None


def engine_request(args: argparse.Namespace) -> EngineAuditRequest:
    """The engine audit the flags ask for; a ValueError naming the flags that do not apply to an engine."""
    if args.exact is not None or args.mutant or args.policy:
        raise ValueError("--engine audits the engine's own sampler: drop --exact, --mutant and --policy")
    if (
        args.frequency_penalty
        or args.presence_penalty
        or args.logit_bias
        or args.penalize_prompt
        or args.stop
        or args.regex
        or args.json_schema
        or args.grammar
        or args.mirostat
    ):
        raise ValueError(
            "--engine takes --temperature, --top-k, --top-p, --min-p and --repetition-penalty (llama.cpp's "
            "repeat_penalty); drop --frequency-penalty, --presence-penalty, --penalize-prompt, --logit-bias, "
            "--stop and the grammar, and --mirostat (llama-server takes it in its spec: mirostat=2,...)"
        )
    sampling = EngineSampling(
        args.temperature,
        args.top_k or 0,
        1.0 if args.top_p is None else args.top_p,
        args.min_p or 0.0,
        args.repetition_penalty,
    )
    horizon = args.horizon if args.horizon is not None else (64 if args.temperature == 0 else 4)
    return EngineAuditRequest(
        args.engine,
        args.samples,
        args.against,
        sampling,
        args.speculate,
        tuple(args.gammas),
        5000 if args.n is None else args.n,
        horizon,
        args.level,
        args.seed,
        args.prompt_text or ENGINE_PROMPT,
        None if args.target == "tinygpt" else args.target,
        args.concurrency,
    )


# --mutant NAME: a planted bug's own flags


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


presets = mutant_presets  # a mutant's own flags, parsed before the user's (cli)
