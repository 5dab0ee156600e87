"""Reference draft/target decoders in torch, written so that the audits can prove them exact.

``sampling`` (logits -> sampled distribution), ``random`` (the randomness interface), ``models`` (the
model protocol and its implementations), ``autoregressive``, ``speculative`` and ``blockwise`` (the
decoders, each a step function plus a loop), ``results`` (what every run returns), ``audit`` (exact and
statistical distribution-preservation audits, planted-bug decoders), ``corpus`` and ``train`` (the
stdlib corpus and training), ``zoo`` (the shipped models), ``measure`` (alpha) and ``bench`` (speed).
"""
