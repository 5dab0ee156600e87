"""Small cached inputs for the figure scripts (tests of paper_figs and of ``spectheory figs``)."""

import json
from pathlib import Path

from tree_bench_inputs import small_tree_document

from decoders.bench.documents import BenchReport
from decoders.bench.rows import BenchRow
from decoders.load_results import ConcurrencyRow, LoadBenchDocument, LoadForecast, SpeculativeRun
from paper_figs import (
    dynamic_gamma_heatmap,
    measured_vs_predicted,
    simulation_vs_theory,
    spec_bench,
    stern_fig4_blockwise,
    table3_alpha,
    table5_lenience,
    table_real_model,
    tree_expected_tokens,
    tree_vs_chain,
)
from sims.documents import TreesDocument
from sims.trees import tree_budget_document, verifier_document
from spectheory.costs import CostProfile
from spectheory.goodput import ServerCosts
from spectheory.speedup import expected_tokens


def write_small_results(results: Path) -> Path:
    """Tiny stand-ins for the cached results the data-driven figures read, written into ``results``."""
    results.mkdir(parents=True)
    grid = {
        "seed": 0,
        "iterations": 10,
        "family": "test",
        "peaks": {"oracle": {"max_gain": 1.5, "alpha": 0.9, "c": 0.1}},
        "alphas": [0.5, 0.9],
        "cs": [0.0, 0.1],
        "theory_oracle": [[1.0, 1.2], [1.0, 1.5]],
        "oracle": [[1.0, 1.2], [1.0, 1.5]],
        "confidence": [[1.0, 1.0], [1.0, 1.0]],
        "rejection": [[1.0, 1.01], [1.0, 1.1]],
        "heuristic": [[0.9, 0.95], [0.7, 0.97]],
        "comparisons": [],
    }  # sims.documents.PolicyGains's keys
    (results / dynamic_gamma_heatmap.RESULT).write_text(json.dumps(grid))
    phases = {"draft": 1e-3, "verify": 3e-3, "other": 5e-4}
    rows = tuple(
        BenchRow(
            temperature=t,
            gamma=g,
            seconds=1.0,
            iterations=10,
            tokens_per_iteration=1 + g / 2,
            speedup=1 + g / 5,
            predicted_speedup=1 + g / 4,
            calibrated_speedup=1 + g / 6,
            measured_seconds_per_iteration=phases,
            calibrated_seconds_per_iteration=phases,
        )
        for t in (0.0, 1.0)
        for g in (1, 2)
    )
    batches = [
        BenchRow(
            batch_size=b,
            prompts=b,
            temperature=t,
            gamma=g,
            seconds=1.0,
            iterations=10,
            tokens_per_iteration=1 + g / 2,
            speedup=1.5 / b**0.2,
            calibrated_speedup=1.4 / b**0.2,
            speedup_spread=[1.4 / b**0.2, 1.5 / b**0.2, 1.6 / b**0.2],
        ).as_dict()
        for b in (1, 4, 16)
        for t in (0.0, 1.0)
        for g in (2, 4)
    ]
    bench = BenchReport(
        environment={"device_name": "test cpu", "dtype": "float32"},
        settings={"gammas": [1, 2]},
        target="target",
        draft="draft",
        c=0.1,
        target_call_seconds=0.01,
        draft_call_seconds=0.001,
        autoregressive_seconds={0.0: 1.5, 1.0: 1.6},
        alpha={0.0: 0.8, 1.0: 0.7},
        rows=rows,
    )
    bench = json.loads(
        json.dumps(
            dict(
                bench.as_dict(), batches={"batch_sizes": [1, 4, 16], "gammas": [2, 4], "rows": batches, "profiles": {}}
            )
        )
    )
    (results / measured_vs_predicted.RESULT).write_text(json.dumps(bench))
    runs = [
        {
            "seed": 0,
            "alpha": a,
            "mean_tokens_per_iteration": float(expected_tokens(a, g)) + 0.01,
            "standard_error": 0.01,
            "theory_tokens_per_iteration": float(expected_tokens(a, g)),
            "speedup": 1.0,
            "speedup_standard_error": 0.01,
            "theory_speedup": 1.0,
            "accepted_distribution": [],
            "theory_accepted_distribution": None,
            "process": p,
            "gamma": g,
            "c": 0.0,
            "iterations": 100,
            "z_score": 1.0,
            "spec": {"process": p, "gamma": g, "alpha": a, "iterations": 100},
        }  # sims.run.SimulationSummary.as_dict's keys
        for p in ("iid", "token-level")
        for g in (2, 4)
        for a in (0.3, 0.8)
    ]
    (results / simulation_vs_theory.RESULT).write_text(json.dumps({"seed": 0, "runs": runs}))
    blocks = [
        {
            "criterion": c,
            "top_k": k,
            "epsilon": 0.0,
            "min_block_size": 1,
            "block_size": b,
            "seconds": 1.0,
            "iterations": 10,
            "mean_block_size": 1 + b / 2,
            "speedup": 1 + b / 3,
        }  # decoders.bench.rows.BlockwiseRow's keys
        for c, k in (("exact", 1), ("top_k", 2))
        for b in (2, 4)
    ]
    blockwise = {"environment": {"device_name": "cpu"}, "settings": {}, "heads": 4, "autoregressive_seconds": 2.0}
    (results / stern_fig4_blockwise.RESULT).write_text(json.dumps(dict(blockwise, rows=blocks)))
    estimates = [
        {
            "draft": d,
            "temperature": t,
            "alpha_text": 0.5,
            "alpha_text_standard_error": 0.01,
            "text_positions": 100,
            "proposal_coverage": 1.0,
            "alpha_counts": 0.6,
            "alpha_counts_standard_error": 0.02,
            "accepted_tokens": 60,
            "verified_tokens": 100,
            "gamma": 4,
            "generated_tokens": 128,
        }  # decoders.bench.rows.AlphaEstimate's keys
        for d in ("transformer", "bigram")
        for t in (0.0, 1.0)
    ]
    alpha = {"corpus_fingerprint": "test", "text": None, "estimates": estimates}
    (results / table3_alpha.RESULT).write_text(json.dumps(dict(alpha, command="spectheory alpha")))
    lenient = [
        {"draft": d, "temperature": 1.0, "leniences": [1.0, 0.5], "alpha": [0.5, 0.6], "standard_error": [0.01, 0.01]}
        for d in ("transformer", "bigram")
    ]
    (results / table5_lenience.RESULT).write_text(
        json.dumps({"corpus_fingerprint": "test", "windows": 2, "rows": lenient})
    )
    (results / table_real_model.RESULT).write_text(json.dumps(small_real_model()))
    trees = TreesDocument(budgets=tree_budget_document(trials=200), verifiers=verifier_document(pairs=3, ks=(1, 2)))
    (results / tree_expected_tokens.RESULT).write_text(json.dumps(trees.as_dict()))
    (results / tree_vs_chain.RESULT).write_text(json.dumps({"drafts": [small_tree_document().as_dict()]}))
    (results / spec_bench.RESULT).write_text(json.dumps(small_spec_bench_table()))
    (results / "goodput").mkdir()
    (results / "goodput" / "load_small.json").write_text(json.dumps(small_load_document().as_dict()))
    return results


