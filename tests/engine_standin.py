"""A cheap engine stand-in for the engine tests: a seeded Markov chain over 30 tokens that follows the engine
interface (``decoders.engines.base.Engine``), with the temperature it applies settable apart from the one it is
asked for, so a planted bug (a server asked for T = 1 that samples at T = 0.9) is one argument."""

import numpy as np
import torch

from decoders.engines.base import EngineRun, EngineSampling
from decoders.models.history import HistoryModel

VOCABULARY = 30


class MarkovEngine:
    name = "markov"

    def __init__(
        self, *, applied_temperature: float | None = None, table_seed: int = 123, seconds_per_token: float = 0.0
    ) -> None:
        self.logits = np.random.default_rng(table_seed).normal(size=(VOCABULARY, VOCABULARY)) * 2  # [V, V]
        self.applied_temperature, self.seconds_per_token = applied_temperature, seconds_per_token

    def generate(
        self,
        prompt: str,
        n: int,
        horizon: int,
        sampling: EngineSampling,
        *,
        speculate: int = 0,
        seed: int = 0,
        progress=None,
    ) -> EngineRun:
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
        return EngineRun(
            tuple(tuple(int(x) for x in row) for row in rows), self.seconds_per_token * n * horizon, {}, 0, n * horizon
        )


#: SmolLM2's vocabulary size: the Zipf stand-in has a real vocabulary's shape (most tokens seen once or never).
ZIPF_VOCABULARY = 49_152
#: Per context class, the Zipf exponent of the law over ranks: a flat, a middling and a peaked context.
ZIPF_EXPONENTS = (1.1, 1.6, 2.4)
#: The ranks of the prompt's tokens in every context (what a repetition penalty lowers): likely ones among them.
PROMPT_RANKS = (0, 2, 5, 9, 14, 20, 27, 35)
_STRIDE = 7919  # odd and not a multiple of 3: rank -> token is a bijection of [0, 49152) per class


class ZipfEngine:
    """A cheap engine stand-in with a real vocabulary's shape, for calibrating the two-sample audit where users
    are (many rare tokens, ties in pooled counts). The context of a token is the class of the token before it
    (its id mod 3; the prompt's class is 0); in class k the law over ranks r = 0..V-1 has logits
    12 - s_k log(r + 1) (a Zipf law, exponent s_k), and rank r is token (r * 7919 + 16,381 k) mod V. The
    sampling parameters act as llama.cpp's do on those logits: the repetition penalty on the prompt's tokens
    (``PROMPT_RANKS``; divided where positive, multiplied where negative), then top-p, then the temperature.
    Each ``applied_*`` replaces the one asked for: a planted bug is one argument. ``laws`` gives the exact law
    per class, so a test knows the deviation it plants."""

    name = "zipf"

    def __init__(
        self,
        *,
        applied_temperature: float | None = None,
        applied_top_p: float | None = None,
        applied_repeat_penalty: float | None = None,
        vocabulary: int = ZIPF_VOCABULARY,
    ) -> None:
        self.applied = (applied_temperature, applied_top_p, applied_repeat_penalty)
        self.vocabulary = vocabulary
        ranks = np.arange(vocabulary)
        self.tokens = np.stack([(ranks * _STRIDE + 16_381 * k) % vocabulary for k in range(3)])  # [3, V]

    def laws(self, sampling: EngineSampling) -> np.ndarray:
        """The law over ranks per context class ``[3, V]`` under ``sampling`` with the applied overrides."""
        temperature, top_p, penalty = (
            applied if applied is not None else asked
            for applied, asked in zip(self.applied, (sampling.temperature, sampling.top_p, sampling.repeat_penalty))
        )
        logits = 12.0 - np.log1p(np.arange(self.vocabulary))[None, :] * np.array(ZIPF_EXPONENTS)[:, None]  # [3, V]
        prompt = list(PROMPT_RANKS)
        logits[:, prompt] = np.where(logits[:, prompt] > 0, logits[:, prompt] / penalty, logits[:, prompt] * penalty)
        laws = []
        for row in logits:
            order = np.argsort(-row, kind="stable")
            probs = np.exp(row - row.max())
            probs /= probs.sum()
            kept = np.zeros(self.vocabulary, dtype=bool)
            kept[order[: int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1]] = True  # smallest set >= top_p
            scaled = np.where(kept, np.exp((row - row.max()) / max(temperature, 1e-3)), 0.0)
            laws.append(scaled / scaled.sum())
        return np.array(laws)

    def generate(
        self,
        prompt: str,
        n: int,
        horizon: int,
        sampling: EngineSampling,
        *,
        speculate: int = 0,
        seed: int = 0,
        progress=None,
    ) -> EngineRun:
        cdf = np.cumsum(self.laws(sampling), axis=1)  # [3, V]
        rng = np.random.default_rng(seed)
        rows = np.empty((n, horizon), dtype=np.int64)
        context = np.zeros(n, dtype=np.int64)
        for t in range(horizon):
            rank = np.empty(n, dtype=np.int64)
            for k in range(3):
                rows_k = context == k
                rank[rows_k] = np.minimum(
                    np.searchsorted(cdf[k], rng.random(rows_k.sum()) * cdf[k, -1], side="right"), self.vocabulary - 1
                )
            rows[:, t] = self.tokens[context, rank]
            context = rows[:, t] % 3
        if progress:
            progress(n)
        return EngineRun(tuple(map(tuple, rows.tolist())), 0.0, {}, 0, n * horizon)

    def marginals(self, sampling: EngineSampling, horizon: int) -> np.ndarray:
        """The exact law of the token at each position ``[horizon, V]`` (a mixture over the context classes)."""
        laws = self.laws(sampling)  # [3, V] over ranks
        by_token = np.zeros_like(laws)
        for k in range(3):
            by_token[k, self.tokens[k]] = laws[k]  # [3, V] over tokens
        classes, out = np.array([1.0, 0.0, 0.0]), []
        for _ in range(horizon):
            law = classes @ by_token  # [V]
            out.append(law)
            classes = np.array([law[np.arange(self.vocabulary) % 3 == j].sum() for j in range(3)])
        return np.array(out)


