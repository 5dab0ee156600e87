"""Spec-Bench's table (docs/measuring.md, "Spec-Bench"): for each category, every draft's gamma sweep and EAGLE-2's
dynamic tree against one autoregressive baseline, at T = 0 and batch 1, all timed interleaved prompt by prompt
and repeat by repeat, so that the machine's drift hits every row alike.

What the drafts share, so that the whole table fits its time box: per category and prompt room (a draft with a
short context gets its prompts cut to fit, and a baseline of its own), the autoregressive runs (the baseline, the
cost profile's t_step and target prefill, and every row's greedy reference: greedy decoding repeats itself), the
target's verify call at every width and its one-token calls for c. At T = 0 a draft's cost profile
(``decoders.bench.profile.ProfileRecorder``) takes its speculative runs from the timed sweep itself, since separate
profile runs would decode the same text again; the calibrated prediction recombines the sweep's phases with the
separately timed verify calls and the acceptance measured at the largest gamma, replayed along the text at the
others: a calibration, as in ``bench``, not a forecast from other runs. The dynamic tree has no cost model (the
rank model predicts static shapes only, docs/theory-trees.md §12): its row is measured only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import (
    BenchSettings,
    Interleaved,
    bench_row,
    environment,
    model_dtype,
    per_repeat,
    with_theorem,
)
from decoders.bench.inputs import load_inputs
from decoders.bench.profile import ProfileRecorder, call_job, verify_widths_job
from decoders.bench.rows import DynamicTreeRow
from decoders.bench.spec_bench.document import SpecBenchCategory, SpecBenchDraft, SpecBenchDynamic, SpecBenchTable
from decoders.bench.spec_bench.forecast import forecast_table, judge_category
from decoders.bench.spec_bench.questions import (
    LABELS,
    PromptRows,
    spec_bench_categories,
    spec_bench_prompts,
)
from decoders.bench.spec_bench.run import SpecBenchRun, TableModels
from decoders.drafts import spec_bench_drafts
from decoders.dynamic_tree import DynamicTree
from decoders.models.protocol import synchronize
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import TreeConfig, generate_tree, tree_room
from plumbing.timing import time_interleaved

__all__ = [
    "DYNAMIC",
    "ENGINE_GAMMAS",
    "suite_drafts",
    "bench_category",
    "spec_bench_document",
]

#: EAGLE-2's tree (branching, depth, nodes) decoded with the table's first draft.
DYNAMIC = DynamicTree(2, 4, 8)
#: A serving engine's rows (llama.cpp's prompt lookup) at these draft lengths: its best on SmolLM2 is the smallest
#: (docs/measuring.md).
ENGINE_GAMMAS = (1, 2, 4)


def suite_drafts(target: str | None) -> dict[str, tuple]:
    """The table's drafts and their gammas for ``target``, as the drafts declare them (``decoders.drafts``,
    ``DraftKind.spec_bench``): two gammas at least each (one would calibrate its own prediction), prompt lookup where
    its best lies, the slow drafts (alpha near 0.1, or c near 0.8) at small gammas; on a target other than SmolLM2,
    the drafts built from its text alone."""
    return spec_bench_drafts(target)


def _room(models, new_tokens: int, width: int) -> int:
    """The longest prompt every model's context leaves room for beside the new tokens (or c's one-token calls)
    and a verify call of ``width`` positions (no bound: 2^20)."""
    contexts = [model.max_context for model in models if model.max_context is not None]
    return min(contexts) - new_tokens - width if contexts else 1 << 20


def _group_jobs(
    models: TableModels, rows: PromptRows, s: BenchSettings, room: int, state: dict
) -> dict[tuple, Callable]:
    """The timed jobs of one prompt room: ``models`` (the drafts of the room, the dynamic tree where its draft is
    among them) on ``rows``; fills ``state``: greedy tokens, outputs and each draft's recorder."""
    target, drafts, dynamic = models.target, models.drafts, models.dynamic
    new, count = s.max_new_tokens, len(rows)
    recorders = {
        name: ProfileRecorder(
            max(gammas), new, {"autoregressive": count} | {("speculative", g): count for g in gammas}, s.warmup, {}
        )
        for name, (_, gammas) in drafts.items()
    }
    state.update(recorders=recorders, greedy={}, outputs={})
    widths = range(1, max((max(g) for _, g in drafts.values()), default=1) + 2)
    jobs = {(room, "c target"): call_job(target, rows[0], s.call_steps)}
    jobs |= {(room, name, "c"): call_job(model, rows[0], s.call_steps) for name, (model, _) in drafts.items()}
    if drafts:
        jobs[(room, "verify widths")] = verify_widths_job(
            target,
            rows[0:1],
            GREEDY,
            widths,
            lambda seconds: [recorder.add_widths(seconds) for recorder in recorders.values()],
        )
    for row in range(count):

        def autoregressive(row=row):
            generation = generate_autoregressive(
                target,
                rows[row : row + 1],
                max_new_tokens=new,
                sampling=GREEDY,
                randomness=seeded(row, target.device),
                profile=True,
            )
            state["greedy"][row] = generation.tokens[0]
            for recorder in recorders.values():
                recorder.add("autoregressive", generation.stats)

        jobs[((room, "autoregressive"), row)] = autoregressive
        for name, (model, gammas) in drafts.items():
            for gamma in gammas:

                def speculative(row=row, name=name, model=model, gamma=gamma):
                    generation = generate_speculative(
                        target,
                        model,
                        rows[row : row + 1],
                        max_new_tokens=new,
                        config=SpeculativeConfig(gamma, GREEDY),
                        randomness=seeded(row, target.device),
                        profile=True,
                    )
                    state["outputs"][(name, gamma, row)] = generation
                    recorders[name].add(("speculative", gamma), generation.stats)

                jobs[((room, name, gamma), row)] = speculative
        if dynamic is not None:

            def tree(row=row, model=dynamic[1], config=TreeConfig(dynamic[2], GREEDY, "target-only")):
                state["outputs"][("dynamic", row)] = generate_tree(
                    target,
                    model,
                    rows[row : row + 1],
                    max_new_tokens=new,
                    config=config,
                    randomness=seeded(row, target.device),
                )

            jobs[((room, "dynamic"), row)] = tree
    return jobs


