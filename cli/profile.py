"""Measure the cost profile of a pair (docs/theory.md §10): t_step of the autoregressive decoder, t_draft,
t_verify(k) for k = 1..gamma_max + 1 and t_iteration of the speculative decoder, its per-position
acceptance a_1..a_gamma_max, and the prefill costs, each the median over interleaved repeats with its spread.
`spectheory gamma --costs FILE` turns it into a calibrated gamma table."""

from __future__ import annotations

import argparse
import json
import sys

import torch

from cli.options import add_compile, add_device, add_dtype, add_target, add_text, draft_help
from decoders.bench.bench import BenchSettings, environment, model_dtype
from decoders.bench.documents import ProfileDocument
from decoders.bench.inputs import Pair, load_inputs
from decoders.bench.profile import ProfilePlan, check_batch_size, measure_profile, profile_checks
from decoders.bench.prompts import text_windows
from decoders.sampling import Sampling
from plumbing.outputs import check_writable, write_json
from plumbing.validation import as_positive_int

DEFAULTS = BenchSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--draft", default="transformer", help=draft_help("transformer"))
    add_target(parser)
    add_text(parser, "the prompts")
    add_device(parser)
    add_dtype(parser)
    add_compile(parser)
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    parser.add_argument(
        "--gamma-max",
        type=int,
        default=max(DEFAULTS.gammas),
        help=f"the profiling run's gamma; t_verify up to gamma_max + 1 (default {max(DEFAULTS.gammas)})",
    )
    parser.add_argument(
        "--verify-widths",
        type=int,
        help="time the verify call at widths 1..K (at least gamma_max "
        "+ 1, its default; 64 for `spectheory tree --costs`)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=1, help="rows decoded per call, dividing --prompts (default 1)"
    )
    for name in ("prompts", "prompt_length", "max_new_tokens", "repeats", "warmup", "seed"):
        default = getattr(DEFAULTS, name)
        parser.add_argument(
            "--" + name.replace("_", "-"), type=int, default=default, help=f"as in bench (default {default})"
        )
    parser.add_argument("--out", help="write the profile as JSON here (default: print it)")


def run(args: argparse.Namespace) -> int:
    settings = BenchSettings(
        (as_positive_int("gamma_max", args.gamma_max),),
        (args.temperature,),
        args.prompts,
        args.prompt_length,
        args.max_new_tokens,
        args.repeats,
        args.warmup,
        seed=args.seed,
    )
    check_batch_size(args.batch_size, settings.prompts)
    if args.out:
        check_writable(args.out)
    dtype = getattr(torch, args.dtype)
    inputs = load_inputs(
        args.target, [args.draft], text=args.text, device=args.device, dtype=dtype, compile=args.compile
    )
    target, draft = inputs.target, inputs.drafts[args.draft]
    prompts = text_windows(inputs.held_out, settings.prompts, settings.prompt_length, settings.seed)
    plan = ProfilePlan(
        args.gamma_max,
        settings.max_new_tokens,
        settings.warmup,
        repeats=settings.repeats,
        batch_size=args.batch_size,
        verify_widths=args.verify_widths,
    )
    profile, spread = measure_profile(Pair(target, draft), prompts, Sampling(args.temperature), plan)
    document = ProfileDocument(
        target=args.target or "shipped target",
        draft=args.draft,
        environment=environment(target.device, model_dtype(target)),
        batch_size=args.batch_size,
        temperature=args.temperature,
        text=inputs.text,
        settings=settings.as_dict(),
        profile=profile,
        spread=spread,
        checks=profile_checks(profile, spread),
    )
    if args.out:
        write_json(args.out, document.as_dict(), command=args.command_line)
    print(json.dumps(document.as_dict(), indent=1, allow_nan=False))
    line = document.checks.line("a forecast from this profile is")
    if line:
        print(line, file=sys.stderr)
    return 0
