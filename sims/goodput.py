"""Goodput under concurrency simulated (docs/theory-goodput.md §16): B requests in flight, each of ``length`` new
tokens, a finished request replaced at once by a new one (continuous batching keeps B in flight); every iteration
drafts gamma tokens for each request, accepts a leading run of i.i.d. Bernoulli(alpha) draws and emits it with the
correction token (no more than the request still needs), and costs ``GoodputCosts.iteration_seconds(B, gamma)``
whatever each row emitted. Plain decoding emits one token a request per pass of B tokens. The simulated goodput
speedup is checked against ``spectheory.goodput.goodput_speedup``, which assumes every row emits a whole iteration's
tokens: the last iteration of each request, cut short, is what the closed form leaves out (O(1 / length))."""

from __future__ import annotations

import numpy as np

from plumbing.validation import as_int, as_positive_int, as_probability
from sims._draws import leading_true_count
from sims._stats import Estimate, as_generator
from spectheory.goodput import GoodputCosts

__all__ = ["simulate_goodput"]


def simulate_goodput(
    rng, alpha: float, gamma: int, batch: int, costs: GoodputCosts, *, iterations: int, length: int = 1 << 20
) -> Estimate:
    """The goodput speedup over ``iterations`` iterations of ``batch`` requests of ``length`` new tokens each (module
    docstring), its standard error over the iterations."""
    rng, alpha = as_generator(rng), as_probability("alpha", alpha)
    gamma, batch = as_positive_int("gamma", gamma), as_positive_int("batch", batch)
    iterations, length = as_int("iterations", iterations, low=2), as_positive_int("length", length)
    remaining = np.full(batch, length)  # [B] tokens each request in flight still needs
    emitted = np.empty(iterations)  # [iterations] tokens over the batch
    for i in range(iterations):
        accepted = leading_true_count(rng.random((batch, gamma)) < alpha)  # [B]
        made = np.minimum(accepted + 1, remaining)
        emitted[i] = made.sum()
        remaining = np.where(remaining - made > 0, remaining - made, length)  # a finished request is replaced
    scale = costs.calls(batch) / (batch * costs.iteration_seconds(batch, gamma))  # plain goodput's inverse, per token
    return Estimate(float(emitted.mean() * scale), float(emitted.std(ddof=1) / np.sqrt(iterations) * scale), iterations)