def _draft_document(
    name: str, gammas: tuple, timings: dict, room: int, state: dict, s: BenchSettings
) -> SpecBenchDraft:
    """One draft's rows on ``s.prompts`` prompts (``decoders.bench.bench.bench_row``, with greedy equality per
    prompt and Theorem 3.8 beside)."""
    count = s.prompts
    c_target, c_draft = (timings[key].median / s.call_steps for key in ((room, "c target"), (room, name, "c")))
    recorder = state["recorders"][name]
    profile = recorder.profile(c_draft / c_target)
    measured = []
    for gamma in gammas:
        runs = [state["outputs"][(name, gamma, row)] for row in range(count)]
        compared = Interleaved(timings, (room, "autoregressive"), (room, name, gamma))
        row = bench_row(0.0, gamma, compared, runs, profile, s.max_new_tokens)
        measured.append(replace(row, greedy_equal=[run.tokens[0] == state["greedy"][i] for i, run in enumerate(runs)]))
    if len(gammas) == 1:  # the profile's only runs are the row's own: its calibration would be the measurement
        measured = [
            replace(row, calibrated_speedup=None, calibrated_over_measured=None, calibrated_within=None)
            for row in measured
        ]
    alpha, rows = with_theorem(measured, c_draft / c_target)
    return SpecBenchDraft(
        gammas=list(gammas),
        prompt_room=room,
        autoregressive_seconds=statistics.median(per_repeat(timings, (room, "autoregressive"), count)),
        c=c_draft / c_target,
        target_call_seconds=c_target,
        draft_call_seconds=c_draft,
        alpha=alpha,
        rows=tuple(rows),
        profile=profile,
        spread=recorder.spread(),
    )


def _dynamic_document(dynamic: tuple, timings: dict, room: int, state: dict, count: int) -> SpecBenchDynamic:
    """The dynamic tree's (draft name, model, tree) row: speedup over the baseline per repeat, tokens per target call,
    greedy equality."""
    name, _, tree = dynamic
    runs = [state["outputs"][("dynamic", row)] for row in range(count)]
    ratios = sorted(
        a / b
        for a, b in zip(
            per_repeat(timings, (room, "autoregressive"), count), per_repeat(timings, (room, "dynamic"), count)
        )
    )
    accepted = [n for run in runs for iteration in run.stats.accepted_per_iteration for n in iteration]
    median = statistics.median(ratios)
    row = DynamicTreeRow(
        temperature=0.0,
        nodes=tree.budget,
        speedup=median,
        speedup_spread=[ratios[0], median, ratios[-1]],
        mean_acceptance_length=1 + sum(accepted) / len(accepted),
        acceptance_rate=sum(accepted) / (len(accepted) * (tree.budget - 1)),
        greedy_equal=[run.tokens[0] == state["greedy"][i] for i, run in enumerate(runs)],
    )
    return SpecBenchDynamic(draft=name, tree=tree.as_dict(), prompt_room=room, rows=(row,))


