"""The one-command report rendered (``spectheory report``): ``report.json``, ``report.md`` and ``report.html``
with their figures, from the ``ReportDocument`` that ``decoders.bench.report.pair.measure_pair`` measured.

Every number in the Markdown and HTML is formatted from the JSON document, which is written first. The
files are written into a staged directory that replaces ``out`` only once all of them are complete.
"""

from __future__ import annotations

import html
import re
import statistics
from pathlib import Path

from decoders.bench.bench_lines import (
    apart_label,
    cross_vocabulary_answers,
    cross_vocabulary_cells,
    cross_vocabulary_header,
    loss_noise,
    loss_resolution,
)
from decoders.bench.documents import BenchReport, CrossVocabularyBench, PolicyBench, TreeBench
from decoders.bench.report.document import ReportAudit, ReportDocument
from decoders.bench.spec_bench.document import SpecBenchReport
from decoders.bench.spec_bench.table import forecast_lines
from paper_figs import iteration_time, measured_vs_predicted, spec_bench, speedup_vs_gamma
from paper_figs.style import markdown_table
from plumbing.outputs import staged_directory, write_json, write_text

__all__ = ["write_report", "write_cross_vocabulary_report", "report_blocks", "render_markdown", "render_html"]


def write_report(document: ReportDocument, out: Path) -> list[Path]:
    """Write ``report.json``, the figures, ``report.md`` and ``report.html`` into ``out``, replacing what was
    there as a whole; returns the paths."""
    out = Path(out)
    names = []
    with staged_directory(out) as stage:
        write_json(stage / "report.json", document.as_dict(), command=document.command)
        figures = [
            *speedup_vs_gamma.draw(document.bench, stage / "figures", forecast=document.forecast),
            *(
                path
                for script in (measured_vs_predicted, iteration_time)
                for path in script.draw(document.bench, stage / "figures")
            ),
        ]
        blocks = report_blocks(document, [path.relative_to(stage) for path in figures if path.suffix == ".png"])
        write_text(stage / "report.md", render_markdown(blocks))
        write_text(stage / "report.html", render_html(blocks, title=blocks[0][2]))
        names = ["report.json", *(path.relative_to(stage) for path in figures), "report.md", "report.html"]
    return [out / name for name in names]


def write_spec_bench_report(report: SpecBenchReport, out: Path, *, command: str) -> list[Path]:
    """``report --task spec-bench``: ``report.json`` (the table and the recommendation), the bar chart,
    ``report.md`` and ``report.html`` into ``out``, replacing what was there as a whole; returns the paths."""
    out = Path(out)
    with staged_directory(out) as stage:
        write_json(stage / "report.json", report.as_dict(), command=command)
        figures = spec_bench.draw(report.table, stage / "figures")
        blocks = _spec_bench_blocks(report, command, figures[0].relative_to(stage))
        write_text(stage / "report.md", render_markdown(blocks))
        write_text(stage / "report.html", render_html(blocks, title=blocks[0][2]))
        names = ["report.json", *(path.relative_to(stage) for path in figures), "report.md", "report.html"]
    return [out / name for name in names]


def write_cross_vocabulary_report(document: CrossVocabularyBench, out: Path, *, command: str) -> list[Path]:
    """``report --cross-vocabulary``: ``report.json`` (the bench, its forecast and the audits), ``report.md`` and
    ``report.html`` into ``out``, replacing what was there as a whole; returns the paths."""
    out = Path(out)
    with staged_directory(out) as stage:
        write_json(stage / "report.json", document.as_dict(), command=command)
        blocks = cross_vocabulary_blocks(document, command)
        write_text(stage / "report.md", render_markdown(blocks))
        write_text(stage / "report.html", render_html(blocks, title=blocks[0][2]))
    return [out / name for name in ("report.json", "report.md", "report.html")]


