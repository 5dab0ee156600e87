"""Every printed summary of a measurement, in one room: ``spectheory bench``'s (docs/theory.md §9-§10: one line per
measured row and the predictions' errors, from the JSON document the bench writes, its rows read as
``decoders.bench.rows``), the report's answers (``summary_lines``, from its typed document) and Spec-Bench's
recommendation (``recommendation_lines``)."""

from __future__ import annotations

import statistics

from decoders.bench.documents import BatchSweep, BenchDocument, CrossVocabularyBench
from decoders.bench.report.document import ReportDocument, TemperatureAnswer
from decoders.bench.rows import CrossVocabularyRow, HFComparisonRow
from decoders.bench.spec_bench.document import OneSetting, SpecBenchAnswer
from spectheory.costs import CostProfile
from spectheory.intervals import Z95

__all__ = [
    "bench_lines",
    "loss_resolution",
    "cross_vocabulary_lines",
    "cross_vocabulary_answers",
    "cross_vocabulary_cells",
    "cross_vocabulary_header",
    "summary_lines",
    "recommendation_lines",
    "loss_noise",
    "apart_label",
]


def bench_lines(document: BenchDocument) -> list[str]:
    """The bench's printed summary of a ``bench_document``: the gamma table, the predictions' errors, the best
    gamma per temperature, the autoregressive costs, the batch sweep and the Hugging Face comparison."""
    bench = document.bench
    env, settings, rows = bench.environment, bench.settings, bench.rows
    lines = [
        f"c = {bench.c:.4f} (draft call {bench.draft_call_seconds * 1e3:.3f} ms / target call "
        f"{bench.target_call_seconds * 1e3:.3f} ms), {env['device_name']}, {env['dtype']}",
        "   T  gamma  tokens/iter  alpha  speedup (min-max)  +-SE      calibrated  cal/measured  Thm 3.8  "
        "measured/Thm  efficiency",
    ]
    sampling = {
        key: value
        for key, value in settings.get("sampling", {}).items()
        if key != "temperature" and value not in (None, False, 0.0, 1.0, [], ())
    }  # the settings that are set
    lines[1:1] = [f"sampling at every temperature: {sampling}"] if sampling else []
    for row in rows:
        low, _, high = row.speedup_spread
        lines.append(
            f"{row.temperature:4g}  {row.gamma:5d}  {row.tokens_per_iteration:11.3f}  "
            f"{row.alpha_counts:5.3f}  {row.speedup:7.3f} ({low:.2f}-{high:.2f})  "
            f"{_error(row.speedup_standard_error)}  "
            f"{row.calibrated_speedup:10.3f}  {row.calibrated_over_measured:12.3f}  "
            f"{row.predicted_speedup:7.3f}  {row.measured_over_predicted:12.3f}  {_share(row.efficiency)}"
        )
    lines += [
        _error_summary(name, rows, key, 0.10)
        for name, key in (("calibrated", "calibrated_speedup"), ("Theorem 3.8", "predicted_speedup"))
    ]
    checked = [row.calibrated_within for row in rows if row.calibrated_within is not None]
    if checked:
        lines.append(f"calibrated within max(10%, 2 SE over the prompts): {sum(checked)} of {len(checked)} rows")
    tokens = settings["max_new_tokens"]
    for temperature in settings["temperatures"]:
        if (
            document.recommendations is not None
        ):  # the rule (spectheory.recommendation; files before 2026-12-02 lack it)
            chosen = document.recommendations[str(temperature)]
            lines.append(f"T = {temperature:g}: recommended: {chosen.line()}")
        best = bench.best(temperature)
        profile = CostProfile.from_dict(bench.profiles[temperature])
        calibrated = profile.optimal_gamma(tokens=tokens)
        lines.append(
            f"T = {temperature:g}: best gamma {best.gamma}, speedup {best.speedup:.3f} over our "
            f"autoregressive decoder ({bench.autoregressive_seconds[temperature]:.3f} s for "
            f"{settings['prompts']} x {tokens} tokens), pooled alpha {bench.alpha[temperature]:.3f};"
            f" the cost model recommends gamma {calibrated} ({profile.speedup(calibrated, tokens=tokens):.3f}x;"
            f" t_step {profile.t_step * 1e3:.3f} ms, t_draft {profile.t_draft * 1e3:.3f} ms, "
            f"t_verify(2..{profile.gamma_max + 1})"
            f" {profile.t_verify[1] * 1e3:.3f}..{profile.t_verify[-1] * 1e3:.3f} ms, t_iteration "
            f"{profile.t_iteration * 1e3:.3f} ms)"
        )
    for temperature, costs in bench.autoregressive.items():
        lines.append(
            f"T = {temperature:g}, autoregressive: {costs['seconds_per_token'] * 1e3:.3f} ms per token, "
            f"{costs['over_target_call']:.3f} x ({costs['over_target_call_spread'][0]:.2f}-"
            f"{costs['over_target_call_spread'][1]:.2f}) the one-token target call timed beside it "
            f"({costs['target_call_seconds'] * 1e3:.3f} ms), efficiency {_share(costs['efficiency'])}"
        )
    lines += _forecast_lines(document)
    lines += _batch_lines(document.batches)
    for row in document.hf.rows if document.hf else ():
        lines.append(f"HF, T = {row.temperature:g}, gamma {document.hf.gamma}: " + "; ".join(_hf_lines(row)))
    return lines


