"""Goodput under concurrency: output tokens per second over all requests of a serving engine's plain server (black)
and of each speculative method (colours) at each concurrency, measured (points, min-max over repeats) and forecast
from other questions before the measurement (lines; plain dashed), on Spec-Bench's mixed questions. Below, each
method's goodput over plain in the same repeat, with 1 (below it, speculation costs goodput). The files are
`spectheory bench --engine ... --concurrency ...` documents (docs/findings/goodput.md gives each command; they are
not recomputed here: they need the engines' servers)."""

from __future__ import annotations

import statistics
from pathlib import Path

from decoders.load_results import KIND, LoadBenchDocument
from paper_figs.style import FULL, plt, read_result, save

RESULT = "goodput"  # a folder: every load_*.json in it whose kind is KIND


def documents(results: Path) -> list[LoadBenchDocument]:
    """The load bench documents in ``results``/``RESULT``, by file name."""
    folder = Path(results) / RESULT
    read = [read_result(folder, path.name) for path in sorted(folder.glob("load_*.json"))]
    found = [LoadBenchDocument.from_dict(data) for data in read if data.get("kind") == KIND]
    if not found:
        raise ValueError(f"no {KIND} document (load_*.json) in {str(folder)!r}: see docs/findings/goodput.md")
    return found


def make(out: Path, results: Path) -> list[Path]:
    return draw(documents(results), out)


def _label(document: LoadBenchDocument) -> str:
    """The method's short name: vLLM's ``method``, llama-server's ``spec``."""
    settings = document.engine_settings
    return f"{document.engine.split(' (')[0]} {settings.get('method') or settings.get('spec') or ''}".strip()


def draw(found: list, out: Path) -> list[Path]:
    """The figure of load bench documents: goodput above, its ratio to plain below."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(FULL[0], 4.6), sharex=True)
    for index, document in enumerate(found):
        rows, color = document.rows, f"C{index}"
        sizes = [row.concurrency for row in rows]
        plain = [statistics.median(row.plain_goodput) for row in rows]
        top.plot(sizes, plain, "o", color="k", ms=3, mfc="none", label="plain, measured" if index == 0 else None)
        top.vlines(sizes, [min(r.speculative_goodput) for r in rows], [max(r.speculative_goodput) for r in rows], color)
        top.plot(
            sizes,
            [statistics.median(r.speculative_goodput) for r in rows],
            "s",
            color=color,
            ms=3,
            label=f"{_label(document)}, measured",
        )
        bottom.vlines(sizes, [r.speedup_spread[0] for r in rows], [r.speedup_spread[2] for r in rows], color)
        bottom.plot(sizes, [r.speedup for r in rows], "s", color=color, ms=3)
        ahead = document.forecast
        if ahead is not None:
            top.plot(
                sizes,
                [ahead.plain_goodput[c] for c in sizes],
                "--",
                color="k",
                linewidth=0.7,
                label="plain, forecast" if index == 0 else None,
            )
            top.plot(
                sizes,
                [ahead.plain_goodput[c] * ahead.speedups[c] for c in sizes],
                "-",
                color=color,
                linewidth=1,
                label=f"{_label(document)}, forecast",
            )
            bottom.plot(sizes, [ahead.speedups[c] for c in sizes], "-", color=color, linewidth=1)
    bottom.axhline(1.0, color="k", linewidth=0.6)
    sizes = sorted({row.concurrency for document in found for row in document.rows})
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(sizes, [str(size) for size in sizes])
    first = found[0]
    top.set(ylabel="goodput (output tokens/s)", title=f"{first.model}, {first.environment['host']['cpu']}")
    bottom.set(xlabel="concurrency (requests in flight)", ylabel="over plain (x)")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small")
    return save(fig, out, "goodput_vs_concurrency")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
