"""Reference draft/target decoders in torch, audited for exact distribution preservation (issue: decoders).

Empty for now: sampling, the randomness interface, models with rollback-able caches, autoregressive,
speculative and blockwise decoders, audits and the speed harness land here.
"""