def _spec_row(gamma, predicted: float, measured: float) -> dict:
    """A T = 0 row of a Spec-Bench draft (``decoders.bench.rows.BenchRow``'s keys) at ``gamma``."""
    return {
        "temperature": 0.0,
        "gamma": gamma,
        "seconds": 1.0 / measured,
        "iterations": 4,
        "tokens_per_iteration": 1.5,
        "speedup": measured,
        "speedup_spread": [measured - 0.05, measured, measured + 0.05],
        "calibrated_speedup": predicted,
        "calibrated_over_measured": None if predicted is None else predicted / measured,
        "mean_acceptance_length": 1.5,
        "acceptance_rate": 0.3,
        "alpha_counts": 0.4,
        "greedy_equal": [True],
    }


def _tree_row(measured: float) -> dict:
    """The dynamic tree's row (``decoders.bench.rows.DynamicTreeRow``'s keys) of 8 nodes."""
    return {
        "temperature": 0.0,
        "nodes": 8,
        "speedup": measured,
        "speedup_spread": [measured - 0.05, measured, measured + 0.05],
        "mean_acceptance_length": 1.5,
        "acceptance_rate": 0.3,
        "greedy_equal": [True],
    }


#: ``small_spec_bench_table``'s (predicted, measured) speedups per category, draft and gamma, and baseline seconds.
SPEC_BENCH_CELLS = {
    "qa": {"copy": {1: (1.2, 1.25), 2: (1.5, 1.4)}, "slow": {1: (0.9, 0.85)}},
    "rag": {"copy": {1: (0.95, 1.02), 2: (0.9, 0.93)}, "slow": {1: (0.8, 0.75)}},
}
SPEC_BENCH_BASELINES = {"qa": 2.0, "rag": 6.0}
SPEC_BENCH_TREES = {"qa": 1.3, "rag": 0.98}  # the dynamic tree's measured speedups


