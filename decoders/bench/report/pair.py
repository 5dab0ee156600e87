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
  measured (``decoders.bench.audit.audit_pair``);
* where both models have tree attention: the optimal draft tree against the chain at small node budgets, T = 0
  (``decoders.bench.tree_bench``), and whether to use a tree;
* draft-length policies against the best measured fixed gamma at each temperature
  (``decoders.bench.policy_bench``), and whether to use one.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone

import numpy as np
import torch

from decoders.audit.statistical import MAX_SAMPLES
from decoders.bench import alpha
from decoders.bench.audit import SHIPPED_PROMPT, audit_pair
from decoders.bench.bench import BenchSettings, bench_pair
from decoders.bench.bench_lines import loss_resolution
from decoders.bench.forecast.sweep import (
    FORECAST_COST_PROMPTS,
    FORECAST_REPEATS,
    FORECAST_SEED,
    checked_against_sweep,
    forecast_sweep,
    judge_forecast,
    other_prompts,
)
from decoders.bench.inputs import SHIPPED_TEXT
from decoders.bench.policy_bench import POLICY_CALIBRATION_WINDOWS, bench_policies, check_policies
from decoders.bench.report.document import ReportDocument, recommendation_of
from decoders.bench.tasks import TASKS
from decoders.bench.tree_bench import CALL_REPEATS, HELD_OUT_WINDOWS, bench_trees, check_budgets
from decoders.models.corpus import VOCAB_SIZE
from decoders.models.corpus import encode as corpus_encode
from decoders.models.protocol import has_tree
from decoders.progress import progress_bar
from decoders.results import by_temperature
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig
from plumbing.validation import as_int, as_non_negative_int, positive_int_fields
from spectheory.calculator import MAX_TABLE_GAMMA, gamma_table
from spectheory.cost_checks import passed_checks
from spectheory.costs import CostProfile
from spectheory.recommendation import from_sweep, recommendation_words

__all__ = [
    "ReportSettings",
    "ReportDocument",
    "measure_pair",
    "summary_lines",
    "by_temperature",
    "AUDIT_TEMPERATURE",
    "REAL_MODEL_SETTINGS",
    "FULL_SETTINGS",
]

AUDIT_TEMPERATURE = 1.0  # sampling is where a decoder can be wrong; greedy decoding is checked by the tests
#: Off the shipped corpus the audit's prompt is the end of the first benchmark prompt, this many tokens: every
#: sampling batch prefills it again, which a real model's 192-token task prompt would make the longest stage.
AUDIT_PROMPT_TOKENS = 32


@dataclass(frozen=True)
class ReportSettings:
    """The budget of a report. The defaults are the main job's, a few minutes on a 2-core CPU (the forecast, a
    sweep of six gammas over 64 tokens that checks it, the audit, the figures); ``FULL_SETTINGS`` adds every gamma
    to 8, 128 tokens, trees and policies (docs/measuring.md gives both times)."""

    temperatures: tuple = BenchSettings.temperatures
    windows: int = 16  # held-out windows of 256 tokens (at most the context) for alpha along text
    gammas: tuple = (1, 2, 3, 4, 6, 8)
    prompts: int = 4  # held-out prompts for the benchmark, decoded one at a time
    prompt_length: int = BenchSettings.prompt_length
    max_new_tokens: int = 64
    repeats: int = BenchSettings.repeats
    warmup: int = BenchSettings.warmup
    audit_n: int = 2000
    audit_horizon: int = 4
    audit_prompt: str = SHIPPED_PROMPT
    gamma_max: int = 16
    seed: int = 0
    task: str | None = None  # None: the prompts are windows of the held-out text; else a task of decoders.bench.tasks
    tree_budgets: tuple = ()  # tree against chain at these node budgets (none: skipped)
    policies: tuple = ()  # draft-length policies against the best fixed gamma (none: skipped)
    forecast_prompts: int = 8  # other prompts for the forecast's acceptance, run before the sweep
    forecast_cost_prompts: int = FORECAST_COST_PROMPTS  # the first of them, timed for its cost profile
    forecast_repeats: int = FORECAST_REPEATS  # the cost profile's timed repeats (after one warm-up)

    def __post_init__(self) -> None:
        self.bench_settings()  # gammas, temperatures, prompts, lengths, repeats, warm-up
        if self.task is not None and self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        positive_int_fields(self, ("audit_horizon", "forecast_repeats"))
        as_int("forecast_prompts", self.forecast_prompts, low=1, high=1024)
        as_int("forecast_cost_prompts", self.forecast_cost_prompts, low=1, high=self.forecast_prompts)
        as_int("gamma_max", self.gamma_max, low=1, high=MAX_TABLE_GAMMA)
        alpha.check_windows(self.windows)
        as_int("audit_n", self.audit_n, low=2, high=MAX_SAMPLES)
        as_non_negative_int("seed", self.seed)
        if not self.audit_prompt:
            raise ValueError("audit_prompt must be non-empty text")
        if self.tree_budgets:
            check_budgets(self.tree_budgets)
        check_policies(self.policies)

    def bench_settings(self) -> BenchSettings:
        """The benchmark's settings."""
        return BenchSettings(
            tuple(self.gammas),
            tuple(self.temperatures),
            self.prompts,
            self.prompt_length,
            self.max_new_tokens,
            self.repeats,
            self.warmup,
            seed=self.seed,
        )


