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
from dataclasses import dataclass, replace

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
from decoders.bench.spec_bench.forecast import forecast_table, judge_category
from decoders.bench.spec_bench.questions import (
    LABELS,
    QUESTIONS_PER_CATEGORY,
    PromptRows,
    spec_bench_categories,
    spec_bench_prompts,
)
from decoders.drafts import spec_bench_drafts
from decoders.dynamic_tree import DynamicTree
from decoders.models.protocol import synchronize
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import TreeConfig, generate_tree, tree_room
from plumbing.timing import time_interleaved
from plumbing.validation import as_int

__all__ = [
    "ALL",
    "DYNAMIC",
    "SUITE_SETTINGS",
    "ENGINE_GAMMAS",
    "SpecBenchRun",
    "suite_drafts",
    "bench_category",
    "spec_bench_document",
]

ALL = "all"  # --draft all: the whole table
#: EAGLE-2's tree (branching, depth, nodes) decoded with the table's first draft.
DYNAMIC = DynamicTree(2, 4, 8)
#: The time-boxed default: the whole SmolLM2 table within 30 minutes on 2 cores (docs/measuring.md).
SUITE_SETTINGS = BenchSettings(
    gammas=(2, 4, 6),
    temperatures=(0.0,),
    prompts=2,
    max_new_tokens=32,
    repeats=2,
    warmup=0,
    call_steps=32,
    batch_sizes=(),
)
#: A serving engine's rows (llama.cpp's prompt lookup) at these draft lengths: its best on SmolLM2 is the smallest
#: (docs/measuring.md).
ENGINE_GAMMAS = (1, 2, 4)


def suite_drafts(target: str | None) -> dict:
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


def _group_jobs(target, drafts: dict, rows: PromptRows, s: BenchSettings, room: int, dynamic, state: dict) -> dict:
    """The timed jobs of one prompt room: ``drafts`` {name: (model, gammas)} and the ``dynamic`` (name, model,
    tree) or None; fills ``state``: greedy tokens, outputs and each draft's recorder."""
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
    name: str, gammas: tuple, timings: dict, room: int, count: int, state: dict, s: BenchSettings
) -> dict:
    """One draft's rows (``decoders.bench.bench.bench_row``, with greedy equality per prompt and Theorem 3.8 beside)."""
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
    rows = [row.as_dict() for row in rows]  # the document's
    baseline = statistics.median(per_repeat(timings, (room, "autoregressive"), count))
    return {
        "gammas": list(gammas),
        "prompt_room": room,
        "autoregressive_seconds": baseline,
        "c": c_draft / c_target,
        "target_call_seconds": c_target,
        "draft_call_seconds": c_draft,
        "alpha": alpha,
        "rows": rows,
        "profile": dict(profile.as_dict(), spread=recorder.spread()),
    }


def _dynamic_document(name: str, tree: DynamicTree, timings: dict, room: int, count: int, state: dict) -> dict:
    """The dynamic tree's row: speedup over the baseline per repeat, tokens per target call, greedy equality."""
    runs = [state["outputs"][("dynamic", row)] for row in range(count)]
    ratios = sorted(
        a / b
        for a, b in zip(
            per_repeat(timings, (room, "autoregressive"), count), per_repeat(timings, (room, "dynamic"), count)
        )
    )
    accepted = [n for run in runs for iteration in run.stats.accepted_per_iteration for n in iteration]
    median = statistics.median(ratios)
    return {
        "draft": name,
        "tree": tree.as_dict(),
        "prompt_room": room,
        "rows": [
            DynamicTreeRow(
                temperature=0.0,
                nodes=tree.budget,
                speedup=median,
                speedup_spread=[ratios[0], median, ratios[-1]],
                mean_acceptance_length=1 + sum(accepted) / len(accepted),
                acceptance_rate=sum(accepted) / (len(accepted) * (tree.budget - 1)),
                greedy_equal=[run.tokens[0] == state["greedy"][i] for i, run in enumerate(runs)],
            ).as_dict()
        ],
    }


def bench_category(
    target,
    tokenizer,
    category: str,
    drafts: dict,
    s: BenchSettings,
    *,
    dynamic=None,
    bar=None,
    categories: int = 1,
    questions=None,
) -> dict:
    """One category's rows: ``drafts`` {name: (model, gammas)}, ``dynamic`` (draft name, model, DynamicTree) or None;
    ``s.prompts`` questions (``questions(room)``'s prompts where given), cut to the prompt room of each draft's
    context (drafts of one room share their baseline); every job timed interleaved. ``bar``: a progress bar over
    ``categories`` such calls."""
    tree = (
        [tree_room(TreeConfig(dynamic[2], GREEDY, "target-only"), s.max_new_tokens) - s.max_new_tokens]
        if dynamic
        else []
    )
    width = max([max(gammas) + 1 for _, gammas in drafts.values()] + tree)
    groups = {}
    for name, (model, gammas) in drafts.items():
        groups.setdefault(_room((target, model), max(s.max_new_tokens, s.call_steps), width), {})[name] = (
            model,
            gammas,
        )
    dynamic_room = None if dynamic is None else next(room for room, members in groups.items() if dynamic[0] in members)
    prompts, jobs, states = {}, {}, {}
    for room, members in groups.items():
        prompts[room] = (
            questions(room) if questions else spec_bench_prompts(tokenizer, category, s.prompts, s.seed, room)
        )
        rows = PromptRows(list(prompt.tokens) for prompt in prompts[room])
        states[room] = {}
        jobs |= _group_jobs(target, members, rows, s, room, dynamic if room == dynamic_room else None, states[room])
    if bar is not None and not bar.total:
        bar.reset(total=len(jobs) * (s.warmup + s.repeats) * categories)
    timings = time_interleaved(
        jobs,
        repeats=s.repeats,
        warmup=s.warmup,
        synchronize=lambda: synchronize(target.device),
        progress=None if bar is None else lambda: bar.update(1),
    )
    document = {
        "label": LABELS[category],
        "prompts": {str(room): [p.as_dict() for p in prompts[room]] for room in groups},
        "drafts": {
            name: _draft_document(name, gammas, timings, room, s.prompts, states[room], s)
            for room, members in groups.items()
            for name, (_, gammas) in members.items()
        },
    }
    if dynamic is not None:
        document["dynamic"] = _dynamic_document(
            dynamic[0], dynamic[2], timings, dynamic_room, s.prompts, states[dynamic_room]
        )
    return document


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