def small_spec_bench_table() -> dict:
    """Two categories of ``spec_bench_document``'s shape (a saved ``SpecBenchTable``) with the cells of
    ``SPEC_BENCH_CELLS``, a dynamic tree (``SPEC_BENCH_TREES``) and an engine's rows."""
    labels = {"qa": "Question Answering", "rag": "Retrieval-aug. Generation"}
    prompts = {"100": [{"category": "qa", "question_id": 1, "tokens": 60, "cut": 0}]}
    profile = dict(
        CostProfile(
            t_step=0.05, t_draft=0.001, t_verify=(0.05, 0.06, 0.07), t_iteration=0.002, acceptance=(0.5,)
        ).as_dict(),
        spread={},
    )
    categories = {}
    for category, drafts in SPEC_BENCH_CELLS.items():
        categories[category] = {
            "label": labels[category],
            "prompts": prompts,
            "drafts": {
                name: {
                    "gammas": list(cells),
                    "prompt_room": 100,
                    "autoregressive_seconds": SPEC_BENCH_BASELINES[category],
                    "c": 0.02,
                    "target_call_seconds": 0.05,
                    "draft_call_seconds": 0.001,
                    "alpha": 0.4,
                    "rows": [_spec_row(g, *cell) for g, cell in cells.items()],
                    "profile": profile,
                }
                for name, cells in drafts.items()
            },
            "dynamic": {
                "draft": "copy",
                "tree": {"dynamic": True, "branching": 2, "nodes": 8, "depth": 4},
                "prompt_room": 100,
                "rows": [_tree_row(SPEC_BENCH_TREES[category])],
            },
        }
    engine = [
        {
            "category": c,
            "label": labels[c],
            "draft": "llama.cpp prompt lookup",
            "prompts": 1,
            "cut": 0,
            "prompt_tokens": 60.0,
            "setting": "gamma 2",
            "gamma": 2,
            "mean_acceptance_length": 1.5,
            "acceptance_rate": 0.3,
            "alpha": 0.5,
            "speedup": 1.2,
            "speedup_spread": [1.15, 1.2, 1.25],
            "calibrated_speedup": 1.1,
            "calibrated_over_measured": 1.1 / 1.2,
            "forecast_speedup": None,
            "greedy_equal": True,
        }  # an engine's table rows (decoders.bench.rows.TableRow)
        for c in labels
    ]
    return {
        "task": "spec-bench:qa,rag",
        "target": "test",
        "drafts": {"copy": [1, 2], "slow": [1]},
        "dynamic": {"dynamic": True, "branching": 2, "nodes": 8, "depth": 4, "draft": "copy"},
        "environment": {"device": "cpu", "device_name": "test cpu", "dtype": "float32", "torch_threads": 2},
        "settings": {"prompts": 1, "max_new_tokens": 8, "gammas": [1, 2]},
        "batch_size": 1,
        "seconds": 10.0,
        "categories": categories,
        "engine": {
            "task": "spec-bench:qa,rag",
            "engine": "llama-cpp",
            "model": "test.gguf",
            "prompt_room": 100,
            "categories": {},
            "table": engine,
        },
    }


