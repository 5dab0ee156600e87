"""Vectorised Monte-Carlo simulators (numpy only) that check the closed forms of ``spectheory`` and go where
they cannot: synthetic (p, q) families (``families``), acceptance processes without tokens (``acceptance``),
token-level speculative sampling (``token_level``), call timelines (``timeline``), dynamic-gamma policies
(``policies``), blockwise decoding with correlated heads (``blockwise``), one simulation against its closed
form (``run``, behind ``spectheory simulate``), the simulators' own speed (``throughput``) and the documents the
figures read, typed (``documents``)."""
