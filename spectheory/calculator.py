"""The optimal-gamma calculator behind ``spectheory gamma`` (docs/theory.md §3): one table per alpha, as text,
LaTeX or JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from plumbing.validation import as_cost, as_probability, as_real
from spectheory.costs import CostProfile
from spectheory.optimum import best_choice
from spectheory.recommendation import from_model
from spectheory.speedup import (
    continuous_optimal_gamma,
    expected_tokens,
    improvement_lower_bound,
    operations_factor,
    optimal_gamma,
    oracle_speedup,
    walltime_improvement,
)
from spectheory.vocabularies import cross_vocabulary_speedup, cross_vocabulary_tokens

__all__ = [
    "MAX_TABLE_GAMMA",
    "GammaRow",
    "GammaTable",
    "gamma_table",
    "format_text",
    "format_latex",
    "CalibratedRow",
    "CalibratedTable",
    "calibrated_table",
    "format_calibrated_text",
    "engine_answer",
    "format_engine_answer",
    "answer_table",
    "CrossVocabularyTable",
    "cross_vocabulary_table",
    "format_cross_vocabulary_text",
]

#: The table has one row per gamma = 0..gamma_max; ``spectheory.speedup.optimal_gamma`` has no such cap.
MAX_TABLE_GAMMA = 1024


@dataclass(frozen=True)
class GammaRow:
    """One gamma: Eq. 1, Theorem 3.8 and Theorem 3.11."""

    gamma: int
    expected_tokens: float
    speedup: float
    ops_factor: float


@dataclass(frozen=True)
class GammaTable:
    """Everything the calculator says about one alpha; ``speedup`` etc. are at the optimal gamma."""

    alpha: float
    c: float
    c_hat: float
    gamma_max: int
    optimal_gamma: int
    speedup: float
    expected_tokens: float
    ops_factor: float
    continuous_optimal_gamma: float | None  # None where the speedup grows without bound in gamma
    improvement_lower_bound: float
    oracle_speedup: float | None  # None where it is unbounded (alpha = 1, c = 0)
    table: tuple[GammaRow, ...]

    def as_dict(self) -> dict:
        """A JSON-ready dict (no infinities)."""
        return asdict(self)


def _finite_or_none(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def gamma_table(alpha: float, c: float, c_hat: float, gamma_max: int) -> GammaTable:
    """The calculator's result for one alpha, over gamma = 0..gamma_max (0 = autoregressive)."""
    alpha = float(as_probability("alpha", alpha))
    c, c_hat = float(as_cost("c", c)), float(as_cost("c_hat", c_hat))
    gamma_max = int(as_real("gamma_max", gamma_max, low=1, high=MAX_TABLE_GAMMA, integer=True))
    gammas = np.arange(gamma_max + 1)
    tokens = expected_tokens(alpha, gammas)
    speedups = walltime_improvement(alpha, gammas, c)
    ops = operations_factor(alpha, gammas, c_hat)
    rows = tuple(GammaRow(int(g), float(e), float(s), float(o)) for g, e, s, o in zip(gammas, tokens, speedups, ops))
    best = int(optimal_gamma(alpha, c, gamma_max))
    continuous = float(continuous_optimal_gamma(alpha, c))
    return GammaTable(
        alpha=alpha,
        c=c,
        c_hat=c_hat,
        gamma_max=gamma_max,
        optimal_gamma=best,
        speedup=rows[best].speedup,
        expected_tokens=rows[best].expected_tokens,
        ops_factor=rows[best].ops_factor,
        continuous_optimal_gamma=continuous if math.isfinite(continuous) else None,
        improvement_lower_bound=float(improvement_lower_bound(alpha, c)),
        oracle_speedup=_finite_or_none(oracle_speedup(alpha, c)),
        table=rows,
    )


@dataclass(frozen=True)
class CrossVocabularyTable:
    """A draft with another tokenizer (docs/theory-vocabularies.md §15): gamma draft tokens read as ``ratio`` x gamma
    target candidates, each accepted with probability alpha; per gamma = 0..gamma_max the target tokens per call and
    the speedup, and the best gamma (0: do not speculate)."""

    alpha: float
    c: float
    ratio: float
    gamma_max: int
    best_gamma: int
    speedup: float
    table: tuple  # ((gamma, target tokens per call, speedup), ...)

    def as_dict(self) -> dict:
        return dict(asdict(self), table=[dict(zip(("gamma", "tokens_per_call", "speedup"), r)) for r in self.table])