def bench_category(
    models: TableModels, category: str, s: BenchSettings, *, questions=None, bar=None, categories: int = 1
) -> SpecBenchCategory:
    """One category's rows: ``models``' drafts and dynamic tree on ``s.prompts`` questions (``questions(room)``'s
    prompts where given), cut to the prompt room of each draft's context (drafts of one room share their baseline);
    every job timed interleaved. ``bar``: a progress bar over ``categories`` such calls."""
    target, dynamic = models.target, models.dynamic
    tree = (
        [tree_room(TreeConfig(dynamic[2], GREEDY, "target-only"), s.max_new_tokens) - s.max_new_tokens]
        if dynamic
        else []
    )
    width = max([max(gammas) + 1 for _, gammas in models.drafts.values()] + tree)
    groups = {}
    for name, (model, _) in models.drafts.items():
        groups.setdefault(_room((target, model), max(s.max_new_tokens, s.call_steps), width), []).append(name)
    dynamic_room = None if dynamic is None else next(room for room, names in groups.items() if dynamic[0] in names)
    prompts, jobs, states = {}, {}, {}
    for room, names in groups.items():
        prompts[room] = (
            questions(room) if questions else spec_bench_prompts(models.tokenizer, category, s.prompts, s.seed, room)
        )
        rows = PromptRows(list(prompt.tokens) for prompt in prompts[room])
        states[room] = {}
        jobs |= _group_jobs(models.only(names), rows, s, room, states[room])
    if bar is not None and not bar.total:
        bar.reset(total=len(jobs) * (s.warmup + s.repeats) * categories)
    timings = time_interleaved(
        jobs,
        repeats=s.repeats,
        warmup=s.warmup,
        synchronize=lambda: synchronize(target.device),
        progress=None if bar is None else lambda: bar.update(1),
    )
    return SpecBenchCategory(
        label=LABELS[category],
        prompts={str(room): [p.as_dict() for p in prompts[room]] for room in groups},
        drafts={
            name: _draft_document(name, models.drafts[name][1], timings, room, states[room], s)
            for room, names in groups.items()
            for name in names
        },
        dynamic=(
            None
            if dynamic is None
            else _dynamic_document(dynamic, timings, dynamic_room, states[dynamic_room], s.prompts)
        ),
    )


def _warm(target, drafts: dict, prompt: torch.Tensor) -> None:
    """One short untimed decode per draft: the first calls' one-off costs stay out of the timed repeats."""
    for model, gammas in drafts.values():
        generate_speculative(
            target,
            model,
            prompt,
            max_new_tokens=8,
            config=SpeculativeConfig(max(gammas), GREEDY),
            randomness=seeded(0, target.device),
        )


def spec_bench_document(run: SpecBenchRun, drafts: dict, dynamic: DynamicTree | None = DYNAMIC) -> SpecBenchTable:
    """Spec-Bench per category of ``run.task`` for ``drafts`` {name: gammas} (``suite_drafts``) and, unless
    ``dynamic`` is None, the dynamic tree with the first draft, at T = 0 (``bench_category``);
    ``run.settings.prompts`` questions per category, ``run.settings.max_new_tokens`` new tokens each. With
    ``run.forecast_questions``, first the forecast of every category from that many other questions of it
    (``decoders.bench.spec_bench.forecast``), judged on the table."""
    settings = run.settings
    inputs = load_inputs(run.target, list(drafts), device=run.device, dtype=run.dtype, compile=run.compile)
    first = next(iter(drafts))
    models = TableModels(
        inputs.target,
        inputs.tokenizer,
        {name: (inputs.drafts[name], tuple(gammas)) for name, gammas in drafts.items()},
        None if dynamic is None else (first, inputs.drafts[first], dynamic),
    )
    categories, started = spec_bench_categories(run.task), time.perf_counter()
    _warm(
        inputs.target,
        models.drafts,
        torch.tensor([spec_bench_prompts(inputs.tokenizer, categories[0], 1, 0, 64)[0].tokens]),
    )
    ahead = None
    if run.forecast_questions:
        with progress_bar(run.progress, total=len(categories), desc="forecast", unit="category") as bar:
            ahead = forecast_table(models, run, bench_category=bench_category, progress=lambda _: bar.update(1))
    swept = time.perf_counter()
    with progress_bar(run.progress, desc="spec-bench", unit="run") as bar:
        measured = {
            category: bench_category(models, category, settings, bar=bar, categories=len(categories))
            for category in categories
        }
    if ahead is not None and not ahead.withheld:  # judged here; a withheld forecast keeps its numbers, judged nowhere
        measured = {
            category: replace(
                document,
                forecast=replace(
                    ahead.categories[category], judged=judge_category(ahead.categories[category], document)
                ),
            )
            for category, document in measured.items()
        }
        ahead = replace(ahead, categories=None)
    return SpecBenchTable(
        task=run.task,
        target=run.target or "shipped target",
        drafts={name: list(g) for name, g in drafts.items()},
        dynamic=None if dynamic is None else dict(dynamic.as_dict(), draft=first),
        environment=environment(inputs.target.device, model_dtype(inputs.target)),
        settings=replace(settings, gammas=tuple(sorted({g for gs in drafts.values() for g in gs}))).as_dict(),
        batch_size=1,
        seconds=time.perf_counter() - started,
        sweep_seconds=time.perf_counter() - swept,
        forecast=ahead,
        categories=measured,
    )
