"""Reference numbers from the papers, copied here so that tests never read ../shared.

Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative Decoding".
"""

#: Table 1 (c = c_hat = 0): (alpha, gamma) -> (operations factor, speed), printed to two decimals.
LEVIATHAN_TABLE_1 = {
    (0.6, 2): (1.53, 1.96),
    (0.7, 3): (1.58, 2.53),
    (0.8, 2): (1.23, 2.44),
    (0.8, 5): (1.63, 3.69),
    (0.9, 2): (1.11, 2.71),
    (0.9, 10): (1.60, 6.86),
}

#: Tables 2 and 4 (T5-XXL target, batch 1, TPU-v4):
#: (task, draft, temperature, gamma, alpha, c, expected speedup, measured speedup).
LEVIATHAN_TABLE_4 = [
    ("EnDe", "T5-small", 0, 7, 0.75, 0.02, 3.2, 3.4),
    ("EnDe", "T5-base", 0, 7, 0.80, 0.04, 3.3, 2.8),
    ("EnDe", "T5-large", 0, 7, 0.82, 0.11, 2.5, 1.7),
    ("EnDe", "T5-small", 1, 7, 0.62, 0.02, 2.3, 2.6),
    ("EnDe", "T5-base", 1, 5, 0.68, 0.04, 2.4, 2.4),
    ("EnDe", "T5-large", 1, 3, 0.71, 0.11, 2.0, 1.4),
    ("CNNDM", "T5-small", 0, 5, 0.65, 0.02, 2.4, 3.1),
    ("CNNDM", "T5-base", 0, 5, 0.73, 0.04, 2.6, 3.0),
    ("CNNDM", "T5-large", 0, 3, 0.74, 0.11, 2.0, 2.2),
    ("CNNDM", "T5-small", 1, 5, 0.53, 0.02, 1.9, 2.3),
    ("CNNDM", "T5-base", 1, 3, 0.55, 0.04, 1.8, 2.2),
    ("CNNDM", "T5-large", 1, 3, 0.56, 0.11, 1.6, 1.7),
]
#: alpha is printed to two decimals, so recomputed "expected" values agree to about +-0.1.
TABLE_4_TOLERANCE = 0.1

#: Section 3.6: a bigram draft with alpha ~ 0.2 and c ~ 0 gives ~1.25x at gamma = 3.
BIGRAM_EXAMPLE = {"alpha": 0.2, "c": 0.0, "gamma": 3, "speedup": 1.25}

#: Section 3.5: an oracle gamma gives "up to ~60%" more speedup than the best fixed gamma.
ORACLE_CLAIM_GAIN = 1.6
