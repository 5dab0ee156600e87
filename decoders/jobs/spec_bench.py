"""Spec-Bench's whole table (docs/measuring.md, "Spec-Bench"): our decoders' rows (``decoders.bench.spec_bench.suite``)
and a serving engine's on the same categories (``decoders.engines.bench.engine_bench``: llama.cpp's prompt lookup over
its own plain decoding), which only a layer above both ``decoders.bench`` and ``decoders.engines`` can put together:
this one. The ``spec_bench`` figure, ``bench --task spec-bench --draft all``, ``bench --engine E --task spec-bench`` and
``report --task spec-bench`` call it."""

from __future__ import annotations

import time
from dataclasses import replace

from decoders.bench.rows import TableRow
from decoders.bench.spec_bench.document import EngineTable, SpecBenchTable
from decoders.bench.spec_bench.forecast import SPEC_BENCH_FORECAST_QUESTIONS, other_questions
from decoders.bench.spec_bench.questions import LABELS, spec_bench_categories, spec_bench_prompts
from decoders.bench.spec_bench.run import ALL, SUITE_SETTINGS, SpecBenchRun
from decoders.bench.spec_bench.suite import DYNAMIC, ENGINE_GAMMAS, spec_bench_document, suite_drafts
from decoders.bench.spec_bench.table import prompt_counts
from decoders.engine_results import EngineBenchDocument
from decoders.engines import open_engine
from decoders.engines.base import DEFAULT_CONTEXT, capability
from decoders.engines.bench import engine_bench
from decoders.models.gguf import gguf_tokenizer
from decoders.progress import progress_bar
from spectheory.optimum import best_gamma_row

__all__ = ["ENGINE_GAMMAS", "WHOLE_TABLE", "engine_table", "whole_table", "measure_table"]

#: The committed table (the ``spec_bench`` figure): every draft on SmolLM2 with the time-boxed settings, forecast first.
WHOLE_TABLE = SpecBenchRun(target="smollm2", forecast_questions=SPEC_BENCH_FORECAST_QUESTIONS)


#: The table's name of an engine's rows, where it is not the engine's own name.
ENGINE_LABELS = {"llama-cpp": "llama.cpp prompt lookup"}


def _engine_row(category: str, document: EngineBenchDocument, label: str) -> TableRow:
    """One category's best measured gamma of an engine's bench ``document`` (with the category's questions) as a table
    row (the prediction: the engine's)."""
    best = best_gamma_row(document.rows)
    return TableRow(
        category=category,
        label=LABELS[category],
        draft=label,
        **prompt_counts(document.questions),
        setting=f"gamma {best.gamma}",
        gamma=best.gamma,
        mean_acceptance_length=best.tokens_per_iteration,
        acceptance_rate=best.acceptance_rate,
        alpha=best.alpha,
        speedup=best.speedup,
        speedup_spread=best.speedup_spread,
        calibrated_speedup=best.predicted_speedup,
        calibrated_over_measured=best.predicted_over_measured,
        forecast_speedup=best.forecast_speedup,
        greedy_equal=all(row.greedy_equal_to_plain for row in document.rows),
    )


def engine_table(engine, tokenizer, run: SpecBenchRun) -> EngineTable:
    """Each category of ``run.task`` through ``decoders.engines.bench.engine_bench`` at ``run.gammas`` (``prompts``
    questions each of ``run.settings``, its new tokens, repeats, warm-up and seed; with ``run.forecast_questions``, its
    forecast from that many other questions of the category first); prompts longer than the engine's context leaves
    room for are cut from the front. llama.cpp's first call after loading is slower than the rest: one warm-up at
    least."""
    s, gammas = run.settings, run.gammas
    prompts, max_new_tokens, repeats, seed = s.prompts, s.max_new_tokens, s.repeats, s.seed
    room = (capability(engine, "context") or DEFAULT_CONTEXT) - max_new_tokens - max(gammas) - 1
    warmup = max(s.warmup, 1)
    categories, rows = {}, []
    for category in spec_bench_categories(run.task):
        questions = spec_bench_prompts(tokenizer, category, prompts, seed, room)
        asked = other_questions(tokenizer, category, run.forecast_questions, seed, room, prompts)
        others = [list(p.tokens) for p in asked]
        with progress_bar(run.progress, total=(len(gammas) + 1) * (repeats + warmup), desc=category, unit="run") as bar:
            document = engine_bench(
                engine,
                [list(p.tokens) for p in questions],
                gammas=gammas,
                max_new_tokens=max_new_tokens,
                repeats=repeats,
                warmup=warmup,
                forecast_prompts=others or None,
                progress=bar.update,
            )
        categories[category] = replace(document, label=LABELS[category], questions=[p.as_dict() for p in questions])
        rows.append(_engine_row(category, categories[category], ENGINE_LABELS.get(engine.name, engine.name)))
    return EngineTable(
        task=run.task,
        engine=engine.name,
        model=engine.model_path.name,
        prompt_room=room,
        categories=categories,
        table=tuple(rows),
    )


def _engine_rows(run: SpecBenchRun) -> EngineTable | str:
    """llama.cpp's table on ``run.target``'s GGUF file, or why there is none (no GGUF file, no llama-cpp-python)."""
    try:
        engine = open_engine("llama-cpp", gguf=run.target)
    except ValueError as error:
        return str(error)
    return engine_table(engine, gguf_tokenizer(engine.model_path), run)


def whole_table(run: SpecBenchRun, drafts: dict | None = None) -> SpecBenchTable:
    """Every draft of ``suite_drafts(run.target)`` (or ``drafts`` {name: gammas}), the dynamic tree with the first and
    the engine's rows (``engine``; where there are none, ``engine_skipped`` says why), each forecast first from
    ``run.forecast_questions`` other questions per category (0: none)."""
    drafts = drafts or suite_drafts(run.target)
    table = spec_bench_document(run, drafts, DYNAMIC)
    started = time.perf_counter()
    engine = _engine_rows(replace(run, gammas=ENGINE_GAMMAS))
    if isinstance(engine, str):
        return replace(table, engine_skipped=engine)
    return replace(table, engine=replace(engine, seconds=time.perf_counter() - started))


def measure_table(run: SpecBenchRun) -> SpecBenchTable:
    """The table of ``run.draft`` on ``run.settings``' prompts, tokens and repeats (``ALL``: every draft of
    ``suite_drafts``, the dynamic tree and the engine's rows): at ``run.gammas`` where given, else each draft's own;
    each forecast first from ``run.forecast_questions`` other questions per category (0: none)."""
    own = suite_drafts(run.target)
    drafts = {
        name: tuple(run.gammas) if run.gammas else own.get(name, SUITE_SETTINGS.gammas)
        for name in (list(own) if run.draft == ALL else [run.draft])
    }
    gammas = tuple(sorted({g for chosen in drafts.values() for g in chosen}))
    settings = replace(run.settings, gammas=gammas, call_steps=SUITE_SETTINGS.call_steps, batch_sizes=())
    run = replace(run, settings=settings)
    if run.draft == ALL:
        return whole_table(run, drafts)
    return spec_bench_document(run, drafts, dynamic=None)
