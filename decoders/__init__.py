"""Reference draft/target decoders in torch, written so that the audits can prove them exact.

``sampling`` (logits -> sampled distribution), ``randomness`` (the randomness interface), ``models`` (the
model protocol and its implementations), ``autoregressive``, ``speculative`` and ``blockwise`` (the
decoders, each a step function plus a loop), ``results`` (what every run returns), ``audit`` (exact and
statistical distribution-preservation audits and planted-bug decoders). Measurement on real pairs lives
in its rooms ``bench`` (measurement), ``engines`` (serving engines) and ``jobs`` (what needs both).
"""
