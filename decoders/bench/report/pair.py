"""The one-command report's measurement (``spectheory report``): a target/draft pair measured, a gamma
recommended and the decoder audited, as one ``ReportDocument`` (``paper_figs.report`` renders it).

* the forecast, first: per temperature a cost profile (docs/theory.md §10) measured on other prompts than the
  sweep's, its speedup at each gamma of the sweep and the gamma it recommends
  (``decoders.bench.forecast.sweep.forecast_sweep``);
* alpha along held-out text at each temperature (mean sum_x min(p, q), docs/theory.md §2);
* c, tokens per iteration, alpha from acceptance counts and the measured speedup over our autoregressive
  decoder for a gamma sweep at batch 1 (``decoders.bench.bench.bench_pair``): the check of the forecast, its seconds
  beside the forecast's;
* per temperature the forecast's gamma judged on the sweep (its measured speedup, its loss against the best
  measured gamma, forecast / measured at every gamma); as diagnostics, the cost model at the profile measured
  beside the sweep and Theorem 3.8 (``spectheory.calculator.gamma_table``) at the alpha that decoding sees
  (acceptance counts of the sweep) and the measured c;
* a statistical audit of speculative sampling at T = 1 with the forecast's gamma at the last temperature
  measured (``decoders.audit.runs.audit_pair``);
* where both models have tree attention: the optimal draft tree against the chain at small node budgets, T = 0
  (``decoders.bench.tree_bench``), and whether to use a tree;
* draft-length policies against the best measured fixed gamma at each temperature
  (``decoders.bench.policy_bench``), and whether to use one.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from datetime import datetime, timezone

from decoders.audit.runs import AuditSample, audit_pair
from decoders.bench import alpha
from decoders.bench.bench import bench_pair
from decoders.bench.documents import BenchReport
from decoders.bench.forecast.document import TemperatureForecast
from decoders.bench.forecast.sweep import checked_against_sweep, forecast_sweep, judge_forecast
from decoders.bench.inputs import SHIPPED_TARGET, SHIPPED_TEXT, Inputs, Pair
from decoders.bench.policy_bench import POLICY_CALIBRATION_WINDOWS, PolicyPlan, bench_policies
from decoders.bench.prompts import Prompts
from decoders.bench.report.document import AlphaAlongText, ReportAudit, ReportDocument, TemperatureAnswer
from decoders.bench.report.settings import ReportRun, ReportSettings
from decoders.bench.tree_bench import CALL_REPEATS, HELD_OUT_WINDOWS, TreePlan, bench_trees
from decoders.models.corpus import VOCAB_SIZE
from decoders.models.corpus import encode as corpus_encode
from decoders.models.protocol import has_tree
from decoders.progress import progress_bar
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig
from spectheory.calculator import gamma_table
from spectheory.costs import CostProfile
from spectheory.recommendation import from_sweep

__all__ = ["measure_pair", "tree_plan", "AUDIT_TEMPERATURE", "AUDIT_PROMPT_TOKENS"]

AUDIT_TEMPERATURE = 1.0  # sampling is where a decoder can be wrong; greedy decoding is checked by the tests
#: Off the shipped corpus the audit's prompt is the end of the first benchmark prompt, this many tokens: every
#: sampling batch prefills it again, which a real model's 192-token task prompt would make the longest stage.
AUDIT_PROMPT_TOKENS = 32


def tree_plan(settings: ReportSettings) -> TreePlan:
    """The tree section under the report's budget flags: its node budgets, held-out windows at most ``--windows``,
    one-call timings ten per ``--repeats`` (at most ``CALL_REPEATS``)."""
    return TreePlan(
        budgets=settings.tree_budgets,
        held_out_windows=min(settings.windows, HELD_OUT_WINDOWS[0]),
        call_repeats=min(CALL_REPEATS, 10 * settings.repeats),
    )


def _trees_and_policies(run: ReportRun, pair: Pair, inputs: Inputs, prompts: Prompts, recommendations: list, stages):
    """The report's last sections: tree against chain where both models have tree attention, and the draft-length
    policies against the best measured fixed gammas; (trees, policies), each None where not measured."""
    s, held_out = run.settings, inputs.held_out
    trees = policies = None
    if _tree_stage(run, pair):
        stages.set_postfix_str("tree against chain")
        trees = bench_trees(pair, prompts.sweep, held_out, s.bench_settings(), tree_plan(s))
        stages.update()
    if s.policies:
        stages.set_postfix_str("draft-length policies")
        fixed = tuple(sorted({r.best_measured_gamma for r in recommendations}))
        policies = bench_policies(
            pair,
            prompts.sweep,
            held_out,
            replace(s.bench_settings(), gammas=fixed),
            PolicyPlan(s.policies, calibration_windows=min(s.windows, POLICY_CALIBRATION_WINDOWS[0])),
        )
        stages.update()
    return trees, policies


def _tree_stage(run: ReportRun, pair: Pair) -> bool:
    """Whether the report measures trees: budgets asked for and both models with tree attention."""
    return bool(run.settings.tree_budgets) and all(has_tree(model) for model in (pair.target, pair.draft))


def measure_pair(run: ReportRun, inputs: Inputs, prompts: Prompts) -> ReportDocument:
    """Measure ``run``'s pair (``inputs.target`` and ``inputs.drafts[run.draft]``): the forecast on
    ``prompts.forecast``, alpha along the held-out text, the gamma sweep on ``prompts.sweep`` that checks it, the
    recommendations, the audit. On the shipped corpus's held-out split with a character vocabulary the audit's prompt
    is ``run.settings.audit_prompt``, else the end of the first benchmark prompt (``AUDIT_PROMPT_TOKENS``). The audit
    runs at the forecast's gamma of the last temperature."""
    start, s = time.perf_counter(), run.settings
    pair = inputs.pair(run.draft, target_name=run.target or SHIPPED_TARGET)
    target, draft = pair.target, pair.draft
    shipped = inputs.text == SHIPPED_TEXT and target.vocab_size == VOCAB_SIZE
    along = alpha.window_shape(alpha.AlongText(windows=s.windows, seed=s.seed), target, draft)
    with progress_bar(None, total=4 + _tree_stage(run, pair) + bool(s.policies), desc="report", unit="stage") as stages:
        stages.set_postfix_str("forecast")
        forecast = forecast_sweep(
            pair,
            prompts.forecast,
            s.bench_settings(),
            repeats=s.forecast_repeats,
            cost_prompts=s.forecast_cost_prompts,
        )
        stages.update()
        stages.set_postfix_str("alpha along text")
        alpha_text = [
            alpha.alpha_under_lenience(
                target,
                {run.draft: draft},
                inputs.held_out,
                (1.0,),
                replace(along, temperature=t),
            )[0]
            for t in s.temperatures
        ]
        stages.update()
        stages.set_postfix_str("benchmark")
        swept = time.perf_counter()
        bench = bench_pair(pair, prompts.sweep, s.bench_settings())
        sweep_seconds = time.perf_counter() - swept
        forecast = checked_against_sweep(forecast, bench)
        recommendations = [_recommendation(bench, s, ahead) for ahead in forecast.temperatures]
        stages.update()
        stages.set_postfix_str("audit")
        audit_gamma = max(1, recommendations[-1].forecast_gamma)
        audit_prompt = (
            corpus_encode(s.audit_prompt).tolist() if shipped else prompts.sweep[0, -AUDIT_PROMPT_TOKENS:].tolist()
        )
        audit = audit_pair(
            pair,
            audit_prompt,
            SpeculativeConfig(audit_gamma, Sampling(AUDIT_TEMPERATURE)),
            AuditSample(s.audit_n, s.audit_horizon, s.seed),
        )
        stages.update()
        trees, policies = _trees_and_policies(run, pair, inputs, prompts, recommendations, stages)
    return ReportDocument(
        command=run.command,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        seconds=time.perf_counter() - start,
        target=pair.target_name,
        draft=run.draft,
        text=inputs.text,
        settings=asdict(s),
        environment=bench.environment,
        c=bench.c,
        recommendations=tuple(recommendations),
        bench=bench,
        alpha_text=tuple(
            AlphaAlongText(
                temperature=row.temperature,
                alpha=row.alpha[0],
                standard_error=row.standard_error[0],
                windows=s.windows,
                length=along.length,
            )
            for row in alpha_text
        ),
        audit=ReportAudit(
            **audit.as_dict(),
            gamma=audit_gamma,
            temperature=AUDIT_TEMPERATURE,
            prompt=s.audit_prompt if shipped else None,
            prompt_ids=audit_prompt,
        ),
        trees=trees,
        policies=policies,
        forecast=forecast,
        sweep_seconds=sweep_seconds,
        sweep_prompt_ids=prompts.sweep.tolist(),
    )


