"""The one-command report (``spectheory report``): a target/draft pair measured, a gamma recommended, the
decoder audited and benchmarked, and the findings written as ``report.json``, ``report.md`` and
``report.html`` with their figures.

* alpha along held-out text at each temperature (mean sum_x min(p, q), THEORY.md §1);
* c, tokens per iteration, alpha from acceptance counts and the measured speedup over our autoregressive
  decoder for a gamma sweep at batch 1 (``decoders.bench.bench_pair``);
* the recommended gamma: the calculator (Theorem 3.8, ``spectheory.calculator.gamma_table``) at the alpha
  that decoding itself sees (acceptance counts of the sweep) and the measured c, beside the best measured gamma;
* a statistical audit of speculative sampling at T = 1 with the gamma recommended at the last temperature
  measured (``decoders.audit``).

Every number in the Markdown and HTML is formatted from the JSON document, which is written first.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from paper_figs import measured_vs_predicted, speedup_vs_gamma
from paper_figs.style import markdown_table

__all__ = ["ReportSettings", "measure_pair", "write_report", "render_markdown", "render_html"]

AUDIT_TEMPERATURE = 1.0  # sampling is where a decoder can be wrong; greedy decoding is checked by the tests
AUDIT_BATCH = 256  # sequences per decoder call in the audit


@dataclass(frozen=True)
class ReportSettings:
    """The budget of a report; the defaults take about three minutes on a 2-core CPU."""

    temperatures: tuple = (0.0, 1.0)
    windows: int = 32  # held-out windows of 256 characters for alpha along text
    gammas: tuple = (1, 2, 3, 4, 5, 6, 7, 8)
    prompts: int = 4  # held-out prompts for the benchmark, decoded one at a time
    prompt_length: int = 64
    max_new_tokens: int = 128
    repeats: int = 3
    warmup: int = 1
    audit_n: int = 4000
    audit_horizon: int = 4
    audit_prompt: str = "import "
    gamma_max: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        from decoders.models.base import check_positive_integers

        self.bench_settings()  # gammas, temperatures, prompts, lengths, repeats, warm-up
        check_positive_integers(self, ("windows", "audit_horizon", "gamma_max"))
        if isinstance(self.audit_n, bool) or not isinstance(self.audit_n, int) or self.audit_n < 2:
            raise ValueError(f"audit_n must be an integer >= 2, got {self.audit_n!r}")
        if not self.audit_prompt:
            raise ValueError("audit_prompt must be non-empty text")
        if self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed}")

    def bench_settings(self):
        """The benchmark's ``decoders.bench.BenchSettings``."""
        from decoders.bench import BenchSettings

        return BenchSettings(tuple(self.gammas), tuple(self.temperatures), self.prompts, self.prompt_length,
                             self.max_new_tokens, self.repeats, self.warmup, seed=self.seed)


def measure_pair(target, draft, *, target_name: str, draft_name: str, settings: ReportSettings = ReportSettings(),
                 command: str = "", progress: bool | None = None) -> dict:
    """Measure the pair and return the report's JSON document (every number the report shows)."""
    from tqdm import tqdm

    from decoders import measure
    from decoders.bench import bench_pair
    from decoders.corpus import VOCAB_SIZE, load_corpus

    for name, model in (("target", target), ("draft", draft)):
        if model.vocab_size != VOCAB_SIZE:
            raise ValueError(f"the report measures on the shipped corpus: the {name} must have its {VOCAB_SIZE}-"
                             f"character vocabulary, got vocab_size {model.vocab_size}")
    start, s = time.perf_counter(), settings
    held_out = load_corpus().held_out
    stages = tqdm(total=3, desc="report", unit="stage", disable=None if progress is None else not progress)
    with stages:
        stages.set_postfix_str("alpha along text")
        alpha_text = [dict(measure.alpha_under_lenience(target, {draft_name: draft}, held_out, (1.0,), temperature=t,
                                                        windows=s.windows, seed=s.seed)[0], windows=s.windows)
                      for t in s.temperatures]
        stages.update()
        stages.set_postfix_str("benchmark")
        prompts = measure.text_windows(held_out, s.prompts, s.prompt_length, s.seed + 1)
        bench = json.loads(json.dumps(bench_pair(target, draft, prompts, s.bench_settings(), target_name=target_name,
                                                 draft_name=draft_name, progress=progress).as_dict()))  # as in the file
        recommendations = [_recommendation(bench, t, s.gamma_max) for t in s.temperatures]
        stages.update()
        stages.set_postfix_str("audit")
        audit_gamma = max(1, recommendations[-1]["optimal_gamma"])
        audit = _audit(target, draft, audit_gamma, s, progress)
        stages.update()
    return {"command": command, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": time.perf_counter() - start, "target": target_name, "draft": draft_name,
            "settings": asdict(settings), "environment": bench["environment"],
            "alpha_text": [{"temperature": row["temperature"], "alpha": row["alpha"][0],
                            "standard_error": row["standard_error"][0], "windows": row["windows"]} for row in alpha_text],
            "c": bench["c"], "recommendations": recommendations, "bench": bench,
            "audit": dict(audit.as_dict(), gamma=audit_gamma, temperature=AUDIT_TEMPERATURE,
                          prompt=settings.audit_prompt)}