def tree_budget(settings: "ReportSettings") -> dict:
    """The tree section's fixed costs under the report's budget flags (``bench_trees``'s keywords): held-out
    windows at most ``--windows``, one-call timings ten per ``--repeats`` (at most ``CALL_REPEATS``)."""
    return {
        "held_out_windows": min(settings.windows, HELD_OUT_WINDOWS[0]),
        "call_repeats": min(CALL_REPEATS, 10 * settings.repeats),
    }


#: The default budget for a real model (``zoo.REAL_MODELS`` or a GGUF file), smaller than the shipped pair's: a real
#: model's token costs tens of milliseconds on a CPU (docs/measuring.md gives the report's time). Its benchmark prompts
#: are the rewrite task.
#: ``spectheory report --full``: the shipped pair at the bench's gammas and length, with trees and policies.
FULL_SETTINGS = ReportSettings(
    windows=32,
    gammas=BenchSettings.gammas,
    max_new_tokens=BenchSettings.max_new_tokens,
    audit_n=4000,
    tree_budgets=(4, 8, 16),
    policies=("confidence", "draft-p-min", "heuristic", "moving-average"),
)
REAL_MODEL_SETTINGS = ReportSettings(
    windows=16,
    gammas=(1, 2, 3, 4, 6, 8),
    prompts=2,
    prompt_length=192,
    max_new_tokens=48,
    repeats=2,
    warmup=1,
    audit_n=2000,
    task="rewrite",
    tree_budgets=(8,),
    policies=(),
)


def _trees_and_policies(
    target,
    draft,
    prompts,
    held_out,
    s: ReportSettings,
    recommendations: list,
    names: dict,
    progress,
    stages,
    tree_stage: bool,
) -> tuple:
    """The report's last sections: tree against chain where both models have tree attention, and the draft-length
    policies against the best measured fixed gammas."""
    trees = policies = None
    if tree_stage:
        stages.set_postfix_str("tree against chain")
        trees = bench_trees(
            target,
            draft,
            prompts,
            held_out,
            s.bench_settings(),
            budgets=s.tree_budgets,
            progress=progress,
            **names,
            **tree_budget(s),
        )
        stages.update()
    if s.policies:
        stages.set_postfix_str("draft-length policies")
        fixed = tuple(sorted({r["best_measured_gamma"] for r in recommendations}))
        policies = bench_policies(
            target,
            draft,
            prompts,
            held_out,
            replace(s.bench_settings(), gammas=fixed),
            policies=s.policies,
            progress=progress,
            calibration_windows=min(s.windows, POLICY_CALIBRATION_WINDOWS[0]),
            **names,
        )
        stages.update()
    as_json = lambda document: json.loads(json.dumps(document, allow_nan=False)) if document else None  # noqa: E731
    return as_json(trees), as_json(policies)