def cross_vocabulary_table(alpha: float, c: float, ratio: float, gamma_max: int) -> CrossVocabularyTable:
    """``spectheory.vocabularies.cross_vocabulary_speedup`` over gamma = 0..gamma_max; the best gamma is the smallest
    of the largest speedup (gamma 0, autoregressive decoding, is 1x)."""
    alpha, c = float(as_probability("alpha", alpha)), float(as_cost("c", c))
    ratio = float(as_real("ratio", ratio, low=0.0, low_open=True))
    gamma_max = int(as_real("gamma_max", gamma_max, low=1, high=MAX_TABLE_GAMMA, integer=True))
    gammas = np.arange(gamma_max + 1)
    tokens, speedups = cross_vocabulary_tokens(alpha, gammas, ratio), cross_vocabulary_speedup(alpha, gammas, c, ratio)
    rows = tuple((int(g), float(t), float(s)) for g, t, s in zip(gammas, tokens, speedups))
    best = max(rows, key=lambda row: (row[2], -row[0]))
    return CrossVocabularyTable(alpha, c, ratio, gamma_max, best[0], best[2], rows)


def format_cross_vocabulary_text(result: CrossVocabularyTable) -> str:
    """The table as text, then the answer."""
    lines = [
        f"alpha = {result.alpha:g} per target candidate, c = {result.c:g}, {result.ratio:g} target candidates per "
        f"draft token (docs/theory-vocabularies.md §15)",
        "gamma  tokens/call  speedup",
        *(f"{g:5d}  {t:11.4f}  {s:7.4f}" for g, t, s in result.table),
    ]
    lines.append(
        "do not speculate: no gamma beats 1x"
        if result.best_gamma == 0
        else f"best gamma {result.best_gamma}: {result.speedup:.4f}x"
    )
    return "\n".join(lines)


def _summary(result: GammaTable) -> str:
    continuous = "unbounded" if result.continuous_optimal_gamma is None else f"{result.continuous_optimal_gamma:.2f}"
    verdict = "speculation helps (alpha > c)" if result.alpha > result.c else "speculation does not help (alpha <= c)"
    return (
        f"optimal gamma {result.optimal_gamma}: {result.speedup:.3f}x speedup, "
        f"{result.expected_tokens:.3f} tokens per target call, {result.ops_factor:.3f}x operations; "
        f"continuous optimum {continuous}; {verdict}; Corollary 3.9 bound "
        f"{result.improvement_lower_bound:.3f}x; oracle gamma "
        f"{'unbounded' if result.oracle_speedup is None else f'{result.oracle_speedup:.3f}x'}"
    )


def format_text(result: GammaTable) -> str:
    """A plain-text table with the optimum marked by '*'."""
    lines = [
        f"alpha = {result.alpha:g}, c = {result.c:g}, c_hat = {result.c_hat:g}, "
        f"gamma = 0..{result.gamma_max} (0 = autoregressive)",
        "    gamma  expected_tokens  speedup  ops_factor",
    ]
    for row in result.table:
        mark = "*" if row.gamma == result.optimal_gamma else " "
        lines.append(
            f"  {mark} {row.gamma:5d}  {row.expected_tokens:15.4f}  {row.speedup:7.4f}  {row.ops_factor:10.4f}"
        )
    lines.append(_summary(result))
    return "\n".join(lines)


def format_latex(result: GammaTable) -> str:
    """A booktabs tabular, the optimum in bold, the formulas and the summary as LaTeX comments."""
    lines = [
        f"% alpha = {result.alpha:g}, c = {result.c:g}, c_hat = {result.c_hat:g}",
        r"% E = \frac{1-\alpha^{\gamma+1}}{1-\alpha}, S = \frac{E}{\gamma c + 1}, "
        r"\mathrm{ops} = \frac{\gamma \hat{c} + \gamma + 1}{E}",
        f"% {_summary(result)}",
        r"\begin{tabular}{rrrr}",
        r"\toprule",
        r"$\gamma$ & expected tokens & speedup & operations \\",
        r"\midrule",
    ]
    for row in result.table:
        cells = [f"{row.gamma}", f"{row.expected_tokens:.3f}", f"{row.speedup:.3f}", f"{row.ops_factor:.3f}"]
        if row.gamma == result.optimal_gamma:
            cells = [rf"\textbf{{{cell}}}" for cell in cells]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