def cross_vocabulary_blocks(d: CrossVocabularyBench, command: str) -> list[tuple]:
    """The cross-vocabulary report as blocks (``report_blocks``' kinds): the answers, every row, the same-tokenizer
    drafts' rows timed beside them, the audits."""
    rows, beside = d.rows, d.beside_rows or ()
    blocks = [
        ("heading", 1, f"A draft with another tokenizer: {d.draft} drafting for {d.target}"),
        ("paragraph", f"`{command}` (docs/theory-vocabularies.md §15); batch 1, {d.settings['prompts']} prompts."),
        *[("paragraph", f"**{line}**") for line in cross_vocabulary_answers(rows, beside)],
        ("heading", 2, "Measured against our autoregressive decoding, beside the forecast made first"),
        _rows_table(rows, "method"),
    ]
    if beside:
        blocks += [
            ("heading", 2, "Beside it: drafts that read the target's own tokens, in the same run"),
            _rows_table(beside, "draft"),
        ]
    return blocks + [
        *[
            ("paragraph", f"T = {t}: our autoregressive decoding {a['tokens_per_second']:.1f} tokens/s.")
            for t, a in d.autoregressive.items()
        ],
        ("heading", 2, "Audits at T = 1 against the target's law"),
        (
            "table",
            ["method", "verdict", "p", "n", "horizon"],
            [
                [m, "PASS" if a.passed else "FAIL", f"{a.p_value:.3g}", str(a.n), str(a.horizon)]
                for m, a in (d.audits or {}).items()
            ],
        ),
    ]


def _rows_table(rows: list, label: str) -> tuple:
    """A table block of ``CrossVocabularyRow``s, its ``label`` column the method or the same-tokenizer draft."""
    return ("table", cross_vocabulary_header(label), [cross_vocabulary_cells(r, label) for r in rows])


def _spec_bench_blocks(report: SpecBenchReport, command: str, figure: Path) -> list[tuple]:
    """The Spec-Bench report as blocks (``report_blocks``'s kinds)."""
    table, answer = report.table, report.recommendation
    env, s, one = table.environment, table.settings, answer.one_setting
    by = "forecast" if all(r.predicted_by == "forecast" for r in answer.categories.values()) else "model"
    judged = forecast_lines(table)
    rows = [
        [
            row.label,
            row.recommended,
            f"{row.predicted_speedup:.2f}x",
            f"{row.measured_speedup:.2f}x",
            row.best_measured,
            f"{row.best_measured_speedup:.2f}x",
            f"{row.recommended_over_best:.3f}",
            apart_label(row.within_noise_of_best),
        ]
        for row in answer.categories.values()
    ]
    return [
        ("heading", 1, f"Spec-Bench report: {table.target}"),
        (
            "paragraph",
            f"`{command}` on {env['device_name']} ({env['device']}, {env['dtype']}, {env['torch_threads']} "
            f"threads): T = 0, batch 1, {s['prompts']} questions per category, {s['max_new_tokens']} new "
            f"tokens each. Every number below is read from `report.json`.",
        ),
        (
            "table",
            [
                "category",
                "recommended",
                by,
                "measured",
                "best measured",
                "its speedup",
                "recommended / best",
                "told apart (95%)",
            ],
            rows,
        ),
        *(
            [
                (
                    "paragraph",
                    "The forecast, made before the table was timed, from other questions of each category: "
                    + "; ".join(judged)
                    + ".",
                )
            ]
            if judged
            else [
                (
                    "paragraph",
                    "No forecast: the recommendation is the cost model calibrated on the table's own runs, "
                    "a check of the decomposition rather than a forecast.",
                )
            ]
        ),
        (
            "paragraph",
            f"One setting for all categories, by the {'forecast' if by == 'forecast' else 'cost model'}: "
            f"**{one.setting}**, {by} "
            f"{one.predicted_overall:.2f}x overall, measured {one.measured_overall:.2f}x; the "
            f"per-category settings measure {one.per_category_measured_overall:.2f}x: one setting "
            f'loses {100 * one.loss:.1f}%{loss_noise(one)}. "Told apart": the recommended and the '
            f"best measured speedups differ by more than the 95% band of their difference (standard "
            f"errors over the questions; unknown where one is not measured).",
        ),
        ("image", figure, "Speedup per category and draft, measured (bars, spread of repeats) and predicted (ticks)"),
    ]


def report_blocks(d: ReportDocument, figures: list) -> list[tuple]:
    """The report as blocks: ("heading", level, text), ("paragraph", text), ("table", header, rows), ("image",
    path, caption). Inline `code` and **bold** are the only markup."""
    env = d.environment
    return [
        ("heading", 1, f"Speculative decoding report: {d.target} with draft {d.draft}"),
        (
            "paragraph",
            f"`{d.command or 'spectheory report'}` on {env['device_name']} ({env['device']}, "
            f"{env['dtype']}, torch {env['torch']}, {env['torch_threads']} threads), {d.created}, "
            f"in {d.seconds:.1f} s. Every number below is read from `report.json`.",
        ),
        *_recommendation_blocks(d),
        *_alpha_blocks(d),
        *_speed_blocks(d.bench, figures),
        *_audit_blocks(d.audit),
        *_tree_blocks(d.trees),
        *_policy_blocks(d.policies),
    ]