def measure_pair(
    target,
    draft,
    *,
    target_name: str,
    draft_name: str,
    settings: ReportSettings = ReportSettings(),
    held_out: np.ndarray,
    text: str,
    command: str = "",
    prompts: torch.Tensor | None = None,
    forecast_prompts: torch.Tensor | None = None,
    progress: bool | None = None,
) -> ReportDocument:
    """Measure the pair: the forecast (on ``forecast_prompts``, default other windows of ``held_out``), alpha along
    text, the gamma sweep that checks it, the recommendations, the audit. ``held_out`` [N] is the token stream
    windows come from, read from ``text`` (``decoders.bench.inputs``); ``prompts`` ``[count, length]`` the benchmark's
    (default: windows of ``held_out``). On the shipped corpus's held-out split with a character vocabulary the
    audit's prompt is ``settings.audit_prompt``, else the end of the first benchmark prompt (``AUDIT_PROMPT_TOKENS``).
    The audit runs at the forecast's gamma of the last temperature."""
    start, s = time.perf_counter(), settings
    shipped = text == SHIPPED_TEXT and target.vocab_size == VOCAB_SIZE
    shape = alpha.window_shape(target, draft)
    tree_stage = bool(s.tree_budgets) and all(has_tree(model) for model in (target, draft))
    if prompts is None:
        prompts = alpha.text_windows(held_out, s.prompts, s.prompt_length, s.seed + 1)
    if forecast_prompts is None:
        forecast_prompts = other_prompts(
            lambda n: alpha.text_windows(held_out, n, s.prompt_length, s.seed + FORECAST_SEED),
            s.forecast_prompts,
            prompts,
        )
    with progress_bar(progress, total=4 + tree_stage + bool(s.policies), desc="report", unit="stage") as stages:
        stages.set_postfix_str("forecast")
        forecast = forecast_sweep(
            target,
            draft,
            forecast_prompts,
            s.bench_settings(),
            repeats=s.forecast_repeats,
            cost_prompts=s.forecast_cost_prompts,
        )
        stages.update()
        stages.set_postfix_str("alpha along text")
        alpha_text = [
            alpha.alpha_under_lenience(
                target, {draft_name: draft}, held_out, (1.0,), temperature=t, windows=s.windows, seed=s.seed, **shape
            )[0]
            for t in s.temperatures
        ]
        stages.update()
        stages.set_postfix_str("benchmark")
        swept = time.perf_counter()
        bench = json.loads(
            json.dumps(
                bench_pair(
                    target,
                    draft,
                    prompts,
                    s.bench_settings(),
                    target_name=target_name,
                    draft_name=draft_name,
                    progress=progress,
                ).as_dict(),
                allow_nan=False,
            )
        )  # as in the file
        sweep_seconds = time.perf_counter() - swept
        forecast = checked_against_sweep(forecast, bench["rows"], bench["profiles"])
        recommendations = [
            _recommendation(bench, t, s.gamma_max, s.max_new_tokens, ahead)
            for t, ahead in zip(s.temperatures, forecast["temperatures"])
        ]
        stages.update()
        stages.set_postfix_str("audit")
        audit_gamma = max(1, recommendations[-1]["forecast_gamma"])
        audit_prompt = corpus_encode(s.audit_prompt).tolist() if shipped else prompts[0, -AUDIT_PROMPT_TOKENS:].tolist()
        audit = audit_pair(
            target,
            draft,
            audit_prompt,
            SpeculativeConfig(audit_gamma, Sampling(AUDIT_TEMPERATURE)),
            horizon=s.audit_horizon,
            n=s.audit_n,
            seed=s.seed,
            progress=progress,
        )
        stages.update()
        trees, policies = _trees_and_policies(
            target,
            draft,
            prompts,
            held_out,
            s,
            recommendations,
            {"target_name": target_name, "draft_name": draft_name},
            progress,
            stages,
            tree_stage,
        )
    return ReportDocument(
        command=command,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        seconds=time.perf_counter() - start,
        target=target_name,
        draft=draft_name,
        text=text,
        settings=asdict(settings),
        environment=bench["environment"],
        c=bench["c"],
        recommendations=recommendations,
        bench=bench,
        alpha_text=[
            {
                "temperature": row["temperature"],
                "alpha": row["alpha"][0],
                "standard_error": row["standard_error"][0],
                "windows": s.windows,
                "length": shape["length"],
            }
            for row in alpha_text
        ],
        audit=dict(
            audit.as_dict(),
            gamma=audit_gamma,
            temperature=AUDIT_TEMPERATURE,
            prompt=s.audit_prompt if shipped else None,
            prompt_ids=audit_prompt,
        ),
        trees=trees,
        policies=policies,
        forecast=json.loads(json.dumps(forecast, allow_nan=False)),
        sweep_seconds=sweep_seconds,
        sweep_prompt_ids=prompts.tolist(),
    )


