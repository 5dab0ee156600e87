"""`spectheory bench --engine llama-cpp`: llama.cpp's greedy speed with and without prompt-lookup speculation on
the task prompts, interleaved over repeats, each gamma's measured speedup beside the cost model's prediction
from the engine's own costs, and our reference autoregressive decoder's speed on the same model beside
llama.cpp's (docs/engines.md)."""

from __future__ import annotations

import argparse
import time

from decoders.progress import progress_bar

from decoders.autoregressive import generate_autoregressive
from engines import ENGINES, open_engine
from engines.bench import engine_bench, engine_bench_lines, server_bench
from engines.openai import is_url
from measure.inputs import load_inputs
from measure.spec_bench import is_spec_bench
from measure.tasks import benchmark_prompts
from spectheory_cli.engine_spec_bench import run_engine_spec_bench
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from spectheory.outputs import check_writable, write_json

__all__ = ["add_engine_bench_arguments", "run_engine_bench", "ENGINE_PROMPT_LENGTH"]

#: The engine bench's prompt length: room for code after the rewrite task's framing (53 SmolLM2 tokens).
ENGINE_PROMPT_LENGTH = 192


def add_engine_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", metavar="ENGINE", help=f"instead: a serving engine's speed with and without its "
                        f"speculation: {', '.join(ENGINES)} on --target's GGUF file (default smollm2), or a "
                        f"speculating server's URL with --against the plain server's (docs/engines.md)")
    parser.add_argument("--against", metavar="URL", help="--engine URL: the same model served without speculation")


def _ours_tokens_per_second(target, prompts, tokens: int) -> float:
    """Our reference autoregressive decoder's greedy tokens per second on the same prompts (one run each)."""
    started = time.perf_counter()
    for row in prompts:
        generate_autoregressive(target, [row], max_new_tokens=tokens, sampling=GREEDY, randomness=seeded(0))
    return len(prompts) * tokens / (time.perf_counter() - started)


def _server_bench(args, inputs, prompts) -> int:
    """--engine URL --against URL: two servers' end-to-end greedy speed on the task prompts (as text)."""
    texts = [inputs.tokenizer.decode(ids) for ids in prompts]
    with progress_bar(None, total=2 * (args.repeats + args.warmup), desc="server bench", unit="run") as bar:
        document = server_bench(open_engine(args.engine), open_engine(args.against), texts,
                                max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup,
                                progress=bar.update)
    if args.out:
        write_json(args.out, dict(document, task=args.task or "rewrite"), command=args.command_line)
    low, _, high = document["speedup_spread"]
    print(f"{document['engine']} against {document['against']}: {document['speedup']:.3f}x ({low:.3f}-{high:.3f}) "
          f"end to end per token; greedy text equal: {document['greedy_equal']}")
    return 0


def run_engine_bench(args: argparse.Namespace) -> int:
    if args.hf or args.tree or args.policies is not None:
        raise ValueError("--engine measures the engine's own speculation: --hf, --tree and --policies do not apply")
    if is_url(args.engine) != (args.against is not None):
        raise ValueError("--against URL (the plain server) goes with --engine URL (the speculating one), and only")
    if args.out:
        check_writable(args.out)
    length = args.prompt_length or ENGINE_PROMPT_LENGTH
    if is_url(args.engine):
        inputs = load_inputs(args.target or "smollm2", [])
        prompts = benchmark_prompts(inputs, args.task or "rewrite", args.prompts, length, args.seed)
        return _server_bench(args, inputs, [row.tolist() for row in prompts])
    engine = open_engine(args.engine, gguf=args.target)
    if is_spec_bench(args.task):
        return run_engine_spec_bench(args, engine)
    inputs = load_inputs(str(engine.model_path), [])
    prompts = [row.tolist() for row in benchmark_prompts(inputs, args.task or "rewrite", args.prompts, length,
                                                         args.seed)]
    runs = (len(args.gammas) + 1) * (args.repeats + args.warmup)
    with progress_bar(None, total=runs, desc="engine bench", unit="run") as bar:
        document = engine_bench(engine, prompts, gammas=args.gammas, max_new_tokens=args.max_new_tokens,
                                repeats=args.repeats, warmup=args.warmup, progress=bar.update)
    document.update(task=args.task or "rewrite", cpu=document["environment"]["host"]["cpu"],
                    ours_tokens_per_second=_ours_tokens_per_second(inputs.target, prompts, args.max_new_tokens))
    if args.out:
        write_json(args.out, document, command=args.command_line)
    print("\n".join(engine_bench_lines(document)))
    return 0
