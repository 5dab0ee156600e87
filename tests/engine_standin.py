"""A cheap engine stand-in for the engine tests: a seeded Markov chain over 30 tokens that follows the engine
interface (``engines.base.Engine``), with the temperature it applies settable apart from the one it is
asked for, so a planted bug (a server asked for T = 1 that samples at T = 0.9) is one argument."""

import numpy as np

from engines.base import EngineRun, EngineSampling

VOCABULARY = 30


class MarkovEngine:
    name = "markov"

    def __init__(self, *, applied_temperature: float | None = None, table_seed: int = 123,
                 seconds_per_token: float = 0.0) -> None:
        self.logits = np.random.default_rng(table_seed).normal(size=(VOCABULARY, VOCABULARY)) * 2  # [V, V]
        self.applied_temperature, self.seconds_per_token = applied_temperature, seconds_per_token

    def generate(self, prompt: str, n: int, horizon: int, sampling: EngineSampling, *, speculate: int = 0,
                 seed: int = 0, progress=None) -> EngineRun:
        temperature = max(self.applied_temperature or sampling.temperature, 1e-3)  # T = 0: nearly greedy
        rng = np.random.default_rng(seed)
        rows = np.empty((n, horizon), dtype=np.int64)
        previous = np.full(n, len(prompt) % VOCABULARY)
        for t in range(horizon):
            logits = self.logits[previous] / temperature  # [n, V]
            probs = np.exp(logits - logits.max(axis=1, keepdims=True))
            cdf = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
            rows[:, t] = np.minimum((rng.random((n, 1)) > cdf).sum(axis=1), VOCABULARY - 1)
            previous = rows[:, t]
        if progress:
            progress(n)
        return EngineRun(tuple(tuple(int(x) for x in row) for row in rows), self.seconds_per_token * n * horizon, {}, 0,
                         n * horizon)
