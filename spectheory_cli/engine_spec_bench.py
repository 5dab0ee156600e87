"""``bench --engine ENGINE --task spec-bench[:CATEGORY,...]``: the engine's own speculation (prompt lookup,
llama-server's drafters) against its own plain decoding on each Spec-Bench category's questions
(docs/measuring.md, "Spec-Bench"), the cost model's prediction beside each gamma, greedy text compared with plain
decoding's."""

from __future__ import annotations

import argparse

from decoders.models.gguf import gguf_tokenizer
from jobs.spec_bench import engine_table
from measure.spec_bench_table import table_lines
from spectheory.outputs import write_json


def run_engine_spec_bench(args: argparse.Namespace, engine) -> int:
    """``engine_table`` with the flags' settings, printed (and written with --out). Only the model's tokenizer is
    read here: the engine runs the model."""
    document = engine_table(engine, gguf_tokenizer(engine.model_path), args.task, gammas=args.gammas, prompts=args.prompts,
                            max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup, seed=args.seed)
    if args.out:
        write_json(args.out, document, command=args.command_line)
    print(f"Spec-Bench, {engine.name} ({engine.model_path.name}), T = 0, batch 1, speedup over the engine's own plain "
          f"decoding at the best of gammas {', '.join(map(str, args.gammas))}")
    print("\n".join(table_lines(document["table"])))
    return 0
