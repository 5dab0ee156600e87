"""The statistical audit's tests of independence between positions, their power, and the one-uniform-per-row
randomness that plants dependence (docs/theory.md §8).

Power tests feed the dependence tests PIT values with exactly the dependence ``detectable_correlation`` /
``detectable_mean_correlation`` promise to detect with 90% probability, and require >= 80 rejections in
100 seeded trials: at 90% power a count below 80 has probability < 0.002.
"""

import numpy as np
import pytest
import torch
from scipy import stats

from decoders.audit.exact import Enumerator
from decoders.audit.mutants import OneUniformPerRow
from decoders.audit.setups import tiny_target
from decoders.audit.statistical import (
    audit_sampler,
    conditionals,
    dependence_p_values,
    detectable_correlation,
    detectable_mean_correlation,
)
from decoders.randomness import TorchRandomness
from decoders.sampling import Sampling

LEVEL, N, HORIZON, TESTS = 0.01, 5000, 8, 200


def gaussian_copula(rng, n, correlation: np.ndarray) -> np.ndarray:
    """``[n, T]`` uniforms whose normal scores have the given correlation matrix."""
    z = rng.standard_normal((n, len(correlation))) @ np.linalg.cholesky(correlation).T
    return stats.norm.cdf(z)


def rejected(u, tests) -> tuple[bool, bool]:
    pair_p, row_p, _ = dependence_p_values(u)
    return tests * pair_p.min() < LEVEL, tests * row_p < LEVEL


def test_pair_test_power_at_detectable_correlation():
    """Two positions (the first and the last) correlated at exactly ``detectable_correlation``."""
    rho = detectable_correlation(N, TESTS, LEVEL)
    correlation = np.eye(HORIZON)
    correlation[0, -1] = correlation[-1, 0] = rho
    rng = np.random.default_rng(0)
    hits = sum(rejected(gaussian_copula(rng, N, correlation), TESTS)[0] for _ in range(100))
    print(f"pair test at rho = {rho:.4f}: {hits}/100")
    assert hits >= 80


def test_row_test_power_at_detectable_mean_correlation():
    """Every pair correlated at ``detectable_mean_correlation``, each far below what the pair test sees."""
    rho = detectable_mean_correlation(N, TESTS, LEVEL, HORIZON)
    correlation = np.full((HORIZON, HORIZON), rho) + (1 - rho) * np.eye(HORIZON)
    rng = np.random.default_rng(1)
    outcomes = [rejected(gaussian_copula(rng, N, correlation), TESTS) for _ in range(100)]
    rows, pairs = sum(row for _, row in outcomes), sum(pair for pair, _ in outcomes)
    print(f"row test at mean rho = {rho:.4f}: {rows}/100 (pair test {pairs}/100)")
    assert rows >= 80 and pairs < rows


def test_dependence_tests_false_positives_against_binomial_interval():
    """Independent uniforms: over 1000 seeded trials the pair and row tests at Bonferroni level 0.01 each
    reject within the 99% binomial interval of Bin(1000, 0.01) or below it."""
    rng = np.random.default_rng(2)
    outcomes = [rejected(rng.random((1000, 6)), 6 * 5 // 2 + 1) for _ in range(1000)]
    high = stats.binom.interval(0.99, 1000, 0.01)[1]
    assert sum(pair for pair, _ in outcomes) <= high and sum(row for _, row in outcomes) <= high


def copying_sampler(target, horizon):
    """Draws the first token from the target and repeats it at every later position: each position's
    marginal is exact on an order-0 target, only the dependence is wrong."""

    def sample(n, generator):
        p = conditionals(target, [1, 2], torch.zeros(1, 1, dtype=torch.int64), Sampling(1.0))[0, 0]
        return TorchRandomness(generator).categorical(p.expand(n, -1))[:, None].expand(n, horizon)

    return sample


def test_copied_positions_caught_only_by_the_dependence_tests_against_the_old_audit():
    """On an order-0 target with V = 64 at n = 20,000 the joint-law test covers one token (64^2 * 5 > n) and
    the per-position tests see exact marginals: the audit's old tests all pass, the pair tests refute it."""
    target = tiny_target("order0", 64, dtype=torch.float32)
    report = audit_sampler(copying_sampler(target, 4), target, [1, 2], Sampling(1.0), n=20_000, horizon=4, seed=0)
    old = {name: p for name, p in report.test_p_values.items() if name.startswith(("pit_", "joint", "support"))}
    assert report.joint_tokens == 1 and min(old.values()) > LEVEL, old
    assert report.test_p_values["pairs_id"] < 1e-100 and not report.passed
    assert report.strongest_pairs["id"][2] > 0.9  # copies: normal scores almost perfectly correlated


def test_one_uniform_per_row_against_its_definition():
    """Exact law over the enumerator: two draws from the same p give the same token with probability p(i),
    and a bernoulli after them is decided by the same uniform (U < 0.5 exactly when the token is the first
    of a two-token law split at 0.5)."""
    p = torch.tensor([[0.2, 0.3, 0.5]], dtype=torch.float64)
    law, scripts = {}, [()]
    while scripts:
        enumerator = Enumerator([scripts.pop()])
        source = OneUniformPerRow(enumerator)
        outcome = (
            int(source.categorical(p)),
            int(source.categorical(p)),
            bool(source.bernoulli(torch.tensor([0.5], dtype=torch.float64))),
        )
        law[outcome] = law.get(outcome, 0.0) + enumerator.probability[0]
        scripts.extend(script for _, script in enumerator.branches)
    assert law == pytest.approx({(0, 0, True): 0.2, (1, 1, True): 0.3, (2, 2, False): 0.5}, abs=1e-15)


def test_one_uniform_per_row_marginal_against_its_probabilities():
    """Over seeded draws each row's draws agree, and the first draw has the law p (chi-square, seed 0;
    fails a correct source with probability 1e-6)."""
    p = torch.tensor([0.1, 0.6, 0.3], dtype=torch.float64).expand(100_000, -1)
    source = OneUniformPerRow(TorchRandomness(torch.Generator().manual_seed(0)))
    first, second = source.categorical(p), source.categorical(p)
    assert torch.equal(first, second)
    counts = torch.bincount(first, minlength=3).numpy()
    assert stats.chisquare(counts, 100_000 * np.array([0.1, 0.6, 0.3])).pvalue > 1e-6