@dataclass(frozen=True)
class SpecBenchRun:
    """One run of Spec-Bench's table (``bench --task spec-bench``, ``report --task spec-bench``, the figure), made once
    from the flags, checked here before any work and passed down whole: ``task``'s categories under ``settings`` (T = 0
    only), ``draft`` (``ALL``: every draft of ``suite_drafts``, the dynamic tree and the engine's rows) at ``gammas``
    (None: each draft's own), against ``target`` on ``device`` in ``dtype`` with ``compile``, forecast first from
    ``forecast_questions`` other questions per category (0: none)."""

    settings: BenchSettings = SUITE_SETTINGS
    task: str = "spec-bench"
    draft: str = ALL
    gammas: tuple | None = None
    target: str | None = None
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    compile: str = "auto"
    forecast_questions: int = 0
    progress: bool | None = None

    def __post_init__(self) -> None:
        if self.settings.temperatures != (0.0,):
            raise ValueError(
                f"temperatures {self.settings.temperatures}: Spec-Bench's table is greedy; give --temperatures 0"
            )
        high = QUESTIONS_PER_CATEGORY - self.settings.prompts
        as_int("forecast_questions", self.forecast_questions, low=0, high=high)


def spec_bench_document(run: SpecBenchRun, drafts: dict, dynamic: DynamicTree | None = DYNAMIC) -> dict:
    """Spec-Bench per category of ``run.task`` for ``drafts`` {name: gammas} (``suite_drafts``) and, unless
    ``dynamic`` is None, the dynamic tree with the first draft, at T = 0 (``bench_category``);
    ``run.settings.prompts`` questions per category, ``run.settings.max_new_tokens`` new tokens each. With
    ``run.forecast_questions``, first the forecast of every category from that many other questions of it
    (``decoders.bench.spec_bench.forecast``), judged on the table."""
    settings, task, target, progress = run.settings, run.task, run.target, run.progress
    inputs = load_inputs(target, list(drafts), device=run.device, dtype=run.dtype, compile=run.compile)
    models = {name: (inputs.drafts[name], tuple(gammas)) for name, gammas in drafts.items()}
    first = next(iter(drafts))
    tree = None if dynamic is None else (first, inputs.drafts[first], dynamic)
    categories, started = spec_bench_categories(task), time.perf_counter()
    _warm(
        inputs.target, models, torch.tensor([spec_bench_prompts(inputs.tokenizer, categories[0], 1, 0, 64)[0].tokens])
    )
    ahead = None
    if run.forecast_questions:
        with progress_bar(progress, total=len(categories), desc="forecast", unit="category") as bar:
            ahead = forecast_table(
                inputs.target,
                inputs.tokenizer,
                categories,
                models,
                settings,
                dynamic=tree,
                questions=run.forecast_questions,
                bench_category=bench_category,
                progress=lambda _: bar.update(1),
            )
    swept = time.perf_counter()
    with progress_bar(progress, desc="spec-bench", unit="run") as bar:
        measured = {
            category: bench_category(
                inputs.target,
                inputs.tokenizer,
                category,
                models,
                settings,
                dynamic=tree,
                bar=bar,
                categories=len(categories),
            )
            for category in categories
        }
    if ahead is not None and not ahead["withheld"]:
        for category, document in measured.items():
            document["forecast"] = dict(
                ahead["categories"][category], judged=judge_category(ahead["categories"][category], document)
            )
    if ahead is not None:  # a withheld forecast keeps its numbers here, judged nowhere
        ahead = {key: value for key, value in ahead.items() if key != "categories" or ahead["withheld"]}
    return {
        "task": task,
        "target": target or "shipped target",
        "drafts": {name: list(g) for name, g in drafts.items()},
        "dynamic": None if dynamic is None else dict(dynamic.as_dict(), draft=first),
        "environment": environment(inputs.target.device, model_dtype(inputs.target)),
        "settings": replace(settings, gammas=tuple(sorted({g for gs in drafts.values() for g in gs}))).as_dict(),
        "batch_size": 1,
        "seconds": time.perf_counter() - started,
        "sweep_seconds": time.perf_counter() - swept,
        "forecast": ahead,
        "categories": measured,
    }
