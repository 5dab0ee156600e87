"""The measurements of `spectheory report`, one call each (docs/measuring.md): on a pair of models, alpha, the gamma
sweep, the calculator's answer and an audit (``pair_report``); on Spec-Bench, a draft and gamma per category from
the whole table, measured or read from a saved one (``spec_bench_report``). ``paper_figs.report`` writes what they
return (report.json, report.md, report.html and the figures) into the output directory, probed here first."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.bench import BenchSettings
from decoders.bench.forecast.sweep import FORECAST_SEED, other_prompts
from decoders.bench.inputs import load_inputs
from decoders.bench.report.pair import ReportSettings, measure_pair
from decoders.bench.spec_bench.forecast import SPEC_BENCH_FORECAST_QUESTIONS
from decoders.bench.spec_bench.recommend import recommend
from decoders.bench.tasks import benchmark_prompts
from decoders.jobs.spec_bench import ALL, measure_table
from plumbing.outputs import check_writable, strict_loads

__all__ = ["pair_report", "spec_bench_report", "saved_table", "cross_vocabulary_report"]


def pair_report(
    settings: ReportSettings,
    *,
    target=None,
    draft: str = "transformer",
    text=None,
    device="cpu",
    compile: str = "auto",
    out: str = "report",
    command: str | None = None,
):
    """The report's document (``decoders.bench.report.document.ReportDocument``) on ``target`` and ``draft`` (the
    shipped pair by default) under ``settings``."""
    check_writable(out, directory=True)
    inputs = load_inputs(target, [draft], text=text, device=device, compile=compile)

    def draw(count: int, offset: int):
        return benchmark_prompts(inputs, settings.task, count, settings.prompt_length, settings.seed + offset)

    prompts = draw(settings.prompts, 1)
    document = measure_pair(
        inputs.target,
        inputs.drafts[draft],
        target_name=target or "shipped target",
        draft_name=draft,
        settings=settings,
        held_out=inputs.held_out,
        text=inputs.text,
        command=command,
        prompts=prompts,
        forecast_prompts=other_prompts(lambda n: draw(n, FORECAST_SEED), settings.forecast_prompts, prompts),
    )
    return document


def saved_table(path: str) -> dict:
    """A table written by ``bench --task spec-bench --out`` (one draft or all)."""
    try:
        table = strict_loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"--from {path}: cannot read a JSON table ({error})") from None
    if not isinstance(table, dict) or "categories" not in table or "drafts" not in table:
        raise ValueError(f"--from {path}: not a Spec-Bench table (bench --task spec-bench --draft all --out FILE)")
    return table


def spec_bench_report(
    settings: BenchSettings,
    task: str,
    *,
    from_table: str | None = None,
    draft: str = ALL,
    target=None,
    device="cpu",
    compile: str = "auto",
    out: str = "report",
    forecast_questions: int | None = None,
) -> tuple:
    """The table, read from ``from_table`` or measured on ``settings`` (forecast first from ``forecast_questions`` other
    questions per category, default ``SPEC_BENCH_FORECAST_QUESTIONS``), and per Spec-Bench category a draft and gamma,
    or "do not speculate" (``decoders.bench.spec_bench.recommend.recommend``: from the forecast where there is one)."""
    check_writable(out, directory=True)
    questions = SPEC_BENCH_FORECAST_QUESTIONS if forecast_questions is None else forecast_questions
    table = (
        saved_table(from_table)
        if from_table
        else measure_table(
            settings, task, draft=draft, target=target, device=device, compile=compile, forecast_questions=questions
        )
    )
    return table, recommend(table)


def cross_vocabulary_report(
    settings: ReportSettings,
    methods,
    *,
    target: str | None,
    draft: str,
    beside=(),
    text=None,
    device="cpu",
    out: str = "report",
) -> dict:
    """A draft with another tokenizer than ``target``'s: each of ``methods`` measured and forecast, the same-tokenizer
    drafts ``beside`` in the same run (``decoders.bench.cross_bench``, on ``settings``' bench budget), and audited
    statistically at T = 1 at the smallest gamma on ``settings``' audit prompt, n and horizon
    (``decoders.bench.audit.run_audit``)."""
    from dataclasses import replace

    from decoders.bench.audit import AuditRequest, run_audit
    from decoders.bench.cross_bench import cross_vocabulary_document
    from decoders.sampling import Sampling

    if target is None:
        raise ValueError(
            "--cross-vocabulary needs --target: a real model, GGUF file or directory with its own tokenizer"
        )
    check_writable(out, directory=True)
    bench = replace(settings.bench_settings(), batch_sizes=())
    document = cross_vocabulary_document(
        draft,
        bench,
        methods=methods,
        beside=beside,
        target=target,
        text=text,
        device=device,
        forecast_prompts=settings.forecast_prompts,
    )
    audits = {}
    for method in methods:
        request = AuditRequest(
            target=target,
            draft=draft,
            cross_vocabulary=method,
            gamma=min(settings.gammas),
            sampling=Sampling(1.0),
            prompt_text=settings.audit_prompt,
            horizon=settings.audit_horizon,
            n=settings.audit_n,
            seed=settings.seed,
        )
        outcome = run_audit(request)
        audits[method] = {"decoder": outcome.described, **outcome.report.as_dict()}
    return {**document, "audits": audits}
