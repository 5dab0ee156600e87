"""Numbers printed in the papers that the figures overlay (the tests keep their own copy to check against)."""

#: Leviathan et al. Tables 2 and 4 (T5-XXL target, batch 1, TPU-v4):
#: (task, draft, temperature, gamma, alpha, c, expected speedup, measured speedup).
LEVIATHAN_TABLE_4 = (
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
)

#: Leviathan et al. Table 3, alpha at T = 0 / T = 1 for their GPT-like 97M target.
LEVIATHAN_TABLE_3_GPT = {"unigram": (0.03, 0.03), "bigram": (0.05, 0.05), "6M draft": (0.88, 0.89)}

#: Leviathan et al. Table 5, alpha under lenience l = 1, 0.5, 0.3, 0.1 (T5 EnDe target, T = 1).
LEVIATHAN_TABLE_5 = {
    "unigram": (0.07, 0.10, 0.11, 0.16),
    "bigram": (0.19, 0.23, 0.25, 0.32),
    "T5-small": (0.62, 0.71, 0.76, 0.84),
    "T5-base": (0.68, 0.80, 0.83, 0.90),
}

#: Stern et al. Tables 1 and 4 (translation, distillation + fine-tuning): k -> (mean accepted block size,
#: wall-clock speedup).
STERN_BLOCKWISE = {2: (1.88, 1.72), 4: (3.27, 2.69), 6: (4.18, 3.10), 8: (4.69, 3.31), 10: (4.95, 3.04)}
