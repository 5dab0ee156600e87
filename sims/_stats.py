"""Monte-Carlo estimates with standard errors, and the explicit generator every simulator draws from.

Simulators return sufficient statistics (sums over independent units: iterations, or whole streams
when iterations are correlated), so that chunks of a long run combine exactly and the standard error
is always computed over independent units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Estimate", "Moments", "mean_estimate", "ratio_estimate", "as_generator"]


@dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo estimate: ``mean`` with its ``standard_error`` over ``units`` independent units."""

    mean: float
    standard_error: float
    units: int

    def z_score(self, theory: float) -> float:
        """(mean - theory) / standard_error. With a zero standard error (a constant sample) it is 0 when
        the two agree to rounding (1e-12 relative) and infinite otherwise."""
        difference = self.mean - theory
        if self.standard_error > 0:
            return difference / self.standard_error
        if abs(difference) <= 1e-12 * max(1.0, abs(theory)):
            return 0.0
        return float(np.copysign(np.inf, difference))

    def as_dict(self) -> dict:
        return {"mean": self.mean, "standard_error": self.standard_error, "units": self.units}


@dataclass(frozen=True)
class Moments:
    """Sums over independent units of x, y, x^2, y^2 and x y, for mean and ratio estimates.

    ``x`` is the numerator (e.g. tokens of an iteration), ``y`` the denominator (e.g. its cost, or 1).
    Adding two ``Moments`` pools two chunks of units.
    """

    units: int = 0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    yy: float = 0.0
    xy: float = 0.0

    @classmethod
    def of(cls, x, y=None) -> "Moments":
        """Moments of per-unit values ``x: [N]`` and ``y: [N]`` (``y`` = 1 per unit when omitted)."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.ones_like(x) if y is None else np.asarray(y, dtype=np.float64).ravel()
        return cls(len(x), float(x.sum()), float(y.sum()), float(x @ x), float(y @ y), float(x @ y))

    def __add__(self, other: "Moments") -> "Moments":
        return Moments(
            self.units + other.units,
            self.x + other.x,
            self.y + other.y,
            self.xx + other.xx,
            self.yy + other.yy,
            self.xy + other.xy,
        )

    def ratio(self) -> Estimate:
        """sum x / sum y with its delta-method standard error (the mean of x when y = 1)."""
        if self.units < 2 or self.y == 0:
            raise ValueError(
                f"a ratio estimate needs at least 2 units and a non-zero denominator, "
                f"got {self.units} units and sum y = {self.y!r}"
            )
        n = self.units
        ratio = self.x / self.y
        mean_y = self.y / n
        # Sample variance of the residuals x_i - R y_i, from the pooled sums.
        residual_squares = self.xx - 2 * ratio * self.xy + ratio**2 * self.yy
        variance = max(residual_squares, 0.0) / (n - 1)
        return Estimate(ratio, float(np.sqrt(variance / n) / abs(mean_y)), n)


def mean_estimate(samples) -> Estimate:
    """The sample mean of independent ``samples: [N]`` and its standard error."""
    return Moments.of(samples).ratio()


def ratio_estimate(numerators, denominators) -> Estimate:
    """sum(numerators) / sum(denominators) over independent units, with its delta-method SE."""
    return Moments.of(numerators, denominators).ratio()


def as_generator(rng) -> np.random.Generator:
    """The explicit ``numpy.random.Generator`` every simulator draws from (seeds live at the edge)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), got {type(rng).__name__}"
        )
    return rng
