"""The audit of a serving engine's speculative sampler (docs/engines.md §3), the audit room's floor beside the
engines: the request and its run (``request``: ``EngineAuditRequest``, ``run_engine_audit``, ``audit_engine``), the
greedy audit at temperature 0 (``greedy``), the two-sample audit of two sides' samples (``sampled``) and the one-sample
audit against our model of the engine's GGUF file (``model``). The names below are the room's face, each loaded on
first use (``plumbing.lazy``)."""

from plumbing.lazy import lazy_exports

_WHERE = {
    "ENGINE_PROMPT": "decoders.audit.engines.request",
    "EngineAuditRequest": "decoders.audit.engines.request",
    "run_engine_audit": "decoders.audit.engines.request",
    "audit_engine": "decoders.audit.engines.request",
    "greedy_audit": "decoders.audit.engines.greedy",
    "two_sample_document": "decoders.audit.engines.sampled",
    "against_model": "decoders.audit.engines.model",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