def _recommendation(bench: dict, temperature: float, gamma_max: int, tokens: int, forecast: dict) -> dict:
    """The forecast's gamma (the recommendation, ``decoders.bench.forecast.sweep.forecast_sweep``) judged on the sweep
    (``decoders.bench.forecast.sweep.judge_forecast``); beside it, as diagnostics, the cost model calibrated on the
    sweep's own profile and Theorem 3.8 at the sweep's pooled alpha (counts) and measured c."""
    alpha_counts = min(by_temperature(bench["alpha"])[temperature] or 0.0, 1.0)
    table = gamma_table(alpha_counts, bench["c"], bench["c"], gamma_max)
    profile = CostProfile.from_dict(by_temperature(bench["profiles"])[temperature])
    calibrated = profile.optimal_gamma(tokens=tokens)
    rows = [row for row in bench["rows"] if row["temperature"] == temperature]
    measured = next((row for row in rows if row["gamma"] == calibrated), None)
    return {
        "temperature": temperature,
        **judge_forecast(forecast, rows),
        "recommendation": from_sweep(rows, forecast["gamma"] if passed_checks(forecast) else None).as_dict(),
        "optimal_gamma": calibrated,
        "calibrated_speedup": profile.speedup(calibrated, tokens=tokens),
        "measured_speedup_at_optimal_gamma": measured["speedup"] if measured else None,
        "alpha": alpha_counts,
        "c": bench["c"],
        "theorem_3_8_gamma": table.optimal_gamma,
        "predicted_speedup": table.speedup,
        "expected_tokens": table.expected_tokens,
    }


def summary_lines(document: dict) -> list[str]:
    """The report's answers as the command prints them, from ``report.json``'s document: the forecast first."""
    forecast, lines = document["forecast"], []
    for r in document["recommendations"]:
        ratios = [row["forecast_over_measured"] for row in r["forecast_by_gamma"]]
        inside = sum(row["inside_interval"] for row in r["forecast_by_gamma"])
        if r.get("withheld"):
            lines += [
                f"T = {r['temperature']:g}: {recommendation_words(recommendation_of(document, r))}",
                r["withheld"],
            ]
            continue
        lines += [
            f"T = {r['temperature']:g}: {recommendation_words(recommendation_of(document, r))}; forecast gamma "
            f"{r['forecast_gamma']} "
            f"({r['forecast_speedup']:.3f}x"
            f"{_interval_words(r)}; measured there {r['measured_speedup_at_forecast_gamma']:.3f}x, "
            f"{r['forecast_loss']:.1%} under the best measured, gamma {r['best_measured_gamma']} at "
            f"{r['best_measured_speedup']:.3f}x, {loss_resolution(r)}; forecast/measured {min(ratios):.3f}-"
            f"{max(ratios):.3f} over the sweep, inside the measured 95% interval at {inside} of {len(ratios)} gammas"
            f"{_covered_words(r)})",
            f"  diagnostics: the cost model calibrated on the sweep, gamma {r['optimal_gamma']} "
            f"({r['calibrated_speedup']:.3f}x); Theorem 3.8 at alpha {r['alpha']:.3f}, c {r['c']:.4f}: gamma "
            f"{r['theorem_3_8_gamma']} ({r['predicted_speedup']:.3f}x)",
        ]
    repeats = f"{forecast['repeats']} repeat" + ("s" if forecast["repeats"] != 1 else "")
    lines.append(
        f"the forecast took {forecast['seconds']:.1f} s (acceptance along {forecast['prompts']} other prompts, "
        f"costs from {forecast['cost_prompts']} over {repeats}), the sweep that checks it "
        f"{document['sweep_seconds']:.1f} s ({forecast['seconds'] / document['sweep_seconds']:.0%} of it)"
    )
    lines.append(f"audit: {'PASS' if document['audit']['passed'] else 'FAIL'} (p = {document['audit']['p_value']:.3g})")
    for block in (document.get("policies") or {}).get("temperatures", []):
        lines.append(
            f"T = {block['temperature']:g}: "
            f"{'use ' + block['best_policy'] if block['use_policy'] else 'keep ' + block['best_fixed']}"
            f" (best policy {block['best_policy']}, {block['gain_over_best_fixed']:.3f}x the best fixed gamma)"
        )
    if document.get("trees"):
        best = document["trees"]["recommendation"]
        lines.append(
            f"T = 0: {best['kind']} at budget {best['budget']} (depth {best['tree']['depth']}) fastest of "
            f"tree and chain, {best['speedup']:.3f}x"
        )
    return lines


def _interval_words(r: dict) -> str:
    """The forecast's stated 95% interval; none in a report written before forecasts stated one (2026-11-28)."""
    return ", 95% interval {:.2f}-{:.2f}x".format(*r["forecast_interval"]) if "forecast_interval" in r else ""


def _covered_words(r: dict) -> str:
    rows = r["forecast_by_gamma"]
    if "covered" not in rows[0]:
        return ""
    return (
        ", the measurement inside the forecast's interval combined with its own at "
        f"{sum(row['covered'] for row in rows)}"
        f" of {len(rows)}"
    )
