"""One tie rule for every optimum in the project (docs/theory.md §3, "Ties"): among choices whose speedup is
within a relative ``TIE_RTOL`` of the best, the one with the fewest draft tokens wins, so break-even means
gamma = 0 ("do not speculate") for the gamma calculator, the cost model, the tree programme and the picks of
`spectheory report`, `schedule` and `bench` alike.
"""

from collections.abc import Mapping

import numpy as np

__all__ = ["TIE_RTOL", "beats", "first_best", "best_choice", "best_gamma_row", "row_value"]

#: Speedups closer than this, relatively, are a tie. It is far above the rounding of the closed forms
#: (a few ulp, about 1e-15) and far below any difference a measurement resolves (about 1e-3).
TIE_RTOL = 1e-9


def beats(candidate, incumbent):
    """Whether ``candidate`` is larger than ``incumbent`` by more than the tie tolerance (elementwise on
    arrays); values are positive speedups or expected tokens."""
    return np.asarray(candidate) * (1 - TIE_RTOL) > np.asarray(incumbent)


def first_best(values) -> int:
    """The index of the first value no other beats: ``values`` ordered by ascending draft tokens (gamma 0
    first, or a tree's fewest nodes first), so that a tie goes to the fewest; -inf marks an impossible one."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0 or np.isnan(values).any() or not np.isfinite(values.max()):
        raise ValueError(f"values must be speedups with a finite maximum (-inf: impossible), got {values.tolist()!r}")
    return int(np.flatnonzero(~beats(values.max(), values))[0])


def best_choice(choices, speedup, drafts):
    """The choice with the best ``speedup(choice)``, ties going to the fewest ``drafts(choice)`` (gamma, or a
    tree's nodes)."""
    ordered = sorted(choices, key=drafts)
    return ordered[first_best([speedup(choice) for choice in ordered])]


def row_value(row, key: str):
    """``key`` of a measured row: a typed row's attribute (``decoders.bench.rows.BenchRow``) or a saved row's entry."""
    return row[key] if isinstance(row, Mapping) else getattr(row, key)


def best_gamma_row(rows, key: str = "speedup"):
    """The row of ``rows`` (typed or saved, ``row_value``, with ``gamma``; None for a tree, counted as 0) with the
    best ``key``, ties going to the smallest gamma: the one rule for a sweep's best measured or predicted gamma."""
    return best_choice(rows, lambda row: row_value(row, key), lambda row: row_value(row, "gamma") or 0)
