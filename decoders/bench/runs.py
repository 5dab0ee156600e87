"""The measurements behind the committed results, on the shipped models and the held-out corpus: each
function loads what it needs, measures, and returns the JSON document (without provenance, which the
writer adds). ``spectheory alpha`` and ``bench`` print them; the figure scripts' ``compute`` write them."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from decoders import zoo
from decoders.bench import alpha, bench, policy_bench, tree_bench
from decoders.bench.documents import (
    AlphaDocument,
    BenchDocument,
    BlockwiseDocument,
    LenienceDocument,
    PolicyBench,
    RealModelCell,
    RealModelDocument,
    SpecBenchAlphaDocument,
    TreeBench,
)
from decoders.bench.forecast.sweep import (
    FORECAST_COST_PROMPTS,
    FORECAST_REPEATS,
    checked_against_sweep,
    forecast_sweep,
    judge_forecast,
)
from decoders.bench.hf_compare import check_comparable, hf_comparison
from decoders.bench.inputs import SHIPPED_TARGET, load_inputs
from decoders.bench.prompts import benchmark_prompts, draw_prompts, text_windows
from decoders.bench.rows import CategoryAlpha
from decoders.bench.spec_bench.questions import TASK, is_spec_bench, spec_bench_categories, spec_bench_prompts
from decoders.drafts import SHIPPED, DraftContext, build_draft, draft_names
from decoders.models.corpus import load_corpus
from decoders.models.protocol import decode_path
from decoders.progress import progress_bar
from plumbing.validation import as_int, as_positive_int
from spectheory.recommendation import from_sweep
from spectheory.vocabularies import METHODS

__all__ = [
    "AlphaRun",
    "SPEC_BENCH_PROMPTS",
    "SPEC_BENCH_TOKENS",
    "TEXT_PROMPTS",
    "TEXT_TOKENS",
    "BenchRun",
    "alpha_document",
    "spec_bench_alpha_document",
    "lenience_document",
    "bench_document",
    "tree_document",
    "policy_document",
    "blockwise_document",
    "shipped_prompts",
    "real_model_document",
    "REAL_CELLS",
    "REAL_SETTINGS",
    "ALPHA_ONLY_DRAFTS",
]


def shipped_prompts(count: int, length: int, seed: int) -> torch.Tensor:
    """``count`` seeded held-out windows ``[count, length]`` of the shipped corpus."""
    return text_windows(load_corpus().held_out, count, length, seed)


#: ``alpha --task spec-bench``'s questions per category and the tokens decoded from each.
SPEC_BENCH_PROMPTS, SPEC_BENCH_TOKENS = 4, 48
#: Held-out prompts and the tokens decoded from each, for the acceptance counts on text.
TEXT_PROMPTS, TEXT_TOKENS = 16, 128


@dataclass(frozen=True)
class AlphaRun:
    """One run of `spectheory alpha` (docs/measuring.md), made once by the command from its flags, checked here before
    any work and passed down whole: ``drafts`` (None: every shipped one, or those built from a target with its own
    tokenizer) against ``target`` (None: the shipped one) at each of ``temperatures``; alpha along ``windows``
    held-out windows of ``text`` (None: the shipped corpus's) and from the acceptance counts of runs at ``gamma`` from
    ``prompts`` held-out prompts (None: ``TEXT_PROMPTS``), seeded from ``seed``, on ``device``. With ``task``
    (Spec-Bench's, ``spec-bench[:CATEGORY,...]``) alpha per category on ``prompts`` questions each (None:
    ``SPEC_BENCH_PROMPTS``; ``windows`` does not apply)."""

    drafts: tuple | None = None
    temperatures: tuple = (0.0, 1.0)
    target: str | None = None
    text: str | None = None
    task: str | None = None
    windows: int = 32
    prompts: int | None = None
    gamma: int = 4
    seed: int = 0
    device: str = "cpu"
    progress: bool | None = None

    def __post_init__(self) -> None:
        alpha.check_windows(self.windows)
        as_positive_int("gamma", self.gamma)
        if self.task is not None and not is_spec_bench(self.task):
            raise ValueError(
                f"--task {self.task}: alpha takes {TASK}[:CATEGORY,...] only (the other tasks are bench's)"
            )
        if self.task is not None and self.text is not None:
            raise ValueError(
                f"--text {self.text}: Spec-Bench's questions are the prompts; drop --text or --task {self.task}"
            )
        low = 2 if self.task else 1  # per category, standard errors are over its questions
        as_int("prompts", self.counted.prompts, low=low, high=alpha.MAX_PROMPTS)

    @property
    def counted(self) -> alpha.CountedRuns:
        """The speculative runs alpha is counted from."""
        if self.task:
            return alpha.CountedRuns(
                self.gamma, self.prompts or SPEC_BENCH_PROMPTS, max_new_tokens=SPEC_BENCH_TOKENS, seed=self.seed
            )
        return alpha.CountedRuns(self.gamma, self.prompts or TEXT_PROMPTS, max_new_tokens=TEXT_TOKENS, seed=self.seed)


def alpha_document(run: AlphaRun) -> AlphaDocument:
    """Leviathan et al.'s Table 3 analogue: both estimates of alpha for each of ``run``'s drafts at each temperature,
    on the held-out text (``decoders.bench.inputs``)."""
    inputs = load_inputs(run.target, run.drafts, text=run.text, device=run.device)
    along = alpha.window_shape(
        alpha.AlongText(windows=run.windows, seed=run.seed), inputs.target, *inputs.drafts.values()
    )
    jobs = [(name, t) for name in inputs.drafts for t in run.temperatures]
    estimates = tuple(
        alpha.estimate_alpha(inputs.pair(name), name, inputs.held_out, replace(along, temperature=t), run.counted)
        for name, t in progress_bar(run.progress, jobs, desc="alpha", unit="pair")
    )
    return AlphaDocument(corpus_fingerprint=inputs.fingerprint, text=inputs.text, estimates=estimates)


def spec_bench_alpha_document(run: AlphaRun) -> SpecBenchAlphaDocument:
    """Alpha per Spec-Bench category of ``run.task`` (``decoders.bench.spec_bench.questions``): both estimates of each
    draft (default: those built from the target) at each temperature on ``run.counted.prompts`` questions of each
    category (``alpha.alpha_on_prompts``), cut to the room the models' contexts leave beside the new tokens and a
    verify call."""
    counted = run.counted
    inputs = load_inputs(run.target, run.drafts, device=run.device)
    contexts = [m.max_context for m in (inputs.target, *inputs.drafts.values()) if m.max_context is not None]
    room = min(contexts) - counted.max_new_tokens - counted.gamma - 1 if contexts else 1 << 20
    questions, estimates = {}, []
    categories = spec_bench_categories(run.task)
    jobs = [(c, name, t) for c in categories for name in inputs.drafts for t in run.temperatures]
    for category, name, temperature in progress_bar(run.progress, jobs, desc="alpha", unit="pair"):
        if category not in questions:
            questions[category] = spec_bench_prompts(inputs.tokenizer, category, counted.prompts, run.seed, room)
        prompts = [list(q.tokens) for q in questions[category]]
        estimate = alpha.alpha_on_prompts(inputs.pair(name), name, prompts, temperature, counted)
        estimates.append(CategoryAlpha(**vars(estimate), category=category))
    return SpecBenchAlphaDocument(
        task=run.task,
        target=run.target or "shipped target",
        prompt_room=room,
        max_new_tokens=counted.max_new_tokens,
        prompts={c: [q.as_dict() for q in qs] for c, qs in questions.items()},
        estimates=tuple(estimates),
    )


def lenience_document(*, windows: int = 32, progress: bool | None = None) -> LenienceDocument:
    """Leviathan et al.'s Table 5 analogue: alpha of every shipped draft at every lenience of ``LENIENCES``."""
    corpus = load_corpus()
    drafts = {name: build_draft(name, DraftContext()) for name in draft_names(SHIPPED)}
    rows = alpha.alpha_under_lenience(
        zoo.load_target(), drafts, corpus.held_out, alpha.LENIENCES, alpha.AlongText(windows=windows), progress=progress
    )
    return LenienceDocument(corpus_fingerprint=corpus.fingerprint, windows=windows, rows=tuple(rows))


@dataclass(frozen=True)
class BenchRun:
    """One run of `spectheory bench` on our decoders (docs/measuring.md), made once by the command from its flags,
    checked here before any work, and passed down whole: the ``draft`` against the ``target`` (default the shipped
    pair), on windows of the held-out ``text`` (or ``task``'s prompts) under ``settings``, on ``device`` in ``dtype``
    with ``compile``; and what it measures: the gamma sweep (with the forecast first from ``forecast_prompts`` other
    prompts, the first ``forecast_cost_prompts`` timed over ``forecast_repeats``; with ``hf`` our loops against
    Hugging Face's at ``hf_gamma``, default the best measured), or with ``tree`` trees against chains at ``budgets``
    (EAGLE-2's ``dynamic`` K:D beside), or with ``policies`` the draft-length policies (() for all) against the fixed
    gammas, or with ``cross_vocabulary`` a draft of another tokenizer under each of those methods, the same-tokenizer
    drafts ``beside`` timed in the same run (``decoders.bench.cross_bench``)."""

    draft: str = "transformer"
    settings: bench.BenchSettings = bench.BenchSettings()
    target: str | None = None
    text: str | None = None
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    compile: str = "auto"
    task: str | None = None
    forecast_prompts: int = 0
    forecast_cost_prompts: int = FORECAST_COST_PROMPTS
    forecast_repeats: int = FORECAST_REPEATS
    hf: bool = False
    hf_gamma: int | None = None
    tree: bool = False
    budgets: tuple = tree_bench.BENCH_TREE_BUDGETS
    dynamic: str | tuple | None = None  # "K:D", read as (K, D)
    policies: tuple | None = None  # None: not the policies' comparison; (): every policy
    cross_vocabulary: tuple | None = None  # the methods (spectheory.vocabularies.METHODS); None: one tokenizer
    beside: tuple = ()
    progress: bool | None = None

    def __post_init__(self) -> None:
        if self.hf_gamma is not None:
            as_positive_int("hf_gamma", self.hf_gamma)
        as_int("forecast_prompts", self.forecast_prompts, low=0, high=alpha.MAX_PROMPTS)
        as_positive_int("forecast_repeats", self.forecast_repeats)
        if self.forecast_prompts:
            as_int("forecast_cost_prompts", self.forecast_cost_prompts, low=1, high=self.forecast_prompts)
        if self.tree:
            object.__setattr__(self, "budgets", tree_bench.check_budgets(self.budgets))
            if isinstance(self.dynamic, str):
                object.__setattr__(self, "dynamic", tree_bench.check_dynamic(self.dynamic, self.budgets))
        for method in self.cross_vocabulary or ():
            if method not in METHODS:
                raise ValueError(f"cross_vocabulary must be one of {METHODS}, got {method!r}")
        if self.policies is not None:
            object.__setattr__(
                self, "policies", policy_bench.check_policies(self.policies or policy_bench.BENCH_POLICIES)
            )

    def inputs(self, drafts: list):
        """The models and text (``decoders.bench.inputs.load_inputs``) with ``drafts``."""
        return load_inputs(
            self.target, drafts, text=self.text, device=self.device, dtype=self.dtype, compile=self.compile
        )


def bench_document(run: BenchRun = BenchRun()) -> BenchDocument:
    """A pair's speed against Theorem 3.8 (Table 4 analogue) as ``run`` says: the forecast first where asked, judged
    on the sweep's rows (``decoders.bench.forecast.sweep``); the recommendation per temperature; the batch sweep where
    ``run.settings`` has batch sizes; with ``run.hf`` the comparison with Hugging Face on the same networks."""
    draft, settings = run.draft, run.settings
    inputs = run.inputs([draft])
    target_model, model = inputs.target, inputs.drafts[draft]
    settings = replace(settings, sampling=settings.sampling.bound(inputs.tokenizer, target_model.vocab_size))
    if run.hf:
        check_comparable(target_model, model)
    drawn = draw_prompts(
        inputs, run.task, (settings.prompts, settings.prompt_length), seed=settings.seed, forecast=run.forecast_prompts
    )
    prompts, ahead = drawn.sweep, None
    if run.forecast_prompts:
        ahead = forecast_sweep(
            inputs.pair(draft),
            drawn.forecast,
            settings,
            repeats=run.forecast_repeats,
            cost_prompts=run.forecast_cost_prompts,
            progress=run.progress,
        )
    swept = time.perf_counter()
    report = bench.bench_pair(
        inputs.pair(draft, run.target or SHIPPED_TARGET), prompts, settings, progress=run.progress
    )
    sweep_seconds = time.perf_counter() - swept
    judged = ()
    if ahead:
        ahead = checked_against_sweep(ahead, report)
        judged = tuple(judge_forecast(t, report.rows_at(t.temperature)) for t in ahead.temperatures)
    picks = {t.temperature: t.pick for t in ahead.temperatures} if ahead else {}
    batches = hf = None
    if settings.batch_sizes:
        pool = text_windows(
            inputs.held_out,
            max(settings.batch_prompts(b) for b in settings.batch_sizes),
            settings.prompt_length,
            settings.seed,
        )
        batches = bench.bench_batches(inputs.pair(draft), pool, settings, progress=run.progress)
    if run.hf:
        gamma = run.hf_gamma or report.best(settings.temperatures[0]).gamma
        hf = hf_comparison(target_model, model, prompts, settings, gamma=gamma, progress=run.progress)
    return BenchDocument(
        bench=report,
        text=inputs.text,
        task=run.task,
        sweep_seconds=sweep_seconds,
        prompt_ids=prompts.tolist(),
        padded_widths=getattr(target_model, "padded_widths", {}),  # docs/theory.md §11
        decode_paths={"target": decode_path(target_model), "draft": decode_path(model)},
        forecast=ahead,
        judged=judged,
        recommendations={str(t): from_sweep(report.rows_at(t), picks.get(t)) for t in settings.temperatures},
        batches=batches,
        hf=hf,
    )


def tree_document(run: BenchRun) -> TreeBench:
    """Tree against chain at each of ``run.budgets`` (``tree_bench.bench_trees``; ``run.dynamic``: EAGLE-2's trees
    too) for ``run``'s pair, on the bench's prompts (windows of the held-out text, or the task's)."""
    inputs, settings = run.inputs([run.draft]), run.settings
    prompts = benchmark_prompts(inputs, run.task, settings.prompts, settings.prompt_length, settings.seed)
    document = tree_bench.bench_trees(
        inputs.pair(run.draft, run.target or SHIPPED_TARGET),
        prompts,
        inputs.held_out,
        settings,
        tree_bench.TreePlan(budgets=run.budgets, dynamic=run.dynamic),
        progress=run.progress,
    )
    return replace(document, text=inputs.text, task=run.task)


def policy_document(run: BenchRun) -> PolicyBench:
    """Draft-length policies (``run.policies``) against the fixed gammas (``policy_bench.bench_policies``) for
    ``run``'s pair, on the bench's prompts (windows of the held-out text, or the task's)."""
    inputs = run.inputs([run.draft])
    settings = replace(run.settings, sampling=run.settings.sampling.bound(inputs.tokenizer, inputs.target.vocab_size))
    prompts = benchmark_prompts(inputs, run.task, settings.prompts, settings.prompt_length, settings.seed)
    document = policy_bench.bench_policies(
        inputs.pair(run.draft, run.target or SHIPPED_TARGET),
        prompts,
        inputs.held_out,
        settings,
        policy_bench.PolicyPlan(run.policies),
        progress=run.progress,
    )
    return replace(document, text=inputs.text, task=run.task)


def blockwise_document(
    settings: bench.BenchSettings = bench.BenchSettings(), *, progress: bool | None = None
) -> BlockwiseDocument:
    """Stern et al.'s Fig. 4 analogue: the shipped target with its proposal heads (``bench.BLOCKWISE_CONFIGS``)."""
    prompts = shipped_prompts(settings.prompts, settings.prompt_length, settings.seed)
    return bench.bench_blockwise(zoo.load_blockwise(), prompts, settings, progress=progress)


#: The real-model table (docs/theory.md §11): (draft, task, gammas swept). layerskip:24 keeps 24 of SmolLM2's 30
#: layers; it and random (alpha near 0) are swept at small gammas on the rewrite task only (their verdict, do not
#: speculate, does not depend on the task, and each cell costs minutes).
REAL_CELLS = (
    ("copy", "rewrite", (1, 2, 4, 8)),
    ("copy", "completion", (1, 2, 4, 8)),
    ("ngram", "rewrite", (1, 2, 4, 8)),
    ("ngram", "completion", (1, 2, 4, 8)),
    ("layerskip:24", "rewrite", (1, 2, 4)),
    ("random", "rewrite", (1, 2)),
)
#: Drafts whose alpha along text alone is measured beside the table's (layer skipping at other depths).
ALPHA_ONLY_DRAFTS = ("layerskip:8", "layerskip:16")
REAL_SETTINGS = bench.BenchSettings(
    prompts=2, prompt_length=192, max_new_tokens=40, repeats=2, warmup=1, batch_sizes=()
)


def real_model_document(
    target: str = "smollm2",
    cells=REAL_CELLS,
    settings: bench.BenchSettings = REAL_SETTINGS,
    *,
    windows: int = 16,
    hf_task: str = "rewrite",
    progress: bool | None = None,
) -> RealModelDocument:
    """The real-model table: alpha along held-out text of every draft at each temperature, then per (draft, task)
    the gamma sweep with its cost profile (``bench.bench_pair`` on the task's prompts), and on ``hf_task`` our
    decoders against transformers' ``generate`` and its assisted generation with the same draft at T = 0, at the
    best measured gamma."""
    drafts = list(dict.fromkeys([draft for draft, _, _ in cells] + list(ALPHA_ONLY_DRAFTS)))
    inputs = load_inputs(target, drafts)
    along = alpha.window_shape(
        alpha.AlongText(windows=windows, seed=settings.seed), inputs.target, *inputs.drafts.values()
    )
    alphas = [
        row
        for t in settings.temperatures
        for row in alpha.alpha_under_lenience(
            inputs.target, inputs.drafts, inputs.held_out, (1.0,), replace(along, temperature=t), progress=progress
        )
    ]
    measured = []
    for draft, task, gammas in cells:
        swept = replace(settings, gammas=tuple(gammas))
        prompts = benchmark_prompts(inputs, task, swept.prompts, swept.prompt_length, swept.seed)
        report = bench.bench_pair(inputs.pair(draft, target), prompts, swept, progress=progress)
        hf = None
        if task == hf_task:
            hf = hf_comparison(
                inputs.target,
                inputs.drafts[draft],
                prompts,
                replace(swept, temperatures=(0.0,)),
                gamma=report.best(settings.temperatures[0]).gamma,
                progress=progress,
            )
        measured.append(RealModelCell(draft=draft, task=task, bench=report, hf=hf))
    return RealModelDocument(
        target=target,
        text=inputs.text,
        corpus_fingerprint=inputs.fingerprint,
        environment=measured[0].bench.environment,
        settings=settings.as_dict(),
        windows=windows,
        alpha_text=tuple(alphas),
        cells=tuple(measured),
    )