def _recommendation_blocks(d: ReportDocument) -> list[tuple]:
    forecast = d.forecast
    blocks = [
        ("heading", 2, "Recommendation"),
        (
            "paragraph",
            f"The forecast comes first, from the acceptance along {forecast.prompts} other prompts "
            f"and a cost profile of {forecast.cost_prompts} of them (timed repeats: "
            f"{forecast.repeats}; docs/measuring.md) that took {forecast.seconds:.1f} s; "
            f"the sweep that checks it took {d.sweep_seconds:.1f} s.",
        ),
        (
            "table",
            [
                "T",
                "forecast gamma",
                "forecast",
                "its 95% interval",
                "measured there",
                "loss against the best measured",
                "forecast / measured over the sweep",
                "the loss against the sweep's 95% intervals",
                "forecast inside the measured 95% interval",
            ],
            [
                [f"{r.temperature:g}", r.withheld] + [""] * 7
                if r.withheld
                else [
                    f"{r.temperature:g}",
                    str(r.forecast_gamma),
                    f"{r.forecast_speedup:.3f}",
                    "not stated" if r.forecast_interval is None else "{:.2f}-{:.2f}".format(*r.forecast_interval),
                    f"{r.measured_speedup_at_forecast_gamma:.3f}",
                    f"{r.forecast_loss:.1%}",
                    "{:.3f}-{:.3f}".format(
                        *(f(row.forecast_over_measured for row in r.forecast_by_gamma) for f in (min, max))
                    ),
                    loss_resolution(r.forecast_gamma, r.best_measured_gamma, r.loss_resolved),
                    f"{sum(row.inside_interval for row in r.forecast_by_gamma)} of {len(r.forecast_by_gamma)} gammas",
                ]
                for r in d.recommendations
            ],
        ),
    ]
    for r in d.recommendations:
        measured = (
            "not in the sweep"
            if r.measured_speedup_at_optimal_gamma is None
            else f"measured {r.measured_speedup_at_optimal_gamma:.3f}x"
        )
        answer, _, rule = r.recommendation.line().partition(" (")
        blocks.append(
            (
                "paragraph",
                f"**T = {r.temperature:g}: {answer}** ({rule}. The forecast's gamma: {r.forecast_gamma}. "
                f"Diagnostics: the cost model calibrated on the sweep's own profile "
                f"(docs/theory.md §10) picks gamma = {r.optimal_gamma} for {r.calibrated_speedup:.3f}x "
                f"({measured}). Theorem 3.8 at alpha = {r.alpha:.3f} and c = {r.c:.4f} would "
                f"choose gamma = {r.theorem_3_8_gamma} for {r.predicted_speedup:.3f}x "
                f"({r.expected_tokens:.3f} tokens per iteration). The best measured gamma was "
                f"{r.best_measured_gamma} at {r.best_measured_speedup:.3f}x.",
            )
        )
    return blocks


def _alpha_blocks(d: ReportDocument) -> list[tuple]:
    bench = d.bench
    return [
        ("heading", 2, "Measured alpha and c"),
        (
            "table",
            ["T", "alpha along text", "alpha from acceptance counts", "c"],
            [
                [
                    f"{a.temperature:g}",
                    f"{a.alpha:.3f} ± {a.standard_error:.3f}",
                    f"{bench.alpha[a.temperature]:.3f}",
                    f"{d.c:.4f}",
                ]
                for a in d.alpha_text
            ],
        ),
        (
            "paragraph",
            f"Alpha along text is the mean of sum_x min(p, q) over {d.alpha_text[0].windows} "
            f"held-out windows of {d.alpha_text[0].length} tokens of {d.text}; alpha from acceptance counts "
            "is accepted / verified draft tokens "
            f"of the benchmark's runs (what decoding sees; Theorem 3.8 uses it). c = draft "
            f"call {bench.draft_call_seconds * 1e3:.3f} ms / target call "
            f"{bench.target_call_seconds * 1e3:.3f} ms (one token, batch 1).",
        ),
    ]


