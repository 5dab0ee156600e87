"""Where an engine's greedy output first leaves ours (or two token files each other), the target's logit
margin there, and a verdict: a near-tie within float noise is numerics, a margin of logits is a bug
(docs/metrics.md). --engine llama-cpp (or llama-server) draws the engine's greedy tokens here (docs/engines.md)."""

from __future__ import annotations

import argparse
import json

from cli import options
from decoders.autoregressive import generate_autoregressive
from decoders.bench.diverge import diagnose, read_tokens
from decoders.bench.inputs import encode_text
from decoders.engines import EngineSampling, open_engine
from decoders.engines.base import capability
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.zoo import load_named
from plumbing.validation import as_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_target(parser)
    parser.add_argument(
        "--prompt-text",
        required=True,
        help="the prompt as text, tokenized by the target's tokenizer "
        "without special tokens (as the engine was given it)",
    )
    parser.add_argument(
        "--tokens",
        nargs="+",
        metavar="FILE",
        help="the engine's new token ids (a JSON list, an object with 'tokens', or integers); two "
        "files compare with each other instead of with our greedy decoding",
    )
    parser.add_argument(
        "--engine",
        metavar="ENGINE",
        help="instead of --tokens: draw the engine's greedy tokens here "
        "(llama-cpp or llama-server[:OPTIONS]), on --target's GGUF file (default smollm2), with "
        "--speculate draft tokens",
    )
    parser.add_argument("--speculate", type=int, default=4, help="--engine: draft tokens per step, 0 = off (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="--engine: tokens drawn (default 64)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options.add_device(parser)


def run(args: argparse.Namespace) -> int:

    if (args.tokens is None) == (args.engine is None) or len(args.tokens or ()) > 2:
        raise ValueError("give --tokens FILE (against our greedy decoding), --tokens A B, or --engine ENGINE")
    sequences = [read_tokens(path) for path in args.tokens or ()]
    target_name = args.target or ("smollm2" if args.engine else None)
    target, tokenizer = load_named(target_name, role="target", device=args.device, timed=False)
    prompt = encode_text(tokenizer, args.prompt_text)
    if not prompt:
        raise ValueError("--prompt-text is empty after tokenization")
    if args.engine:
        engine = open_engine(args.engine, gguf=target_name)
        if capability(engine, "generate_ids") is None:
            raise ValueError(
                f"--engine {args.engine}: diverge reads the engine's token ids (generate_ids, "
                f"docs/engines.md §2), which it does not give; draw its tokens into --tokens FILE"
            )
        tokens, _, _, _ = engine.generate_ids(
            prompt,
            as_int("max_new_tokens", args.max_new_tokens, low=1, high=1024),
            EngineSampling(0.0),
            speculate=args.speculate,
        )
        sequences, args.tokens = [tokens], [f"{args.engine} (speculate {args.speculate})"]
    for path, tokens in zip(args.tokens, sequences):
        if max(tokens) >= target.vocab_size or min(tokens) < 0:
            raise ValueError(f"--tokens {path!r} holds ids outside the target's vocabulary [0, {target.vocab_size})")
    if len(sequences) == 1:
        generation = generate_autoregressive(
            target, [prompt], max_new_tokens=len(sequences[0]), sampling=GREEDY, randomness=seeded(0)
        )
        sequences.insert(0, list(generation.tokens[0]))
        names = ("ours (greedy)", args.tokens[0])
    else:
        names = tuple(args.tokens)
    found = diagnose(target, prompt, *sequences, eos=None if tokenizer is None else tokenizer.eos_token_id)
    if args.json:
        print(json.dumps(dict(found.as_dict(), compared_files=list(names)), indent=2, allow_nan=False))
        return 0
    if found.position is None:
        print(f"{names[0]} and {names[1]} agree on all {found.compared} tokens")
        return 0
    print(
        f"first divergence at new token {found.position} of {found.compared}: {names[0]} {found.ours}, "
        f"{names[1]} {found.theirs}"
    )
    print(
        f"target logits there: margin {found.margin:.3e} ({names[0]} over {names[1]}), top-two margin "
        f"{found.top_two_margin:.3e}; {names[1]}'s token ranks {found.their_rank} with probability "
        f"{found.their_probability:.4f}"
    )
    print(found.verdict)
    return 0
