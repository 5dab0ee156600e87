"""The flags of `spectheory audit --engine`, and the request they make: a serving engine's speculative sampler
audited (docs/engines.md). At temperature 0
its greedy tokens with speculation against its plain greedy tokens at every --gammas; above it, its samples
with speculation against a second sample by the two-sample test: the same engine plain (--against plain), a
second server (--against URL) or a file (--against FILE.jsonl), or our model of its GGUF file (--against
model); --samples A.jsonl --against B.jsonl compares two files drawn anywhere."""

import argparse

from decoders.engines import EngineSampling, engine_usages
from decoders.engines.audit import ENGINE_PROMPT, EngineAuditRequest

__all__ = ["add_engine_arguments", "engine_requested", "engine_request"]


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
