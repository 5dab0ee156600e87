"""Shared assertions for the simulator tests: agreement within k standard errors, and chi-square laws.

Every check uses a fixed seed in its test, so a result is reproducible; the stated false-positive
probabilities say how often a correct simulator would fail with a fresh seed.
"""

import numpy as np
from scipy import stats

#: Agreement band in standard errors. Two-sided normal tail beyond 4 SE: about 6.3e-5 per comparison.
BAND = 4.0

#: Significance level of the chi-square tests: a correct sampler fails one with probability 1e-4.
CHI_SQUARE_LEVEL = 1e-4


def assert_within_band(estimate, theory, **parameters):
    """|estimate.mean - theory| <= BAND standard errors; the message names the parameters."""
    z = estimate.z_score(float(theory))
    assert abs(z) <= BAND, (
        f"simulated {estimate.mean:.6g} +- {estimate.standard_error:.3g} vs theory "
        f"{float(theory):.6g} (z = {z:+.2f}) at {parameters}"
    )


def chi_square_p_value(observed_counts, expected_law) -> float:
    """Pearson chi-square p-value of counts against a law; counts where the law is 0 give p = 0."""
    observed = np.asarray(observed_counts, dtype=float).ravel()
    law = np.asarray(expected_law, dtype=float).ravel()
    if np.any(observed[law == 0] > 0):
        return 0.0
    keep = law > 0
    expected = law[keep] / law[keep].sum() * observed.sum()
    if keep.sum() < 2:
        return 1.0
    return float(stats.chisquare(observed[keep], expected).pvalue)