def _recommendation(bench: BenchReport, settings: ReportSettings, forecast: TemperatureForecast) -> TemperatureAnswer:
    """The forecast's gamma (the recommendation, ``decoders.bench.forecast.sweep.forecast_sweep``) judged on the sweep
    (``decoders.bench.forecast.sweep.judge_forecast``); beside it, as diagnostics, the cost model calibrated on the
    sweep's own profile and Theorem 3.8 at the sweep's pooled alpha (counts) and measured c."""
    temperature, tokens = forecast.temperature, settings.max_new_tokens
    alpha_counts = min(bench.alpha[temperature] or 0.0, 1.0)
    table = gamma_table(alpha_counts, bench.c, bench.c, settings.gamma_max)
    profile = CostProfile.from_dict(bench.profiles[temperature])
    calibrated = profile.optimal_gamma(tokens=tokens)
    rows = bench.rows_at(temperature)
    measured = next((row for row in rows if row.gamma == calibrated), None)
    judged = judge_forecast(forecast, rows)
    return TemperatureAnswer(
        **vars(judged),
        recommendation=from_sweep(rows, judged.pick),
        optimal_gamma=calibrated,
        calibrated_speedup=profile.speedup(calibrated, tokens=tokens),
        measured_speedup_at_optimal_gamma=measured.speedup if measured else None,
        alpha=alpha_counts,
        c=bench.c,
        theorem_3_8_gamma=table.optimal_gamma,
        predicted_speedup=table.speedup,
        expected_tokens=table.expected_tokens,
    )
