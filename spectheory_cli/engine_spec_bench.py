"""``bench --engine llama-cpp --task spec-bench[:CATEGORY,...]``: the engine's own speculation (prompt lookup)
against its own plain decoding on each Spec-Bench category's questions (docs/measuring.md, "Spec-Bench"), the
cost model's prediction beside each gamma, greedy text compared with plain decoding's."""

from __future__ import annotations

import argparse

from tqdm import tqdm

from engines.bench import engine_bench
from engines.llama_cpp import CONTEXT
from measure.spec_bench import LABELS, spec_bench_categories, spec_bench_prompts
from measure.spec_bench_table import table_lines
from spectheory.optimum import best_choice
from spectheory.outputs import write_json


def _row(category: str, document: dict, questions: list) -> dict:
    """One category's best measured gamma in ``measure.spec_bench_table``'s keys (the prediction: the engine's)."""
    best = best_choice(document["rows"], lambda row: row["speedup"], lambda row: row["gamma"])
    return {"category": category, "label": LABELS[category], "prompts": len(questions),
            "cut": sum(q["cut"] > 0 for q in questions),
            "prompt_tokens": sum(q["tokens"] for q in questions) / len(questions),
            "gamma": best["gamma"], "mean_acceptance_length": best["tokens_per_iteration"], "alpha": best["alpha"],
            "speedup": best["speedup"], "speedup_spread": best["speedup_spread"],
            "calibrated_speedup": best["predicted_speedup"],
            "greedy_equal": all(row["greedy_equal_to_plain"] for row in document["rows"])}


def run_engine_spec_bench(args: argparse.Namespace, engine, inputs) -> int:
    """Each category of ``args.task`` through ``engines.bench.engine_bench``; prompts longer than the engine's
    context leaves room for are cut from the front."""
    room = CONTEXT - args.max_new_tokens - max(args.gammas) - 1
    categories, rows = {}, []
    for category in spec_bench_categories(args.task):
        prompts = spec_bench_prompts(inputs.tokenizer, category, args.prompts, args.seed, room)
        with tqdm(total=(len(args.gammas) + 1) * (args.repeats + args.warmup), desc=category, unit="run", delay=1,
                  leave=False, disable=None) as bar:
            document = engine_bench(engine, [list(p.tokens) for p in prompts], gammas=args.gammas,
                                    max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup,
                                    progress=bar.update)
        questions = [p.as_dict() for p in prompts]
        categories[category] = dict(document, label=LABELS[category], questions=questions)
        rows.append(_row(category, document, questions))
    document = {"task": args.task, "engine": engine.name, "model": engine.model_path.name, "prompt_room": room,
                "categories": categories, "table": rows}
    if args.out:
        write_json(args.out, document, command=args.command_line)
    print(f"Spec-Bench, {engine.name} ({engine.model_path.name}), T = 0, batch 1, speedup over the engine's own plain "
          f"decoding at the best of gammas {', '.join(map(str, args.gammas))}")
    print("\n".join(table_lines(rows)))
    return 0