def _forecast_lines(document: BenchDocument) -> list[str]:
    """The forecast made before the sweep (``decoders.bench.forecast.sweep``) against every measured row, with the
    measured 95% interval, and its gamma's loss against the best measured gamma."""
    forecast, sweep_seconds = document.forecast, document.sweep_seconds
    if forecast is None:
        return []
    lines = [
        f"forecast from acceptance along {forecast.prompts} other prompts and a cost profile of "
        f"{forecast.cost_prompts} of them ({forecast.repeats} timed repeats): {forecast.seconds:.1f} s, "
        f"{forecast.seconds / sweep_seconds:.0%} of the sweep's {sweep_seconds:.1f} s",
        "   T  gamma  forecast  +-SE    measured [95% interval]  forecast/measured",
    ]
    for judged, ahead in zip(document.judged, forecast.temperatures):
        if judged.withheld:
            lines.append(judged.withheld)
            continue
        for row in judged.forecast_by_gamma:
            low, high = row.measured_interval
            lines.append(
                f"{judged.temperature:4g}  {row.gamma:5d}  {row.forecast:8.3f}  "
                f"{_error(row.forecast_standard_error)}  {row.measured:8.3f} [{low:.3f}-{high:.3f}]  "
                f"{row.forecast_over_measured:17.3f}{'' if row.inside_interval else '  (outside)'}"
            )
        if ahead.prompts_needed is not None:
            lines.append(
                f"T = {judged.temperature:g}: the forecast's text pins it to +-10% (95%) with "
                f"{ahead.prompts_needed} prompts (jackknife over its {forecast.prompts})"
            )
        ratios = [row.forecast_over_measured for row in judged.forecast_by_gamma]
        resolution = loss_resolution(judged.forecast_gamma, judged.best_measured_gamma, judged.loss_resolved)
        lines.append(
            f"T = {judged.temperature:g}: the forecast recommends gamma {judged.forecast_gamma} "
            f"({judged.forecast_speedup:.3f}x), measured there {judged.measured_speedup_at_forecast_gamma:.3f}x, "
            f"{judged.forecast_loss:.1%} under the best measured (gamma {judged.best_measured_gamma}, "
            f"{judged.best_measured_speedup:.3f}x; {resolution}); forecast/measured "
            f"{min(ratios):.3f}-{max(ratios):.3f}"
        )
    return lines


def loss_resolution(forecast_gamma: int, best_gamma: int, resolved: bool | None) -> str:
    """Whether the sweep tells a forecast's gamma from the best measured one (``resolved``:
    ``decoders.bench.forecast.sweep.judge_forecast``'s ``loss_resolved``), as the bench, the report and report.md
    print it."""
    if forecast_gamma == best_gamma:
        return "the same gamma"
    return (
        "a loss the sweep resolves (95% intervals apart)"
        if resolved
        else "within the sweep's noise (95% intervals overlap)"
    )


def _hf_lines(row: HFComparisonRow) -> list[str]:
    """Per kind (autoregressive, speculative) our adapter's seconds against transformers', the ratio with its
    [min, max] over repeats; beside the adapter, our native decoder where the pair was converted from TinyGPTs and the
    adapter unpadded where it pads calls to cheaper widths."""
    lines = []
    for kind, theirs in (("ar", "generate"), ("speculative", "assisted")):
        if (ratio := row.ours_over_hf(kind)) is None:
            continue
        others = "".join(
            f" ({name} {row.seconds[f'{kind}_ours_{name}']:.3f} s)"
            for name in ("native", "unpadded")
            if f"{kind}_ours_{name}" in row.seconds
        )
        lines.append(
            f"{kind} ours (adapter) {row.seconds[f'{kind}_ours_adapter']:.3f} s{others} vs {theirs} "
            f"{row.seconds[f'{kind}_hf_{theirs}']:.3f} s, {ratio[0]:.2f}x ({ratio[1][0]:.2f}-{ratio[1][1]:.2f})"
        )
    return lines


