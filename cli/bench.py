"""Batch-1 wall-clock benchmark of speculative decoding against our autoregressive decoder on held-out prompts, over
gammas and temperatures, with the cost model's and Theorem 3.8's predictions and each decoder's efficiency; then a
batch sweep. Warm-up, repeats, medians; CUDA synchronised. --hf adds Hugging Face generate and assisted generation;
--tree: trees against chains; --policies: draft-length policies; --engine: a serving engine's own speculation;
--cross-vocabulary: a draft with another tokenizer."""

import argparse
from dataclasses import replace

import torch

from cli.audit_flags import add_sampling_arguments, sampling_from
from cli.bench_flags import add_comparison_arguments, check_comparison
from cli.options import add_compile, add_device, add_dtype, add_target, add_text, draft_help
from cli.task_flags import TASK_HELP, spec_bench_presets, task_name
from decoders.bench.alpha import MAX_PROMPTS
from decoders.bench.bench import MAX_REPEATS, BenchSettings
from decoders.bench.forecast.sweep import FORECAST_COST_PROMPTS, FORECAST_REPEATS
from decoders.bench.runs import BenchRun
from decoders.bench.spec_bench.questions import is_spec_bench
from decoders.bench.spec_bench.run import SpecBenchRun
from decoders.jobs.bench import (
    CROSS_FORECAST_PROMPTS,
    ENGINE_PROMPT_LENGTH,
    LOAD_REQUESTS,
    EngineBenchRun,
    decoder_bench,
    engine_bench,
    spec_bench,
)

presets = spec_bench_presets  # Spec-Bench's own flags, parsed before the user's (cli)
DEFAULTS = BenchSettings()
LOAD_GAMMA = 4  # --concurrency's gamma where --gammas is not given
CONTEXT_RULE = "prompt + tokens + gamma + 1 must fit the target's context (256 for the shipped target)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target(parser)
    parser.add_argument(
        "--draft",
        default="transformer",
        metavar="DRAFT",
        help=draft_help("transformer") + "; with --task spec-bench, all: the whole table",
    )
    add_text(parser, "the prompts")
    parser.add_argument("--task", type=task_name, help=TASK_HELP)
    add_device(parser)
    add_dtype(parser)
    add_compile(parser)
    parser.add_argument(
        "--gammas",
        type=int,
        nargs="+",
        metavar="G",
        help="gammas to benchmark (default 1 to 8; with --task spec-bench each draft's own); " + CONTEXT_RULE,
    )
    parser.add_argument(
        "--temperatures",
        type=float,
        nargs="+",
        metavar="T",
        help="temperatures (default 0 1; --engine benches one, by default 0: greedy)",
    )
    parser.add_argument(
        "--prompts",
        type=int,
        default=DEFAULTS.prompts,
        help=f"held-out prompts, decoded one at a time, at most {MAX_PROMPTS} (each is decoded in full "
        f"per run; default {DEFAULTS.prompts})",
    )
    parser.add_argument(
        "--prompt-length",
        type=int,
        help=f"tokens per prompt (default {DEFAULTS.prompt_length}, "
        f"{ENGINE_PROMPT_LENGTH} with --engine); " + CONTEXT_RULE,
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=DEFAULTS.max_new_tokens,
        help=f"tokens generated per prompt (default {DEFAULTS.max_new_tokens}); " + CONTEXT_RULE,
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULTS.repeats,
        help=f"timed repeats, median reported, at most {MAX_REPEATS} (default {DEFAULTS.repeats})",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=DEFAULTS.warmup,
        help=f"untimed runs first, at most {MAX_REPEATS} (default {DEFAULTS.warmup})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="prompt selection seed (default 0)")
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="*",
        default=list(DEFAULTS.batch_sizes),
        metavar="B",
        help="the batch sweep: rows per call, each decoding whole batches of at least --prompts prompts "
        "(default 1 4 16 64; none: no sweep)",
    )
    parser.add_argument(
        "--batch-gammas",
        type=int,
        nargs="+",
        default=list(DEFAULTS.batch_gammas),
        metavar="G",
        help="gammas of the batch sweep (default 2 4)",
    )
    parser.add_argument(
        "--forecast-prompts",
        type=int,
        default=0,
        metavar="N",
        help="first forecast the sweep from acceptance along N other prompts and a cost profile of the "
        "first of them, judged on the sweep's rows (docs/measuring.md, Forecasts; default 0: none)",
    )
    parser.add_argument(
        "--forecast-cost-prompts",
        type=int,
        default=FORECAST_COST_PROMPTS,
        metavar="N",
        help=f"the forecast's prompts its cost profile times (default {FORECAST_COST_PROMPTS})",
    )
    parser.add_argument(
        "--forecast-repeats",
        type=int,
        default=FORECAST_REPEATS,
        help=f"the cost profile's timed repeats (default {FORECAST_REPEATS})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        metavar="B",
        help="--engine under load: --requests Spec-Bench questions kept B in flight, plain and speculative servers "
        "alternated, goodput forecast first from as many other questions (docs/engines-load.md; one gamma, "
        "default 4)",
    )
    parser.add_argument(
        "--requests",
        type=int,
        metavar="N",
        help=f"--concurrency: requests at each concurrency (default {LOAD_REQUESTS})",
    )
    add_comparison_arguments(parser)
    parser.add_argument("--out", help="write the JSON report here")
    add_sampling_arguments(parser, temperature=False)


