"""`spectheory report`'s measurement (docs/measuring.md, "The report"). The command reads top-down through four
files, one per floor: ``cli.report`` (options) -> ``decoders.jobs.report`` (one call: the pair's, or
Spec-Bench's table) -> ``decoders.bench.report.pair`` (the measurement, returning a ``document.ReportDocument``) ->
``paper_figs.report`` (report.json, report.md, report.html and the figures). Spec-Bench's answer per category is
``decoders.bench.spec_bench.recommend``. This module imports nothing, so the document is read without torch."""
