"""Distribution-preservation audits: exact enumeration of the decoders' random choices (``exact``),
statistical audits of black-box samplers (``statistical``) and planted-bug decoders they must catch
(``mutants``). The names below are the audits' public face, each loaded on first use (``plumbing.lazy``)."""

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
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