@dataclass(frozen=True)
class CalibratedRow:
    """One gamma under a cost profile: tokens per iteration, seconds per iteration, the calibrated speedup
    and Theorem 3.8's beside it (0 = autoregressive decoding)."""

    gamma: int
    expected_tokens: float
    iteration_seconds: float | None
    calibrated_speedup: float
    theorem_3_8_speedup: float | None


@dataclass(frozen=True)
class CalibratedTable:
    """The calculator under a measured cost profile (docs/theory.md §10); ``alpha`` None means tokens per
    iteration from the profile's per-position acceptance."""

    profile: dict
    alpha: float | None
    c: float | None
    optimal_gamma: int
    speedup: float
    theorem_3_8_alpha: float | None
    theorem_3_8_optimal_gamma: int | None
    theorem_3_8_speedup: float | None
    table: tuple[CalibratedRow, ...]

    def recommendation(self):
        """The rule without a sweep (``spectheory.recommendation.from_model``) on this table."""
        return from_model({row.gamma: row.calibrated_speedup for row in self.table}, "the calibrated cost model")

    def as_dict(self) -> dict:
        return dict(asdict(self), recommendation=self.recommendation().as_dict())


def calibrated_table(profile: CostProfile, *, alpha: float | None = None, c: float | None = None) -> CalibratedTable:
    """gamma = 0..profile.gamma_max under ``profile``; Theorem 3.8 at ``alpha`` (default: the profile's) and
    ``c`` (default: the profile's) beside it where both are known."""
    alpha = None if alpha is None else float(as_probability("alpha", alpha))
    c = profile.c if c is None else float(as_cost("c", c))
    theorem_alpha = alpha if alpha is not None else profile.alpha
    rows = [CalibratedRow(0, 1.0, None, 1.0, 1.0 if theorem_alpha is not None and c is not None else None)]
    for gamma in range(1, profile.gamma_max + 1):
        theorem = None if theorem_alpha is None or c is None else float(walltime_improvement(theorem_alpha, gamma, c))
        rows.append(
            CalibratedRow(
                gamma,
                profile.tokens_per_iteration(gamma, alpha),
                profile.iteration_seconds(gamma),
                profile.speedup(gamma, alpha),
                theorem,
            )
        )
    best = best_choice(rows, lambda row: row.calibrated_speedup, lambda row: row.gamma)
    theorem_best = (
        None
        if rows[0].theorem_3_8_speedup is None
        else best_choice(rows, lambda row: row.theorem_3_8_speedup, lambda row: row.gamma)
    )
    return CalibratedTable(
        profile.as_dict(),
        alpha,
        c,
        best.gamma,
        best.calibrated_speedup,
        theorem_alpha,
        None if theorem_best is None else theorem_best.gamma,
        None if theorem_best is None else theorem_best.theorem_3_8_speedup,
        tuple(rows),
    )


def format_calibrated_text(result: CalibratedTable) -> str:
    """The calibrated table with the optimum marked by '*', Theorem 3.8 beside it."""
    p = result.profile
    verify = ", ".join(f"{seconds * 1e3:.3f}" for seconds in p["t_verify"])
    source = (
        f"Eq. 1 at alpha = {result.alpha:g}"
        if result.alpha is not None
        else "per-position acceptance " + " ".join(f"{a:.3f}" for a in p["acceptance"])
    )
    lines = [
        f"costs: t_step {p['t_step'] * 1e3:.3f} ms, t_draft {p['t_draft'] * 1e3:.3f} ms, t_iteration "
        f"{p['t_iteration'] * 1e3:.3f} ms, t_verify(k = 1..{len(p['t_verify'])}) {verify} ms",
        f"tokens per iteration: {source}",
        "    gamma  expected_tokens  iteration_ms  calibrated  theorem_3_8",
    ]
    for row in result.table:
        mark = "*" if row.gamma == result.optimal_gamma else " "
        seconds = "" if row.iteration_seconds is None else f"{row.iteration_seconds * 1e3:.3f}"
        theorem = "" if row.theorem_3_8_speedup is None else f"{row.theorem_3_8_speedup:.4f}"
        lines.append(
            f"  {mark} {row.gamma:5d}  {row.expected_tokens:15.4f}  {seconds:>12}  "
            f"{row.calibrated_speedup:10.4f}  {theorem:>11}"
        )
    summary = f"calibrated optimum gamma {result.optimal_gamma}: {result.speedup:.3f}x"
    if result.theorem_3_8_optimal_gamma is not None:
        summary += (
            f"; Theorem 3.8 (alpha {result.theorem_3_8_alpha:.3f}, c {result.c:.4f}) optimum gamma "
            f"{result.theorem_3_8_optimal_gamma}: {result.theorem_3_8_speedup:.3f}x"
        )
    return "\n".join(lines + [summary, "recommended: " + result.recommendation().line()])


