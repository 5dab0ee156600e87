"""The one home of argument checks, used by the theory, the simulators, the decoders and the CLI.

Each check returns the validated input (a float64 array, a pair, or an ``int``) and raises a ``ValueError``
that names the argument and the first offending value, so that the CLI can print it as one line.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SUM_TOLERANCE",
    "as_real",
    "as_probability",
    "as_cost",
    "as_count",
    "as_lenience",
    "as_distribution",
    "as_distribution_pair",
    "as_int",
    "as_positive_int",
    "as_non_negative_int",
    "positive_int_fields",
]

#: Tolerance on ``sum(p) == 1`` for a probability vector (float32 softmax outputs sum to 1 within ~1e-6).
SUM_TOLERANCE = 1e-6


def _first_offender(name: str, values: np.ndarray, bad: np.ndarray, requirement: str) -> None:
    """Raise for the first element of ``values`` where ``bad`` holds."""
    if not np.any(bad):
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f" at index {index}" if values.ndim else ""
    raise ValueError(f"{name} must be {requirement}, got {values[index].item()!r}{where}")


def as_real(
    name: str, value, *, low: float = -np.inf, high: float = np.inf, low_open: bool = False, integer: bool = False
) -> np.ndarray:
    """``value`` as a float64 array, finite (``high`` may be +inf) and inside the given interval."""
    try:
        values = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or array of them, got {value!r}") from None
    left = "(" if low_open else "["
    right = "]" if np.isfinite(high) else ")"
    requirement = f"in {left}{low:g}, {high:g}{right}"
    _first_offender(name, values, np.isnan(values), requirement)
    below = values <= low if low_open else values < low
    _first_offender(name, values, below | (values > high), requirement)
    if integer:
        _first_offender(name, values, np.isfinite(values) & (values != np.round(values)), "an integer")
    return values


def as_probability(name: str, value) -> np.ndarray:
    """A probability (e.g. ``alpha``) in [0, 1]."""
    return as_real(name, value, low=0.0, high=1.0)


def as_cost(name: str, value) -> np.ndarray:
    """A non-negative, finite cost ratio (``c``, ``c_hat``)."""
    values = as_real(name, value, low=0.0)
    _first_offender(name, values, np.isinf(values), "finite")
    return values


def as_count(name: str, value, *, integer: bool = True, allow_inf: bool = False) -> np.ndarray:
    """A count (draft tokens, tokens): >= 0, an integer unless ``integer=False``."""
    values = as_real(name, value, low=0.0, integer=integer)
    if not allow_inf:
        _first_offender(name, values, np.isinf(values), "finite")
    return values


def as_lenience(value) -> np.ndarray:
    """Lenience ``l`` in (0, 1] (Leviathan et al. appendix A.5)."""
    return as_real("lenience", value, low=0.0, high=1.0, low_open=True)


def as_distribution(name: str, value, *, atol: float = SUM_TOLERANCE) -> np.ndarray:
    """Probability vectors along the last axis: finite, non-negative, summing to 1 within ``atol``."""
    values = as_real(name, value, low=0.0)
    if values.ndim == 0 or values.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last (vocabulary) axis, got shape {values.shape}")
    _first_offender(name, values, np.isinf(values), "finite")
    totals = values.sum(axis=-1)
    _first_offender(f"sum of {name} over its last axis", totals, np.abs(totals - 1.0) > atol, f"1 within {atol:g}")
    return values


def as_distribution_pair(p, q, *, atol: float = SUM_TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
    """Target ``p`` and draft ``q`` of the same shape [..., V]."""
    p_values = as_distribution("p", p, atol=atol)
    q_values = as_distribution("q", q, atol=atol)
    if p_values.shape != q_values.shape:
        raise ValueError(f"p and q must have the same shape, got {p_values.shape} and {q_values.shape}")
    return p_values, q_values


def as_int(name: str, value, *, low: int, high: int | None = None) -> int:
    """An integer (not a bool, not a float) in [``low``, ``high``]; numpy integers are accepted."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < low
        or (high is not None and value > high)
    ):
        if low == 1 and high is None:
            requirement = "a positive integer"
        elif low == 0 and high is None:
            requirement = "a non-negative integer"
        elif high is None:
            requirement = f"an integer >= {low}"
        else:
            requirement = f"an integer in [{low}, {high}]"
        raise ValueError(f"{name} must be {requirement}, got {value!r}")
    return int(value)


def as_positive_int(name: str, value) -> int:
    """A count of at least 1 (iterations, tokens, vocabulary size, repeats)."""
    return as_int(name, value, low=1)


def as_non_negative_int(name: str, value) -> int:
    """A count of at least 0 (warm-up runs, seeds)."""
    return as_int(name, value, low=0)


def positive_int_fields(owner, names) -> None:
    """``as_positive_int`` on each of ``owner``'s attributes ``names`` (a dataclass's ``__post_init__``)."""
    for name in names:
        as_positive_int(name, getattr(owner, name))