def _error(value) -> str:
    """A speedup's standard error over the prompts, or n/a with one prompt."""
    return "  n/a" if value is None else f"{value:5.3f}"


def _share(value) -> str:
    """An efficiency (model-call seconds over wall seconds), or n/a where the runs were not phase-timed."""
    return "n/a" if value is None else f"{value:.3f}"


def _batch_lines(sweep: BatchSweep | None) -> list[str]:
    """The batch sweep's table: tokens per second, measured speedup and the cost model's prediction."""
    if not sweep:
        return []
    lines = [
        "batch   T  gamma  prompts  AR tok/s  spec tok/s  speedup (min-max)     predicted  pred/measured"
        "  efficiency AR/spec"
    ]
    rows = sweep.rows
    for row in rows:
        low, _, high = row.speedup_spread
        lines.append(
            f"{row.batch_size:5d}  {row.temperature:3g}  {row.gamma:5d}  {row.prompts:7d}  "
            f"{row.autoregressive_tokens_per_second:8.0f}  {row.tokens_per_second:10.0f}  "
            f"{row.speedup:7.3f} ({low:.2f}-{high:.2f})  {row.calibrated_speedup:10.3f}  "
            f"{row.calibrated_over_measured:13.3f}  {_share(row.autoregressive_efficiency)}/"
            f"{_share(row.efficiency)}"
        )
    return lines + [_error_summary("batch sweep", rows, "calibrated_speedup", 0.15)]


def _error_summary(name: str, rows: list, key: str, tolerance: float) -> str:
    """How far the prediction ``key`` of the ``BenchRow``s ``rows`` is from the measured speedups: median and largest
    |predicted / measured - 1|, and the rows within ``tolerance``."""
    errors = [abs(getattr(row, key) / row.speedup - 1) for row in rows]
    within = sum(error <= tolerance for error in errors)
    return (
        f"{name}: median |predicted / measured - 1| = {100 * statistics.median(errors):.1f}%, largest "
        f"{100 * max(errors):.1f}%, {within} of {len(rows)} rows within {100 * tolerance:.0f}%"
    )


def cross_vocabulary_lines(document: CrossVocabularyBench) -> list[str]:
    """The document as lines: one per (temperature, method, gamma), then one per (temperature, same-tokenizer draft,
    gamma) timed beside them, our autoregressive decoding and transformers' runs, then the answers per temperature."""
    settings, rows, beside = document.settings, document.rows, document.beside_rows or ()
    lines = [
        f"{document.draft} ({document.vocabularies['draft']} pieces) drafting for {document.target} "
        f"({document.vocabularies['target']}), batch 1, {settings['prompts']} prompts of "
        f"{settings['prompt_length']} tokens, {settings['max_new_tokens']} new tokens",
        *_cross_vocabulary_table(rows, "method"),
    ]
    if beside:
        lines += [
            "beside it, drafts that read the target's own tokens (our speculative decoding, in the same run):",
            *_cross_vocabulary_table(beside, "draft"),
        ]
    for temperature, ours in document.autoregressive.items():
        lines.append(
            f"T = {temperature}, our autoregressive decoding of the target: {ours['seconds']:.3f} s, "
            f"{ours['tokens_per_second']:.1f} tokens/s"
        )
    for row in document.hf or ():
        what = "generate" if row.gamma is None else f"assisted by the draft at {row.gamma} tokens (its own method)"
        greedy = "" if row.greedy_equal is None else f", greedy equal to ours: {'yes' if row.greedy_equal else 'NO'}"
        lines.append(
            f"T = {row.temperature:g}, transformers {what}: {row.seconds:.3f} s, {row.speedup:.3f}x our "
            f"autoregressive decoding [{row.seconds_spread[0]:.3f}-{row.seconds_spread[2]:.3f} s]{greedy}"
        )
    for temperature, forecast in document.forecast.items():
        if forecast.withheld:
            lines.append(f"T = {temperature}: {forecast.withheld}")
    return lines + cross_vocabulary_answers(rows, beside)


