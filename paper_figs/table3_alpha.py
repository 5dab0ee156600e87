"""Measured acceptance rate alpha (Leviathan et al. Table 3 analogue) of each shipped draft against the
shipped target at T = 0 and T = 1: alpha = mean sum_x min(p, q) along held-out text, and from the
acceptance counts of gamma = 4 speculative runs from held-out prompts (+- one standard error), as
Markdown and CSV. The paper's GPT-like (97M target) row is quoted below the table."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import AlphaDocument
from paper_figs.paper_data import LEVIATHAN_TABLE_3_GPT
from paper_figs.style import RECOMPUTE_COMMAND, read_result, write_table
from plumbing.outputs import without_provenance, write_json, write_text

RESULT = "alpha.json"


def compute(results: Path, *, progress=None) -> Path:
    """``RESULT`` and ``alpha.md`` as ``spectheory alpha`` writes them (every draft, T = 0 and 1)."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.alpha import alpha_markdown
    from decoders.bench.runs import AlphaRun, alpha_document

    document = alpha_document(AlphaRun(progress=None if progress else False))
    write_text(Path(results) / "alpha.md", alpha_markdown(list(document.estimates)))
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def rows(estimates: tuple) -> tuple[list, list, list]:
    """(header, Markdown rows, CSV rows) of ``AlphaEstimate``s: one row per draft, text and count estimates per
    temperature."""
    temperatures = sorted({e.temperature for e in estimates})
    drafts = list(dict.fromkeys(e.draft for e in estimates))
    cell = {(e.draft, e.temperature): e for e in estimates}
    header = ["draft"] + [f"T = {t:g}, {kind}" for t in temperatures for kind in ("text", "counts")]
    markdown, csv = [], []
    for draft in drafts:
        found = [cell.get((draft, t)) for t in temperatures]
        markdown.append(
            [draft]
            + [
                f"{getattr(e, f'alpha_{kind}'):.3f} ± {getattr(e, f'alpha_{kind}_standard_error'):.3f}" if e else "-"
                for e in found
                for kind in ("text", "counts")
            ]
        )
        csv.append(
            [draft] + [f"{getattr(e, f'alpha_{kind}'):.4f}" if e else "" for e in found for kind in ("text", "counts")]
        )
    return header, markdown, csv


def make(out: Path, results: Path) -> list[Path]:
    saved = read_result(results, RESULT)
    header, markdown, csv = rows(AlphaDocument.from_dict(without_provenance(saved)).estimates)
    paper = ", ".join(f"{name} {t0:.2f} / {t1:.2f}" for name, (t0, t1) in LEVIATHAN_TABLE_3_GPT.items())
    note = (
        f"Leviathan et al. Table 3, GPT-like 97M target (T = 0 / T = 1): {paper}. "
        f"Ours: `{saved.get('command', 'spectheory alpha')}`."
    )
    return write_table(out, "table3_alpha", header, markdown, csv_rows=csv, note=note)


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
