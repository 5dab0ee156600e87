"""An engine's samples with speculation against a second sample by the two-sample test (docs/engines.md §3): the
same engine without speculation, a second server, or a file, drawn with disjoint seeds (llama.cpp's samples under
one seed are coupled across the two paths, so two files drawn with the same seeds are not independent samples)."""

from __future__ import annotations

import numpy as np

from decoders.audit.samples import check_continues, read_rows
from decoders.audit.two_sample import TwoSampleReport, two_sample_test
from decoders.engine_results import EngineTwoSampleAudit
from decoders.engines.base import Engine, EngineRun, EngineSampling
from decoders.progress import progress_bar

__all__ = [
    "SECOND_SIDE_SEED",
    "as_categories",
    "compare_runs",
    "two_sample_document",
    "samples_side",
    "engine_side",
]


#: Seeds of the second side start here, so that the two sides never share one (module docstring).
SECOND_SIDE_SEED = 1 << 30


def as_categories(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Rows of two samples (ids or text pieces, ``END``-padded) as int64 category arrays ``[n, T]``, one code
    per distinct token over both: ids first in their order, then text pieces in theirs, so that a code is a
    function of the pooled set of tokens, not of which sample showed a token first (docs/engines.md §3)."""
    distinct = {token for rows in (a, b) for row in rows for token in row}
    codes = {
        token: code for code, token in enumerate(sorted(distinct, key=lambda token: (isinstance(token, str), token)))
    }
    encode = np.vectorize(codes.__getitem__, otypes=[np.int64])
    return encode(np.array(a, dtype=object)), encode(np.array(b, dtype=object))


def compare_runs(a: EngineRun, b: EngineRun, level: float) -> TwoSampleReport:
    """The two-sample test of two engine runs' rows."""
    left, right = as_categories(a.rows, b.rows)
    return two_sample_test(left, right, level)


def two_sample_document(
    a_text: str, a: EngineRun, b_text: str, b: EngineRun, sampling: EngineSampling, level: float
) -> tuple[EngineTwoSampleAudit, list]:
    """(verdict document, printed lines) of the two-sample audit of two runs; the document holds both samples' rows
    (written beside the verdict where the command writes it)."""
    report = compare_runs(a, b, level)
    rates = [len(run.rows) / run.seconds if run.seconds > 0 else 0.0 for run in (a, b)]
    ratio = rates[0] / rates[1] if all(rates) else None  # a side drawn from a file has no rate
    document = EngineTwoSampleAudit(
        **report.as_dict(),
        a=a_text,
        b=b_text,
        sampling=sampling.describe(),
        lost=[a.lost, b.lost],
        seconds=[a.seconds, b.seconds],
        counters=[a.counters, b.counters],
        samples_per_second=rates,
        throughput_ratio=ratio,
        rows_a=[list(row) for row in a.rows],
        rows_b=[list(row) for row in b.rows],
    )
    lines = [f"audit: {a_text} against {b_text}; {sampling.describe()}, horizon {report.horizon}", report.summary()]
    if ratio is not None:
        lines.append(f"samples a second: {rates[0]:.1f} against {rates[1]:.1f} (ratio {ratio:.2f})")
    return document, lines


def samples_side(path: str, prompt: str | None = None, tokenize=None) -> tuple[str, EngineRun]:
    """(description, run) of a samples file (JSON Lines, ``decoders.audit.samples.read_rows``); with ``prompt``,
    the file must continue that prompt (its text, or its ids by ``tokenize`` where the file holds ids)."""

    file_prompt, rows = read_rows(path)
    check_continues(path, file_prompt, prompt, tokenize)
    return f"samples file {path} ({len(rows)} rows)", EngineRun(tuple(rows), 0.0)


def engine_side(
    engine: Engine,
    prompt: str,
    sampling: EngineSampling,
    n: int,
    horizon: int,
    *,
    speculate: int,
    seed: int,
    fixed: bool = False,
) -> tuple[str, EngineRun]:
    """(description, run) of n samples drawn from ``engine`` (``fixed``: by its own speculation settings)."""

    with progress_bar(None, total=n, desc=f"{engine.name} speculate {speculate}", unit="sample") as bar:
        run = engine.generate(prompt, n, horizon, sampling, speculate=speculate, seed=seed, progress=bar.update)
    lost = f", {run.lost} of {n} samples lost" if run.lost else ""
    setting = "its own speculation settings" if fixed else f"speculate {speculate}"
    return f"{engine.name}, {setting} ({len(run.rows)} rows{lost})", run