def cross_vocabulary_header(label: str) -> list[str]:
    """The column names of ``cross_vocabulary_cells``, the second the method or (``label`` "draft") the draft."""
    return ["T", label, "gamma", "alpha", "rho", "tokens/call", "speedup [min-max]", "forecast", "greedy equal"]


def cross_vocabulary_cells(row: CrossVocabularyRow, label: str) -> list[str]:
    """A row's cells under ``cross_vocabulary_header(label)``, the second its method or (``label`` "draft") its
    same-tokenizer draft: what the printed table and the report's table show."""
    return [
        f"{row.temperature:g}",
        row.draft if label == "draft" else row.method,
        str(row.gamma),
        "-" if row.alpha is None else f"{row.alpha:.3f}",
        f"{row.candidates_per_draft_token:.2f}",
        f"{row.tokens_per_call:.3f}",
        f"{row.speedup:.3f}x [{row.speedup_spread[0]:.2f}-{row.speedup_spread[2]:.2f}]",
        "-" if row.forecast_speedup is None else f"{row.forecast_speedup:.3f}x",
        "" if row.greedy_equal is None else ("yes" if row.greedy_equal else "NO"),
    ]


def _cross_vocabulary_table(rows: list, label: str) -> list[str]:
    """A header and a line per ``CrossVocabularyRow``, columns right-aligned but the method or draft's."""
    table = [cross_vocabulary_header(label), *(cross_vocabulary_cells(row, label) for row in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(table[0]))]
    return [
        "  ".join(cell.ljust(w) if i == 1 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths))).rstrip()
        for cells in table
    ]


def cross_vocabulary_answers(rows: list, beside: list = ()) -> list[str]:
    """Per temperature: "use METHOD at gamma G" for the fastest row whose every repeat measured above 1x, else "do not
    speculate with this draft" with the fastest; then, with ``beside`` (the same-tokenizer drafts' rows), their
    answer by the same rule (``rows``, ``beside``: ``CrossVocabularyRow``)."""
    lines = []
    for temperature in sorted({row.temperature for row in rows}):
        best, pays = _fastest([row for row in rows if row.temperature == temperature])
        lines.append(
            f"T = {temperature:g}: "
            + (
                f"use {best.method} at gamma {best.gamma} ({best.speedup:.3f}x measured)"
                if pays
                else f"do not speculate with this draft: the best, {best.method} at gamma {best.gamma}, measured "
                f"{best.speedup:.3f}x ({best.speedup_spread[0]:.2f}-{best.speedup_spread[2]:.2f} over repeats)"
            )
        )
        alongside = [row for row in beside if row.temperature == temperature]
        if alongside:
            other, other_pays = _fastest(alongside)
            measured = (
                f"{other.draft} at gamma {other.gamma}, {other.speedup:.3f}x "
                f"({other.speedup_spread[0]:.2f}-{other.speedup_spread[2]:.2f} over repeats)"
            )
            lines.append(
                f"T = {temperature:g}, with the target's own tokenizer: "
                + (
                    f"use {measured}, {other.speedup / best.speedup:.2f}x the draft with another tokenizer's best"
                    if other_pays
                    else f"no draft pays either: the best, {measured}"
                )
            )
    return lines


def _fastest(rows: list) -> tuple:
    """(the fastest row whose every repeat measured above 1x, True), else (the fastest row, False)."""
    paying = [row for row in rows if row.speedup_spread[0] > 1]
    return max(paying or rows, key=lambda row: row.speedup), bool(paying)