def _sweep_settings(args: argparse.Namespace, sampling) -> BenchSettings:
    """The gamma sweep's settings from the flags (our decoders' bench, and the cross-vocabulary one)."""
    return BenchSettings(
        tuple(args.gammas or DEFAULTS.gammas),
        tuple(args.temperatures or DEFAULTS.temperatures),
        args.prompts,
        args.prompt_length or DEFAULTS.prompt_length,
        args.max_new_tokens,
        args.repeats,
        args.warmup,
        seed=args.seed,
        batch_sizes=tuple(args.batch_sizes),
        batch_gammas=tuple(args.batch_gammas),
        sampling=sampling,
    )


def run(args: argparse.Namespace) -> int:
    sampling = sampling_from(args)
    check_comparison(args, sampling)
    runs = dict(max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup)
    if args.engine:
        request = EngineBenchRun(
            args.engine,
            tuple(args.gammas or ((LOAD_GAMMA,) if args.concurrency else DEFAULTS.gammas)),
            args.prompts,
            args.max_new_tokens,
            args.repeats,
            args.warmup,
            against=args.against,
            target=args.target,
            task=args.task,
            prompt_length=args.prompt_length,
            seed=args.seed,
            temperature=(args.temperatures or [0.0])[0],
            forecast_prompts=args.forecast_prompts,
            concurrency=tuple(args.concurrency or ()),
            requests=LOAD_REQUESTS if args.requests is None else args.requests,
        )
        _, lines = engine_bench(request, out=args.out, command=args.command_line)
    elif is_spec_bench(args.task):
        settings = BenchSettings(
            temperatures=tuple(args.temperatures or DEFAULTS.temperatures),
            prompts=args.prompts,
            seed=args.seed,
            batch_sizes=(),
            **runs,
        )
        request = SpecBenchRun(
            settings,
            args.task,
            draft=args.draft,
            gammas=None if args.gammas is None else tuple(args.gammas),
            target=args.target,
            device=args.device,
            dtype=getattr(torch, args.dtype),
            compile=args.compile,
            forecast_questions=args.forecast_prompts,
        )
        _, lines = spec_bench(request, out=args.out, command=args.command_line)
    else:
        cross = args.cross_vocabulary is not None
        settings = _sweep_settings(args, sampling)
        request = BenchRun(
            args.draft,
            replace(settings, batch_sizes=()) if cross else settings,
            target=args.target,
            text=args.text,
            device=args.device,
            dtype=getattr(torch, args.dtype),
            compile=args.compile,
            task=args.task,
            forecast_prompts=args.forecast_prompts or (CROSS_FORECAST_PROMPTS if cross else 0),
            forecast_cost_prompts=args.forecast_cost_prompts,
            forecast_repeats=args.forecast_repeats,
            hf=args.hf,
            hf_gamma=args.hf_gamma,
            tree=args.tree,
            budgets=tuple(args.budgets),
            dynamic=args.dynamic,
            policies=None if args.policies is None else tuple(args.policies),
            cross_vocabulary=None if args.cross_vocabulary is None else tuple(args.cross_vocabulary),
            beside=tuple(args.beside or ()),
        )
        _, lines = decoder_bench(request, out=args.out, command=args.command_line)
    print("\n".join(lines))
    return 0