def _speed_blocks(bench: BenchReport, figures: list) -> list[tuple]:
    calibrated = [abs(row.calibrated_over_measured - 1) for row in bench.rows]
    theorem = [abs(1 / row.measured_over_predicted - 1) for row in bench.rows]
    settings = bench.settings
    blocks = [
        ("heading", 2, "Speedup"),
        (
            "table",
            [
                "T",
                "gamma",
                "tokens per iteration",
                "alpha (counts)",
                "speedup (min-max)",
                "SE",
                "cost model",
                "Theorem 3.8",
            ],
            [
                [
                    f"{row.temperature:g}",
                    str(row.gamma),
                    f"{row.tokens_per_iteration:.3f}",
                    f"{row.alpha_counts:.3f}",
                    f"{row.speedup:.3f} ({row.speedup_spread[0]:.3f}-{row.speedup_spread[2]:.3f})",
                    "n/a" if row.speedup_standard_error is None else f"{row.speedup_standard_error:.3f}",
                    f"{row.calibrated_speedup:.3f}",
                    f"{row.predicted_speedup:.3f}",
                ]
                for row in bench.rows
            ],
        ),
        (
            "paragraph",
            f"Batch 1, {settings['prompts']} held-out prompts of {settings['prompt_length']} "
            f"tokens, {settings['max_new_tokens']} new tokens each, median of {settings['repeats']} "
            f"interleaved runs after {settings['warmup']} warm-up (min-max: each repeat's ratio); "
            "speedup over our autoregressive decoder ("
            + ", ".join(f"T = {t:g}: {s:.3f} s" for t, s in bench.autoregressive_seconds.items())
            + "; SE: the speedup's standard error over the prompts, whose sampled texts at T > 0 "
            "are draws too" + f"). The cost model is off by {100 * statistics.median(calibrated):.1f}% "
            f"(median) and {100 * max(calibrated):.1f}% at most; Theorem 3.8 by "
            f"{100 * statistics.median(theorem):.1f}% and {100 * max(theorem):.1f}%. A short "
            "benchmark: on a busy machine repeat it, or measure with `spectheory bench`.",
        ),
    ]
    return blocks + [
        ("image", path, caption)
        for path, caption in zip(
            figures,
            (
                "Speedup against gamma: Theorem 3.8 (lines, optimum starred), the cost model (dashed, shaded 2 SE) and "
                "measured (points).",
                "Measured against predicted speedup: Theorem 3.8 (open) and the cost model (filled, 2 SE bars), with "
                "Leviathan et al.'s twelve T5 points.",
                "Where an iteration's time goes: the cost model (left bars) beside the measured phases (right bars).",
            ),
        )
    ]


def _tree_blocks(trees: TreeBench | None) -> list[tuple]:
    """Tree against chain at equal node budgets (T = 0), and the verdict."""
    if trees is None:
        return []
    best = trees.recommendation
    verdict = (
        f"**Use a tree** of {best.tree['nodes']} nodes (depth {best.tree['depth']}, parents `{best.tree['parents']}`)"
        if best.kind == "tree"
        else f"**Use a chain** (gamma = {best.tree['nodes'] - 1})"
    )
    a = ", ".join(f"{x:.3f}" for x in trees.rank_frequencies["decoding"])
    return [
        ("heading", 2, "Tree or chain (T = 0)"),
        (
            "table",
            ["budget", "decoder", "depth", "tokens per call", "rank model", "speedup (min-max)", "calibrated"],
            [
                [
                    str(row.budget),
                    row.kind,
                    str(row.tree["depth"]),
                    f"{row.tokens_per_call:.3f}",
                    f"{row.predicted_tokens_per_call:.3f}",
                    f"{row.speedup:.3f} ({row.speedup_spread[0]:.3f}-{row.speedup_spread[2]:.3f})",
                    f"{row.calibrated_speedup:.3f}",
                ]
                for row in trees.rows
            ],
        ),
        (
            "paragraph",
            f"{verdict}: {best.speedup:.3f}x measured, the fastest of the rows above. At each budget "
            "(positions per verify call, the root included) the chain of budget - 1 drafts runs in the "
            "speculative decoder and the optimal tree of the rank model (docs/theory-trees.md §12) in the "
            f"tree decoder, target-only verification of the draft's top tokens; rank frequencies a_1.. "
            f"of the target's greedy token among the draft's candidates along the decoded text: {a}. "
            "Calibrated: each decoder's measured costs per iteration times its iterations replayed "
            "along the decoded text (exact at T = 0).",
        ),
    ]