class ZipfModel(HistoryModel):
    """The Zipf stand-in's law at T = 1 as a model of the project's protocol (a bigram: the logits after a token
    are those of its class), so that the statistical audit can be calibrated on a 49k vocabulary against exactly
    the law ``ZipfEngine`` samples from after a prompt ending in a token of class 0."""

    def __init__(self, engine: ZipfEngine) -> None:
        super().__init__(engine.vocabulary, dtype=torch.float64)
        ranks = np.log1p(np.arange(engine.vocabulary))[None, :] * np.array(ZIPF_EXPONENTS)[:, None]  # [3, V]
        logits = np.empty_like(ranks)
        for k in range(3):
            logits[k, engine.tokens[k]] = 12.0 - ranks[k]  # by token id
        self.logits = torch.from_numpy(logits)

    def _logits(self, history: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        return self.logits[history.gather(1, ends - 1) % 3]  # [B, S, V]


#: The defects ``DefectiveServer`` can plant, each meant to fail one conformance row kind alone.
DEFECTS = ("law", "seed", "logprobs", "greedy")


class DefectiveServer:
    """A Markov-chain server (``MarkovEngine``'s table, temperature, top-k and top-p applied) that speculates exactly
    (its speculating rows are drawn as its plain ones), with a planted ``defect`` under speculation only: ``law``
    samples at 0.8 times the temperature asked for, ``seed`` ignores the request's seed, ``logprobs`` reports 0.0 for
    every token (llama.cpp #27972's symptom), ``greedy`` emits the runner-up at the third greedy token; and with
    ``refuses`` it refuses min-p under speculation (``check_sampling``)."""

    def __init__(self, defect: str | None = None, *, refuses: bool = False) -> None:
        if defect not in (None, *DEFECTS):
            raise ValueError(f"defect must be one of {DEFECTS}, got {defect!r}")
        self.defect, self.refuses = defect, refuses
        self.name = f"stand-in server ({defect or 'no'} defect)"
        self.logits = MarkovEngine().logits  # [V, V]

    def tokenize(self, prompt: str) -> list:
        return [len(prompt) % VOCABULARY]

    def check_sampling(self, sampling: EngineSampling, speculate: int) -> None:
        if self.refuses and speculate and sampling.min_p:
            raise ValueError("min-p is not sampled under speculation (stand-in)")

    def _law(self, previous: np.ndarray, sampling: EngineSampling, temperature: float) -> np.ndarray:
        logits = self.logits[previous] / temperature  # [n, V]
        if sampling.top_k:
            kth = np.sort(logits, axis=1)[:, -sampling.top_k][:, None]
            logits = np.where(logits >= kth, logits, -np.inf)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        if sampling.top_p < 1:
            order = np.argsort(-probs, axis=1)
            sorted_probs = np.take_along_axis(probs, order, axis=1)
            keep = np.cumsum(sorted_probs, axis=1) - sorted_probs < sampling.top_p
            mask = np.zeros_like(keep)
            np.put_along_axis(mask, order, keep, axis=1)
            probs = np.where(mask, probs, 0.0)
            probs /= probs.sum(axis=1, keepdims=True)
        return probs

    def generate(self, prompt, n, horizon, sampling, *, speculate=0, seed=0, progress=None) -> EngineRun:
        self.check_sampling(sampling, speculate)
        shifted = speculate and self.defect == "law" and sampling.temperature > 0
        temperature = max(sampling.temperature * (0.8 if shifted else 1.0), 1e-3)
        rng = np.random.default_rng() if speculate and self.defect == "seed" else np.random.default_rng(seed)
        rows = np.empty((n, horizon), dtype=np.int64)
        previous = np.full(n, self.tokenize(prompt)[0])
        for t in range(horizon):
            probs = self._law(previous, sampling, temperature)  # [n, V]
            if sampling.temperature == 0:
                ranked = np.argsort(-probs, axis=1)
                rows[:, t] = ranked[:, 1] if speculate and self.defect == "greedy" and t == 2 else ranked[:, 0]
            else:
                rows[:, t] = (rng.random((n, 1)) > np.cumsum(probs, axis=1)).sum(axis=1).clip(max=VOCABULARY - 1)
            previous = rows[:, t]
        counters = {"num_draft_tokens": speculate * n * horizon, "num_accepted_tokens": 0} if speculate else {}
        return EngineRun(tuple(tuple(int(x) for x in row) for row in rows), 0.0, counters, 0, n * horizon)

    def token_logprobs(self, ids, horizon, sampling, *, speculate=0, seed=0, top=2) -> list:
        """[(id, logprob, [(id, logprob)] of the top ``top``)] of the greedy tokens after ``ids``."""
        reported, previous = [], ids[-1]
        for _ in range(horizon):
            logprobs = self.logits[previous] - np.logaddexp.reduce(self.logits[previous])  # [V]
            order = np.argsort(-logprobs)
            token = int(order[0])
            shown = 0.0 if speculate and self.defect == "logprobs" else float(logprobs[token])
            reported.append((token, shown, [(int(t), float(logprobs[t])) for t in order[:top]]))
            previous = token
        return reported
