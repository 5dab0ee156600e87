"""Acceptance rate under lenience (Leviathan et al. Table 5 analogue): alpha_l = mean sum_x min(p(x) / l, q(x))
along held-out text at T = 1 for l = 1, 0.5, 0.3, 0.1, for each shipped draft against the shipped target,
as Markdown and CSV. Lenience l < 1 no longer preserves the target's distribution; the paper's T5 EnDe rows
are quoted below the table."""

from __future__ import annotations

from pathlib import Path

from decoders.bench.documents import LenienceDocument
from paper_figs.paper_data import LEVIATHAN_TABLE_5
from paper_figs.style import RECOMPUTE_COMMAND, read_result, write_table
from plumbing.outputs import without_provenance, write_json

RESULT = "lenience.json"


def compute(results: Path, *, progress=None) -> Path:
    """Measure every shipped draft on 32 held-out windows at every lenience and write ``RESULT``."""
    # here, not at the top: a figure imports without torch and measures only when drawn anew
    from decoders.bench.runs import lenience_document

    document = lenience_document(progress=None if progress else False)
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    document = LenienceDocument.from_dict(without_provenance(read_result(results, RESULT)))
    leniences = document.rows[0].leniences
    header = ["draft"] + [f"l = {lenience:g}" for lenience in leniences]
    markdown = [
        [row.draft] + [f"{a:.3f} ± {e:.3f}" for a, e in zip(row.alpha, row.standard_error)] for row in document.rows
    ]
    csv = [[row.draft] + [f"{a:.4f}" for a in row.alpha] for row in document.rows]
    paper = "; ".join(f"{name} " + " / ".join(f"{a:.2f}" for a in values) for name, values in LEVIATHAN_TABLE_5.items())
    note = (
        f"T = {document.rows[0].temperature:g}, {document.windows} held-out windows, +- one standard "
        f"error over windows. Leviathan et al. Table 5 (T5 EnDe, T = 1, l = 1 / 0.5 / 0.3 / 0.1): {paper}."
    )
    return write_table(out, "table5_lenience", header, markdown, csv_rows=csv, note=note)


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