def _policy_blocks(policies: PolicyBench | None) -> list[tuple]:
    """Draft-length policies against the best measured fixed gamma, per temperature, and the verdict."""
    if policies is None:
        return []
    blocks = [("heading", 2, "Draft length: a policy or a fixed gamma")]
    for block in policies.temperatures:
        blocks.append(
            (
                "table",
                ["T", "decoder", "tokens per call", "drafts wasted per token", "speedup (min-max)", "replay"],
                [
                    [
                        f"{block.temperature:g}",
                        row.decoder,
                        f"{row.tokens_per_call:.3f}",
                        f"{row.wasted_per_token:.3f}",
                        f"{row.speedup:.3f} ({row.speedup_spread[0]:.3f}-{row.speedup_spread[2]:.3f})",
                        "n/a" if row.predicted_speedup is None else f"{row.predicted_speedup:.3f}",
                    ]
                    for row in block.rows
                ],
            )
        )
        low, gain, high = block.gain_spread
        verdict = f"**use {block.best_policy}**" if block.use_policy else f"**keep {block.best_fixed}**"
        blocks.append(
            (
                "paragraph",
                f"T = {block.temperature:g}: {verdict}. The best policy, {block.best_policy}, "
                f"measured {gain:.3f}x the best fixed gamma ({low:.3f}-{high:.3f} over the "
                "repeats); a policy is advised only when it wins in every repeat. Replay: the "
                "policy along the greedy text with the measured costs (docs/theory.md §13).",
            )
        )
    return blocks


def _prompt(audit: ReportAudit) -> str:
    """The audit's prompt: its text, or the held-out prompt it was (when the report measured on --text)."""
    if audit.prompt is not None:
        return f"the prompt `{audit.prompt}`"
    return f"the last {len(audit.prompt_ids)} tokens of the first benchmark prompt"


def _audit_blocks(audit: ReportAudit) -> list[tuple]:
    verdict = "PASS" if audit.passed else "FAIL"
    return [
        ("heading", 2, "Audit"),
        (
            "paragraph",
            f"**{verdict}**: speculative sampling (gamma = {audit.gamma}, T = "
            f"{audit.temperature:g}) from {_prompt(audit)}, {audit.n} sampled "
            f"continuations of {audit.horizon} tokens tested against the target's exact law: "
            f"p = {audit.p_value:.3g} (Bonferroni over {audit.tests} tests) at level "
            f"{audit.level:g}; it would detect a per-position total variation of "
            f"{audit.detectable_tv:.4f} with 90% power ({audit.seconds:.1f} s).",
        ),
    ]


def render_markdown(blocks: list[tuple]) -> str:
    lines = []
    for kind, *body in blocks:
        if kind == "heading":
            lines += ["#" * body[0] + " " + body[1], ""]
        elif kind == "paragraph":
            lines += [body[0], ""]
        elif kind == "table":
            lines += markdown_table(*body) + [""]
        else:
            lines += [f"![{body[1]}]({body[0]})", "", f"*{body[1]}*", ""]
    return "\n".join(lines)


def _inline(text: str) -> str:
    """Escaped HTML with `code` and **bold**."""
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))
    return re.sub(r"\*\*([^*]*)\*\*", r"<strong>\1</strong>", text)


def render_html(blocks: list[tuple], *, title: str) -> str:
    parts = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:52em;margin:2em auto;line-height:1.4}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}"
        "img{max-width:100%}</style></head><body>",
    ]
    for kind, *body in blocks:
        if kind == "heading":
            parts.append(f"<h{body[0]}>{_inline(body[1])}</h{body[0]}>")
        elif kind == "paragraph":
            parts.append(f"<p>{_inline(body[0])}</p>")
        elif kind == "table":
            header, rows = body
            parts.append("<table><tr>" + "".join(f"<th>{_inline(cell)}</th>" for cell in header) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>" for row in rows]
            parts.append("</table>")
        else:
            parts.append(
                f"<figure><img src='{html.escape(str(body[0]))}' alt='{html.escape(body[1])}'>"
                f"<figcaption>{_inline(body[1])}</figcaption></figure>"
            )
    return "\n".join(parts + ["</body></html>"]) + "\n"