def _recommendation(bench: dict, temperature: float, gamma_max: int) -> dict:
    """The calculator at the sweep's pooled alpha (counts) and measured c, beside the best measured gamma."""
    from spectheory.calculator import gamma_table

    alpha = min(_by_temperature(bench["alpha"])[temperature], 1.0)
    table = gamma_table(alpha, bench["c"], bench["c"], gamma_max)
    rows = {row["gamma"]: row for row in bench["rows"] if row["temperature"] == temperature}
    best = max(rows.values(), key=lambda row: row["speedup"])
    at_optimum = rows.get(table.optimal_gamma)
    return {"temperature": temperature, "alpha": alpha, "c": bench["c"], "optimal_gamma": table.optimal_gamma,
            "predicted_speedup": table.speedup, "expected_tokens": table.expected_tokens,
            "measured_speedup_at_optimal_gamma": at_optimum["speedup"] if at_optimum else None,
            "best_measured_gamma": best["gamma"], "best_measured_speedup": best["speedup"]}


def _by_temperature(mapping: dict) -> dict:
    """A JSON object keyed by temperature (string keys) as {float: value}."""
    return {float(key): value for key, value in mapping.items()}


def _audit(target, draft, gamma: int, settings: ReportSettings, progress):
    """The statistical audit of speculative sampling (Algorithm 1) at T = 1 with ``gamma`` draft tokens."""
    from decoders.audit import setups, statistical
    from decoders.corpus import encode
    from decoders.sampling import Sampling
    from decoders.speculative import SpeculativeConfig

    sampling, prompt = Sampling(AUDIT_TEMPERATURE), encode(settings.audit_prompt).tolist()
    generate = setups.speculative_run(target, draft, prompt, SpeculativeConfig(gamma, sampling), settings.audit_horizon)
    sample = setups.sampler(generate, prompt, settings.audit_horizon, batch=AUDIT_BATCH, progress=progress)
    return statistical.audit_sampler(sample, target, prompt, sampling, n=settings.audit_n,
                                     horizon=settings.audit_horizon, seed=settings.seed, draft=draft)