def small_real_model() -> dict:
    """Two cells (copy with a transformers counterpart, random without) of ``table_real_model``'s input."""
    environment = {"device_name": "test cpu", "dtype": "float32", "torch_threads": 2}
    profile = CostProfile(
        t_step=0.08, t_draft=0.001, t_verify=(0.08, 0.09, 0.1), t_iteration=0.002, acceptance=(0.6, 0.5)
    ).as_dict()
    cells = []
    for draft in ("copy", "random"):
        rows = [
            {
                "temperature": t,
                "gamma": g,
                "seconds": 1.0,
                "iterations": 10,
                "tokens_per_iteration": 1.5,
                "speedup": 1.2 / g if draft == "random" else 1 + g / 5,
                "speedup_spread": [1.0, 1.1, 1.3],
            }  # decoders.bench.rows.BenchRow's keys
            for t in (0.0, 1.0)
            for g in (1, 2)
        ]
        bench = {
            "environment": environment,
            "settings": {"temperatures": [0.0, 1.0], "max_new_tokens": 48},
            "target": "smollm2",
            "draft": draft,
            "c": 0.01,
            "target_call_seconds": 0.08,
            "draft_call_seconds": 0.0008,
            "autoregressive_seconds": {"0.0": 4.0, "1.0": 4.0},
            "alpha": {"0.0": 0.6, "1.0": 0.4},
            "rows": rows,
            "profiles": {"0.0": profile, "1.0": profile},
        }  # decoders.bench.documents.BenchReport's keys
        hf = {
            "gamma": 2,
            "native": False,
            "assisted": ["assistant"],
            "rows": [
                {
                    "temperature": 0.0,
                    "ar_ours_adapter_over_hf": 1.1,
                    "ar_ours_adapter_over_hf_spread": [1.0, 1.2],
                    **(
                        {"speculative_ours_adapter_over_hf": 1.5, "speculative_ours_adapter_over_hf_spread": [1.4, 1.6]}
                        if draft == "copy"
                        else {}
                    ),
                }
            ],
        }
        cells.append({"draft": draft, "task": "rewrite", "bench": bench, "hf": hf})
    alphas = [
        {"draft": d, "temperature": t, "leniences": [1.0], "alpha": [0.5], "standard_error": [0.02]}
        for d in ("copy", "random", "layerskip:8")
        for t in (0.0, 1.0)
    ]
    return {
        "target": "smollm2",
        "text": None,
        "corpus_fingerprint": "test",
        "environment": environment,
        "settings": {"prompts": 2, "max_new_tokens": 48, "repeats": 2},
        "windows": 16,
        "alpha_text": alphas,
        "cells": cells,
    }


def small_load_document() -> LoadBenchDocument:
    """A load bench of two concurrencies (``decoders.load_results``), its forecast beside."""
    rows = tuple(
        ConcurrencyRow(
            concurrency=c,
            plain_goodput=(20.0 * c, 21.0 * c),
            speculative_goodput=(22.0 * c / c**0.2, 23.0 * c / c**0.2),
            speedup=1.1 / c**0.2,
            speedup_spread=(1.05 / c**0.2, 1.1 / c**0.2, 1.15 / c**0.2),
            plain_tpot=(0.04, 0.05),
            speculative_tpot=(0.045, 0.06),
            acceptance_rate=0.4,
            acceptance_per_position=(0.6, 0.4),
            tokens_per_round=1.4,
            plain_iterations=64,
            speculative_iterations=50,
            rounds=(40, 50),
            model_speedup=1.11 / c**0.2,
            forecast_speedup=1.12 / c**0.2,
            forecast_interval=(1.0 / c**0.2, 1.2 / c**0.2),
        )
        for c in (1, 4)
    )
    costs = ServerCosts({1: 0.05, 4: 0.06}, 1e-4, {1: 0.011, 4: 0.014})
    runs = tuple(
        SpeculativeRun(concurrency=c, rounds=(40, 50), drafted_per_round=1.0, seconds=s)
        for c, s in ((1, 5.0), (4, 3.0))
    )
    forecast = LoadForecast(
        (11, 13),
        (0.05, 0.06),
        {1: 6.0, 4: 2.0},
        runs,
        costs,
        {1: 1.12, 4: 1.12 / 4**0.2},
        {1: 20.0, 4: 80.0},
        3.0,
        {1: (1.0, 1.2), 4: (1.0 / 4**0.2, 1.2 / 4**0.2)},
    )
    return LoadBenchDocument(
        engine="vllm (method ngram)",
        model="model.gguf",
        engine_settings={"method": "ngram"},
        engine_version="0",
        gamma=2,
        requests=2,
        prompt_tokens=(10, 12),
        max_new_tokens=16,
        repeats=2,
        warmup=1,
        rows=rows,
        forecast=forecast,
        schedule={"num_speculative_tokens_per_batch_size": [[1, 3, 2], [4, None, 2]]},
        environment={"host": {"cpu": "test cpu"}},
        seconds=10.0,
    )
