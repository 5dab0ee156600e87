"""`spectheory report`'s measurement (docs/measuring.md, "The report"). The command reads top-down through four
files, one per floor: ``cli.report`` (options) -> ``decoders.jobs.report`` (one call: the pair's, or
Spec-Bench's table) -> ``decoders.bench.report.pair`` (the measurement, returning a ``document.ReportDocument``) ->
``paper_figs.report`` (report.json, report.md, report.html and the figures). Spec-Bench's answer per category is
``decoders.bench.spec_bench.recommend``. The names below are the room's face, each loaded on first use
(``plumbing.lazy``), so the document is read without torch."""

from plumbing.lazy import lazy_exports

_WHERE = {
    "ReportSettings": "decoders.bench.report.settings",
    "ReportRun": "decoders.bench.report.settings",
    "FULL_SETTINGS": "decoders.bench.report.settings",
    "REAL_MODEL_SETTINGS": "decoders.bench.report.settings",
    "measure_pair": "decoders.bench.report.pair",
    "ReportDocument": "decoders.bench.report.document",
    "TemperatureAnswer": "decoders.bench.report.document",
    "AlphaAlongText": "decoders.bench.report.document",
    "ReportAudit": "decoders.bench.report.document",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
