"""The audit of a serving engine's speculative sampler (docs/engines.md §3), the audit room's floor beside the
engines: the request and its run (``request``: ``EngineAuditRequest``, ``run_engine_audit``, ``audit_engine``), the
greedy audit at temperature 0 (``greedy``), the two-sample audit of two sides' samples (``sampled``) and the one-sample
audit against our model of the engine's GGUF file (``model``). This module imports nothing: ``decoders.audit`` lists
the names a user imports."""