def answer_table(
    alpha: float | None,
    c: float,
    c_hat: float | None,
    gamma_max: int,
    *,
    entries: dict | None = None,
    described: str = "",
    per_position: bool = False,
):
    """(table, gamma -> predicted speedup, text) at ``alpha``: calibrated on the cost-profile ``entries``
    (``spectheory.costs.profile_entries``, described as ``described``; Eq. 1 at ``alpha`` unless the acceptance is
    ``per_position``), else Theorem 3.8's with draft costs ``c`` and ``c_hat`` (default c) up to ``gamma_max``."""
    if entries is not None:
        table = calibrated_table(CostProfile.from_dict(entries), alpha=None if per_position else alpha, c=c or None)
        return (
            table,
            {row.gamma: row.calibrated_speedup for row in table.table},
            f"cost profile: {described}\n{format_calibrated_text(table)}",
        )
    table = gamma_table(alpha, c, c if c_hat is None else c_hat, gamma_max)
    return table, {row.gamma: row.speedup for row in table.table}, format_text(table)


def engine_answer(counts, estimate, table, speedups: dict) -> dict:
    """What an engine's counters (``spectheory.metrics.EngineCounts``) say (docs/metrics.md): the alpha they imply
    (``estimate``), the predicted speedup of the engine's draft length and of ``table``'s optimum, from
    ``speedups`` (gamma -> the table's predicted speedup)."""
    current, best = estimate.gamma, table.optimal_gamma
    return {
        "metrics": counts.as_dict(),
        "alpha": estimate.alpha,
        "alpha_standard_error": estimate.standard_error,
        "alpha_method": estimate.method,
        "engine_gamma": current,
        "recommended_gamma": best,
        "speedup_at_engine_gamma": speedups.get(current),
        "recommended_speedup": speedups[best],
        "speedup_change": speedups[best] / speedups[current] if current in speedups else None,
        "table": table.as_dict(),
    }


def format_engine_answer(counts, answer: dict, table_text: str) -> str:
    """``engine_answer`` as text: the counters in the engines' words, alpha, the table, the recommendation."""
    rates = ", ".join(f"{r:.3f}" for r in counts.per_position_acceptance_rate) or "not reported"
    conditional = ", ".join(f"{r:.3f}" for r in counts.conditional_acceptance_rate) or "not reported"
    current, best = answer["engine_gamma"], answer["recommended_gamma"]
    closing = (
        f"the engine's draft length {current} is beyond the table (--gamma-max {len(answer['table']['table']) - 1})"
        if answer["speedup_change"] is None
        else f"the engine drafts {current} per round: predicted {answer['speedup_at_engine_gamma']:.3f}x; gamma "
        f"{best} predicts {answer['recommended_speedup']:.3f}x ({answer['speedup_change']:.3f} times the "
        f"current speed)"
    )
    if answer["table"].get("c") == 0:  # the default: nothing said of the draft's cost
        closing += (
            "\nc = 0: no draft cost was given (--c, or --costs from spectheory profile), so every draft token is free "
            "here and the longest gamma wins; give the draft's cost before acting on this gamma"
        )
    return "\n".join(
        [
            f"{counts.engine}: {counts.drafts:g} drafts, {counts.draft_tokens:g} draft tokens "
            f"({counts.draft_length:.2f} per draft), {counts.accepted_tokens:g} accepted",
            f"  acceptance_rate {counts.acceptance_rate:.4f}, mean_acceptance_length "
            f"{counts.mean_acceptance_length:.4f}",
            f"  per_position_acceptance_rate (unconditional): {rates}",
            f"  conditional_acceptance_rate: {conditional}",
            f"  alpha = {answer['alpha']:.4f} +- {answer['alpha_standard_error']:.4f} (1 SE; "
            f"{answer['alpha_method']})\n",
            table_text,
            "",
            closing,
        ]
    )
