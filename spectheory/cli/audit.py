"""Audit a decoder configuration on tiny seeded models. By default a statistical audit: n sampled continuations
tested with randomized PIT (Kolmogorov-Smirnov under three token orderings) and a G-test on the first tokens,
Bonferroni-combined. --exact: the decoder's exact law of the first --horizon tokens by enumerating its random
choices. --engine: a serving engine's sampler. Exit status 0 when it passes, 1 when it fails, 2 for bad input."""

import argparse
import json
from dataclasses import fields

from decoders.audit.mutants import MUTANTS
from decoders.audit.request import DECODERS, MAX_EXACT_BRANCHES, METHODS, SAMPLERS, AuditRequest
from decoders.audit.setups import MAX_VOCABULARY, TARGETS
from decoders.audit.statistical import MAX_SAMPLES
from decoders.audit.tree_mutants import TREE_MUTANTS
from decoders.bench.audit import SHIPPED_PROMPT, TEXT_PROMPT_TOKENS, deviation_lines, run_audit
from decoders.drafts import FROM_TARGET, SHIPPED, TINY, draft_names
from decoders.jobs.engine_audit import audit_engine
from decoders.models.hf_generate import SCHEDULES
from decoders.policies import POLICIES
from decoders.verification import CHAIN_VERIFIERS, TREE_VERIFIERS
from decoders.zoo import REAL_MODELS
from spectheory.cli.audit_flags import add_sampler_arguments, add_sampling_arguments, sampling_from
from spectheory.cli.engine_flags import add_engine_arguments, engine_request, engine_requested
from spectheory.cli.mutant_flags import cited, mutant_presets
from spectheory.cli.options import names

presets = mutant_presets  # a mutant's own flags, parsed before the user's (spectheory.cli)


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
        f"the same tokenizer",
    )
    add_sampler_arguments(parser, SAMPLERS, SCHEDULES)
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
        print("\n".join(lines) + (f"\n{json.dumps(document, allow_nan=False)}" if args.json else ""))
        return 0 if document["passed"] else 1
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
