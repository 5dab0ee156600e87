"""Distribution-preservation audits, ours and the engines', in one room over three floors (docs/theory.md §8,
docs/engines.md §3). With the decoders: exact enumeration of the decoders' random choices (``exact``), the
statistical battery (``battery``, ``statistical``, ``two_sample``) and its verdict as documents hold it (``verdict``),
planted-bug decoders the audits must catch (``mutants``, ``tree_mutants``, ``mirostat_mutants``,
``cross_vocabulary``), the tiny setups and samplers (``setups``), engines' samples files (``samples``) and what an
audit asks for (``request``). With the measurements: the audit command's runs on a pair (``runs``) and their
throughput (``throughput``). With the engines: the engine audit (the room ``engines``). The names below are the
audit's public face, each loaded on first use (``plumbing.lazy``)."""

from plumbing.lazy import lazy_exports

_WHERE = {
    "autoregressive_law": "decoders.audit.exact",
    "speculative_law": "decoders.audit.exact",
    "tree_law": "decoders.audit.exact",
    "compare_laws": "decoders.audit.exact",
    "tiny_target": "decoders.audit.setups",
    "tiny_draft": "decoders.audit.setups",
    "audit_sampler": "decoders.audit.statistical",
    "AuditReport": "decoders.audit.statistical",
    "AuditRequest": "decoders.audit.request",
    "AuditVerdict": "decoders.audit.verdict",
    "run_audit": "decoders.audit.runs",
    "audit_pair": "decoders.audit.runs",
    "EngineAuditRequest": "decoders.audit.engines.request",
    "run_engine_audit": "decoders.audit.engines.request",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