def write_report(document: dict, out: Path) -> list[Path]:
    """Write ``report.json``, the figures, ``report.md`` and ``report.html`` into ``out``; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json"]
    paths[0].write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")
    figures = speedup_vs_gamma.draw(document["bench"], out / "figures") + \
        measured_vs_predicted.draw(document["bench"], out / "figures")
    blocks = report_blocks(document, [path.relative_to(out) for path in figures if path.suffix == ".png"])
    paths += figures + [out / "report.md", out / "report.html"]
    paths[-2].write_text(render_markdown(blocks))
    paths[-1].write_text(render_html(blocks, title=blocks[0][2]))
    return paths


def report_blocks(d: dict, figures: list) -> list[tuple]:
    """The report as blocks: ("heading", level, text), ("paragraph", text), ("table", header, rows), ("image",
    path, caption). Inline `code` and **bold** are the only markup."""
    env, bench, audit = d["environment"], d["bench"], d["audit"]
    ratios = [row["measured_over_predicted"] for row in bench["rows"]]
    blocks = [("heading", 1, f"Speculative decoding report: {d['target']} with draft {d['draft']}"),
              ("paragraph", f"`{d['command'] or 'spectheory report'}` on {env['device_name']} ({env['device']}, "
                            f"{env['dtype']}, torch {env['torch']}, {env['torch_threads']} threads), {d['created']}, "
                            f"in {d['seconds']:.1f} s. Every number below is read from `report.json`."),
              ("heading", 2, "Recommendation")]
    for r in d["recommendations"]:
        measured = "not in the sweep" if r["measured_speedup_at_optimal_gamma"] is None else \
            f"measured {r['measured_speedup_at_optimal_gamma']:.3f}x"
        blocks.append(("paragraph", f"**T = {r['temperature']:g}: gamma = {r['optimal_gamma']}.** Theorem 3.8 at alpha = "
                                    f"{r['alpha']:.3f} and c = {r['c']:.4f} predicts {r['predicted_speedup']:.3f}x "
                                    f"({r['expected_tokens']:.3f} tokens per iteration; {measured}). The best measured "
                                    f"gamma was {r['best_measured_gamma']} at {r['best_measured_speedup']:.3f}x."))
    blocks += [("heading", 2, "Measured alpha and c"),
               ("table", ["T", "alpha along text", "alpha from acceptance counts", "c"],
                [[f"{a['temperature']:g}", f"{a['alpha']:.3f} ± {a['standard_error']:.3f}",
                  f"{_by_temperature(bench['alpha'])[a['temperature']]:.3f}", f"{d['c']:.4f}"] for a in d["alpha_text"]]),
               ("paragraph", f"Alpha along text is the mean of sum_x min(p, q) over {d['alpha_text'][0]['windows']} "
                             f"held-out windows; alpha from acceptance counts is accepted / verified draft tokens "
                             f"of the benchmark's runs (what decoding sees; the recommendation uses it). c = draft "
                             f"call {bench['draft_call_seconds'] * 1e3:.3f} ms / target call "
                             f"{bench['target_call_seconds'] * 1e3:.3f} ms (one token, batch 1)."),
               ("heading", 2, "Speedup"),
               ("table", ["T", "gamma", "tokens per iteration", "alpha (counts)", "speedup", "predicted",
                          "measured / predicted"],
                [[f"{row['temperature']:g}", str(row["gamma"]), f"{row['tokens_per_iteration']:.3f}",
                  f"{row['alpha_counts']:.3f}", f"{row['speedup']:.3f}", f"{row['predicted_speedup']:.3f}",
                  f"{row['measured_over_predicted']:.3f}"] for row in bench["rows"]]),
               ("paragraph", f"Batch 1, {bench['settings']['prompts']} held-out prompts of "
                             f"{bench['settings']['prompt_length']} characters, {bench['settings']['max_new_tokens']} "
                             f"new tokens each, median of {bench['settings']['repeats']} runs after "
                             f"{bench['settings']['warmup']} warm-up; speedup over our autoregressive decoder ("
                             + ", ".join(f"T = {t:g}: {s:.3f} s" for t, s in _by_temperature(bench["autoregressive_seconds"]).items())
                             + "); predicted = Theorem 3.8 at the pooled alpha and c. Measured / predicted ranged "
                             f"from {min(ratios):.3f} to {max(ratios):.3f}. A short benchmark: on a busy machine "
                             "repeat it, or measure with `spectheory bench`.")]
    blocks += [("image", path, caption) for path, caption in zip(figures, (
        "Speedup against gamma: Theorem 3.8 (lines, optimum starred) and measured (points).",
        "Measured against predicted speedup, with Leviathan et al.'s twelve T5 points."))]
    verdict = "PASS" if audit["passed"] else "FAIL"
    blocks += [("heading", 2, "Audit"),
               ("paragraph", f"**{verdict}**: speculative sampling (gamma = {audit['gamma']}, T = "
                             f"{audit['temperature']:g}) from the prompt `{audit['prompt']}`, {audit['n']} sampled "
                             f"continuations of {audit['horizon']} tokens tested against the target's exact law: "
                             f"p = {audit['p_value']:.3g} (Bonferroni over {audit['tests']} tests) at level "
                             f"{audit['level']:g}; it would detect a per-position total variation of "
                             f"{audit['detectable_tv']:.4f} with 90% power ({audit['seconds']:.1f} s).")]
    return blocks


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
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:52em;margin:2em auto;line-height:1.4}"
             "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}"
             "img{max-width:100%}</style></head><body>"]
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
            parts.append(f"<figure><img src='{html.escape(str(body[0]))}' alt='{html.escape(body[1])}'>"
                         f"<figcaption>{_inline(body[1])}</figcaption></figure>")
    return "\n".join(parts + ["</body></html>"]) + "\n"
