"""`spectheory audit --engine` as one call: the engine audit with its progress bar, written where asked
(docs/engines.md §3)."""

from __future__ import annotations

from decoders.engines.audit import EngineAuditRequest, run_engine_audit
from decoders.progress import progress_bar
from plumbing.outputs import check_writable, write_json

__all__ = ["audit_engine"]


def audit_engine(request: EngineAuditRequest, *, out: str | None = None, command: str | None = None) -> tuple:
    """``run_engine_audit``'s document and printed lines; with ``out`` (probed first) the document and the samples
    written there as JSON, ``command`` recorded."""
    if out:
        check_writable(out)
    with progress_bar(None if request.greedy else False, total=len(request.gammas), desc="greedy", unit="gamma") as bar:
        document, samples, lines = run_engine_audit(request, bar.update)
    if out:
        write_json(out, dict(document, **samples), command=command)
    return document, lines
