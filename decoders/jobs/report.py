"""The measurements of `spectheory report`, one call each (docs/measuring.md): on a pair of models, alpha, the gamma
sweep, the calculator's answer and an audit (``pair_report``); on Spec-Bench, a draft and gamma per category from
the whole table, measured or read from a saved one (``spec_bench_report``). ``paper_figs.report`` writes what they
return (report.json, report.md, report.html and the figures) into the output directory, probed here first."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from decoders.audit.runs import AuditRequest, run_audit
from decoders.bench.cross_bench import cross_vocabulary_document
from decoders.bench.documents import CrossAudit, CrossVocabularyBench
from decoders.bench.inputs import load_inputs
from decoders.bench.prompts import draw_prompts
from decoders.bench.report.document import ReportDocument
from decoders.bench.report.pair import measure_pair
from decoders.bench.report.settings import ReportRun
from decoders.bench.runs import BenchRun
from decoders.bench.spec_bench.document import SpecBenchReport, SpecBenchTable
from decoders.bench.spec_bench.recommend import recommend
from decoders.bench.spec_bench.run import SpecBenchRun
from decoders.jobs.spec_bench import measure_table
from decoders.sampling import Sampling
from plumbing.outputs import check_writable, strict_loads

__all__ = ["SpecBenchReportRun", "pair_report", "spec_bench_report", "saved_table", "cross_vocabulary_report"]


@dataclass(frozen=True)
class SpecBenchReportRun:
    """``report --task spec-bench``: a draft and gamma per Spec-Bench category from the whole table, measured as
    ``table`` says (forecast first from its ``forecast_questions`` other questions per category) or read
    ``from_table``, written into ``out``."""

    table: SpecBenchRun
    from_table: str | None = None  # a table written by bench --task spec-bench --draft all --out FILE
    out: str = "report"
    command: str = ""


def pair_report(run: ReportRun) -> ReportDocument:
    """The report's document on ``run``'s pair (the shipped one by default): its models loaded, its prompts drawn
    (the sweep's at the report's seed + 1, the forecast's others), then measured (``measure_pair``)."""
    check_writable(run.out, directory=True)
    inputs = load_inputs(run.target, [run.draft], text=run.text, device=run.device, compile=run.compile)
    s = run.settings
    shape = (s.prompts, s.prompt_length)
    prompts = draw_prompts(inputs, s.task, shape, seed=s.seed, forecast=s.forecast_prompts, sweep_offset=1)
    return measure_pair(run, inputs, prompts)


def saved_table(path: str) -> SpecBenchTable:
    """A table written by ``bench --task spec-bench --out`` (one draft or all)."""
    try:
        saved = strict_loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"--from {path}: cannot read a JSON table ({error})") from None
    not_table = ValueError(f"--from {path}: not a Spec-Bench table (bench --task spec-bench --draft all --out FILE)")
    if not isinstance(saved, dict) or "categories" not in saved or "drafts" not in saved:
        raise not_table
    try:
        return SpecBenchTable.from_dict(saved)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{not_table} ({type(error).__name__}: {error})") from None


def spec_bench_report(run: SpecBenchReportRun) -> SpecBenchReport:
    """The table, read from ``run.from_table`` or measured, and per Spec-Bench category a draft and gamma, or "do not
    speculate" (``decoders.bench.spec_bench.recommend.recommend``: from the forecast where there is one)."""
    check_writable(run.out, directory=True)
    table = saved_table(run.from_table) if run.from_table else measure_table(run.table)
    return SpecBenchReport(table=table, recommendation=recommend(table))


def cross_vocabulary_report(run: ReportRun) -> CrossVocabularyBench:
    """A draft with another tokenizer than ``run.target``'s: each of ``run.cross_vocabulary``'s methods measured and
    forecast, the same-tokenizer drafts ``run.beside`` in the same run (``decoders.bench.cross_bench``, on the
    settings' bench budget), and audited statistically at T = 1 at the smallest gamma on the settings' audit prompt,
    n and horizon (``decoders.audit.runs.run_audit``)."""
    s = run.settings
    check_writable(run.out, directory=True)
    bench_run = BenchRun(
        run.draft,
        replace(s.bench_settings(), batch_sizes=()),
        target=run.target,
        text=run.text,
        device=run.device,
        forecast_prompts=s.forecast_prompts,
        cross_vocabulary=run.cross_vocabulary,
        beside=run.beside,
    )
    document = cross_vocabulary_document(bench_run)
    audits = {}
    for method in run.cross_vocabulary:
        request = AuditRequest(
            target=run.target,
            draft=run.draft,
            cross_vocabulary=method,
            gamma=min(s.gammas),
            sampling=Sampling(1.0),
            prompt_text=s.audit_prompt,
            horizon=s.audit_horizon,
            n=s.audit_n,
            seed=s.seed,
        )
        outcome = run_audit(request)
        audits[method] = CrossAudit(decoder=outcome.described, **outcome.report.as_dict())
    return replace(document, audits=audits)