def summary_lines(document: ReportDocument) -> list[str]:
    """The report's answers as the command prints them, from its document: the forecast first."""
    forecast, lines = document.forecast, []
    for r in document.recommendations:
        ratios = [row.forecast_over_measured for row in r.forecast_by_gamma]
        inside = sum(row.inside_interval for row in r.forecast_by_gamma)
        answer = f"T = {r.temperature:g}: {r.recommendation.line()}"
        if r.withheld:
            lines += [answer, r.withheld]
            continue
        lines += [
            f"{answer}; forecast gamma {r.forecast_gamma} ({r.forecast_speedup:.3f}x{_interval_words(r)}; measured "
            f"there {r.measured_speedup_at_forecast_gamma:.3f}x, {r.forecast_loss:.1%} under the best measured, gamma "
            f"{r.best_measured_gamma} at {r.best_measured_speedup:.3f}x, "
            f"{loss_resolution(r.forecast_gamma, r.best_measured_gamma, r.loss_resolved)}; forecast/measured "
            f"{min(ratios):.3f}-{max(ratios):.3f} over the sweep, inside the measured 95% interval at {inside} of "
            f"{len(ratios)} gammas{_covered_words(r)})",
            f"  diagnostics: the cost model calibrated on the sweep, gamma {r.optimal_gamma} "
            f"({r.calibrated_speedup:.3f}x); Theorem 3.8 at alpha {r.alpha:.3f}, c {r.c:.4f}: gamma "
            f"{r.theorem_3_8_gamma} ({r.predicted_speedup:.3f}x)",
        ]
    repeats = f"{forecast.repeats} repeat" + ("s" if forecast.repeats != 1 else "")
    lines.append(
        f"the forecast took {forecast.seconds:.1f} s (acceptance along {forecast.prompts} other prompts, "
        f"costs from {forecast.cost_prompts} over {repeats}), the sweep that checks it "
        f"{document.sweep_seconds:.1f} s ({forecast.seconds / document.sweep_seconds:.0%} of it)"
    )
    lines.append(f"audit: {'PASS' if document.audit.passed else 'FAIL'} (p = {document.audit.p_value:.3g})")
    for block in document.policies.temperatures if document.policies else ():
        lines.append(
            f"T = {block.temperature:g}: "
            f"{'use ' + block.best_policy if block.use_policy else 'keep ' + block.best_fixed}"
            f" (best policy {block.best_policy}, {block.gain_over_best_fixed:.3f}x the best fixed gamma)"
        )
    if document.trees:
        best = document.trees.recommendation
        lines.append(
            f"T = 0: {best.kind} at budget {best.budget} (depth {best.tree['depth']}) fastest of "
            f"tree and chain, {best.speedup:.3f}x"
        )
    return lines


def _interval_words(r: TemperatureAnswer) -> str:
    """The forecast's stated 95% interval; none in a report written before forecasts stated one (2026-11-28)."""
    return "" if r.forecast_interval is None else ", 95% interval {:.2f}-{:.2f}x".format(*r.forecast_interval)


def _covered_words(r: TemperatureAnswer) -> str:
    """How often the measurement lay in the forecast's interval combined with its own; none in a report written
    before coverage was judged."""
    rows = r.forecast_by_gamma
    if rows[0].covered is None:
        return ""
    return (
        f", the measurement inside the forecast's interval combined with its own at {sum(row.covered for row in rows)}"
        f" of {len(rows)}"
    )


def recommendation_lines(recommendation: SpecBenchAnswer) -> list:
    """The recommendation as printed lines."""
    by = {row.predicted_by for row in recommendation.categories.values()}
    lines = [
        f"{'category':<27}{'recommended':<31}{'forecast' if by == {'forecast'} else 'model':>10}{'measured':>10}  "
        f"{'best measured':<31}{'speedup':>8}{'ratio':>7}  apart (95%)"
    ]
    for row in recommendation.categories.values():
        lines.append(
            f"{row.label:<27}{row.recommended:<31}{row.predicted_speedup:>9.2f}x"
            f"{row.measured_speedup:>9.2f}x  {row.best_measured:<31}{row.best_measured_speedup:>7.2f}x"
            f"{row.recommended_over_best:>7.3f}  {apart_label(row.within_noise_of_best)}"
        )
    one = recommendation.one_setting
    lines.append(
        f"one setting for all categories: {one.setting}, {'forecast' if by == {'forecast'} else 'predicted'} "
        f"overall {one.predicted_overall:.2f}x, "
        f"measured {one.measured_overall:.2f}x; the per-category settings measure "
        f"{one.per_category_measured_overall:.2f}x "
        f"overall: one setting loses {100 * one.loss:.1f}%{loss_noise(one)}"
    )
    return lines


def loss_noise(one: OneSetting) -> str:
    """The one-setting loss's 95% half-width as printed after it ("" where its error is unknown)."""
    error = one.loss_standard_error
    return "" if error is None else f" +- {100 * Z95 * error:.1f}% (95%){'' if one.loss_within_noise else ': apart'}"


def apart_label(within: bool | None) -> str:
    """Whether the recommended and the best measured speedups are told apart at 95%: "no" (within noise), "yes",
    or "unknown" (an error not measured)."""
    return "unknown" if within is None else "no" if within else "yes"
