"""Reference draft/target decoders in torch, written so that the audits can prove them exact.

``sampling`` (logits -> sampled distribution), ``randomness`` (the randomness interface), ``models`` (the
model protocol and its implementations), ``autoregressive``, ``speculative``, ``tree`` and ``blockwise`` (the
decoders, each a step function plus a loop), ``results`` (what every run returns; ``engine_results``, an engine's
bench and audits as documents), ``audit`` (exact and
statistical distribution-preservation audits and planted-bug decoders). Measurement on real pairs lives
in its rooms ``bench`` (measurement), ``engines`` (serving engines) and ``jobs`` (what needs both).

The names below are the decoders' public face (``from decoders import generate_speculative``), each loaded on first
use: the figures import ``decoders.bench.report.document`` without torch.
"""

from plumbing.lazy import lazy_exports

_WHERE = {
    "Sampling": "decoders.sampling",
    "seeded": "decoders.randomness",
    "TorchRandomness": "decoders.randomness",
    "generate_autoregressive": "decoders.autoregressive",
    "SpeculativeConfig": "decoders.speculative",
    "generate_speculative": "decoders.speculative",
    "TreeConfig": "decoders.tree",
    "DynamicTree": "decoders.tree",
    "generate_tree": "decoders.tree",
    "Generation": "decoders.results",
    "DecodeStats": "decoders.results",
    "CausalModel": "decoders.models.protocol",
    "TreeModel": "decoders.models.protocol",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
