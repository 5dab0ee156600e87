"""Auditing an engine's speculative sampler (docs/engines.md): at temperature 0, its greedy tokens with
speculation against its own plain greedy decoding, gamma by gamma; at temperature > 0, its samples with
speculation against a second sample (the same engine without speculation, a second server, or a file) by
the two-sample test, with disjoint seeds (llama.cpp's samples under one seed are coupled across the two
paths, so two files drawn with the same seeds are not independent samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decoders.audit.two_sample import TwoSampleReport, two_sample_test
from decoders.engines.base import END, Engine, EngineRun, EngineSampling
from decoders.engines.llama_cpp import LlamaCppEngine

__all__ = ["GreedyCheck", "greedy_checks", "diagnose_difference", "numeric_tv", "against_model", "check_model_law",
           "batch_shape_difference", "as_categories", "compare_runs", "SECOND_SIDE_SEED"]

#: Seeds of the second side start here, so that the two sides never share one (module docstring).
SECOND_SIDE_SEED = 1 << 30


@dataclass(frozen=True)
class GreedyCheck:
    """At one gamma: the engine's greedy tokens with speculation equal its plain ones; if not, the first
    difference and, where the engine gives logits, its diagnosis (``diagnose_difference``)."""

    gamma: int
    tokens: int
    equal: bool
    first_difference: int | None
    counters: dict
    diagnosis: dict | None = None

    def as_dict(self) -> dict:
        return {"gamma": self.gamma, "tokens": self.tokens, "equal": self.equal,
                "first_difference": self.first_difference, "counters": self.counters, "diagnosis": self.diagnosis}


def diagnose_difference(logits_after, prompt_ids: list, plain: tuple, speculative: tuple, position: int) -> dict:
    """Why greedy decoding with speculation left plain greedy decoding at ``position``: the logit margin of the
    plain token over the speculative one after the same history, fed one token per call, once with the last call
    of one token (the plain path) and once of two, that token and the next (a gamma = 1 verify call), by
    ``logits_after(chunks, row)``. Opposite signs mean each path took its own argmax of a near tie that the
    call's batch shape decides: numerics, not a sampler bug. The same sign means the speculative path emitted
    a token its own evaluation does not rank first: a bug."""
    history = [[token] for token in plain[:position]]
    last = history.pop() if history else [prompt_ids[-1]]
    head = [prompt_ids] if history or position else [prompt_ids[:-1]]
    ours, theirs = plain[position], speculative[position]
    one = logits_after(head + history + [last])
    two = logits_after(head + history + [last + [theirs]], row=-2)
    margins = (float(one[ours] - one[theirs]), float(two[ours] - two[theirs]))
    numerics = margins[0] >= 0 >= margins[1]
    return {"position": position, "plain_token": ours, "speculative_token": theirs, "margin_one_token": margins[0],
            "margin_two_tokens": margins[1], "verdict": "batch-shape numerics (a near tie whose order flips between "
            "a one-token and a two-token call)" if numerics else "unexplained by numerics: a bug"}


def greedy_checks(engine: Engine, prompt: str, horizon: int, gammas, progress=None) -> tuple[tuple, list]:
    """(the plain greedy row, a ``GreedyCheck`` per gamma): one continuation of ``horizon`` tokens each, every
    difference diagnosed where the engine gives its logits (in-process llama.cpp)."""
    greedy = EngineSampling(temperature=0.0)
    plain = engine.generate(prompt, 1, horizon, greedy, speculate=0).rows[0]
    checks = []
    for gamma in gammas:
        run = engine.generate(prompt, 1, horizon, greedy, speculate=gamma)
        row = run.rows[0]
        differ = [i for i, (a, b) in enumerate(zip(row, plain)) if a != b]
        diagnosis = diagnose_difference(engine.logits_after, engine.tokenize(prompt), plain, row, differ[0]) \
            if differ and isinstance(engine, LlamaCppEngine) else None
        checks.append(GreedyCheck(gamma, horizon, not differ, differ[0] if differ else None, run.counters, diagnosis))
        if progress:
            progress(1)
    return plain, checks


def numeric_tv(engine_logits: np.ndarray, our_logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Per position, the total variation between the engine's and our model's laws at ``temperature`` from
    their logits ``[S, V]``: what the numeric difference alone (quantized kernels against float32) costs."""
    def softmax(logits):
        scaled = logits / temperature
        weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)
    return 0.5 * np.abs(softmax(engine_logits) - softmax(our_logits)).sum(axis=-1)


def batch_shape_difference(engine: LlamaCppEngine, prompt_ids: list, tokens: list, chunk: int = 5) -> dict:
    """llama.cpp's logits at the positions of ``tokens`` after ``prompt_ids``, evaluated one token per call (the
    plain path) and ``chunk`` tokens per call (verify calls): the largest logit difference per position and the
    total variation of the two laws at T = 1, which bounds how exactly speculation can keep the plain law."""
    sequence = [prompt_ids[-1]] + list(tokens[:-1])  # position i of the result predicts tokens[i]
    head = [list(prompt_ids[:-1])]

    def logits(size):
        chunks = head + [sequence[i:i + size] for i in range(0, len(sequence), size)]
        engine.logits_after(chunks)
        return np.array(engine.llama(True).scores[len(prompt_ids) - 1:len(prompt_ids) - 1 + len(sequence)],
                        dtype=np.float64)
    one, batched = logits(1), logits(chunk)
    tv = numeric_tv(one, batched)
    return {"chunk": chunk, "positions": len(sequence), "tv_at_t1": tv.tolist(), "tv_median": float(np.median(tv)),
            "tv_max": float(tv.max()), "max_logit_difference": np.abs(one - batched).max(axis=1).tolist()}


def as_categories(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Rows of two samples (ids or text pieces, ``END``-padded) as int64 category arrays ``[n, T]``, one code
    per distinct token over both."""
    codes: dict = {}
    encode = np.vectorize(lambda token: codes.setdefault(token, len(codes)), otypes=[np.int64])
    return encode(np.array(a, dtype=object)), encode(np.array(b, dtype=object))


def compare_runs(a: EngineRun, b: EngineRun, level: float) -> TwoSampleReport:
    """The two-sample test of two engine runs' rows."""
    left, right = as_categories(a.rows, b.rows)
    return two_sample_test(left, right, level)


def check_model_law(sampling: EngineSampling) -> None:
    """Refuse sampling parameters under which our sampler's law is not llama.cpp's (one line at the CLI)."""
    if sampling.min_p or sampling.repeat_penalty != 1.0 or (sampling.top_p < 1.0 and sampling.temperature != 1.0):
        raise ValueError("--against model needs a law our sampler computes in llama.cpp's order: no --min-p, no "
                         "--repeat-penalty, and --top-p only at temperature 1 (llama.cpp truncates before the "
                         "temperature, we after); compare with --against plain instead")


def against_model(engine, target, prompt: str, run: EngineRun, sampling: EngineSampling, *, level: float,
                  seed: int) -> dict:
    """The engine's samples (ids, in-process) audited against our model ``target`` of the same weights by the
    statistical audit (docs/theory.md §8), beside what the numeric difference alone costs: the total
    variation between the two laws along the prompt's last position and the engine's greedy continuation."""
    import torch

    from decoders.audit.samples import EngineSamples
    from decoders.audit.statistical import audit_sampler
    from decoders.sampling import Sampling

    check_model_law(sampling)
    if any(END in row for row in run.rows):
        raise ValueError("a sample ended (end of sequence) before the horizon: lower --horizon for --against model")
    ids = engine.tokenize(prompt)
    horizon = len(run.rows[0])
    greedy = engine.generate(prompt, 1, horizon, EngineSampling(0.0)).rows[0]
    sequence = list(ids) + [token for token in greedy if token != END]
    with torch.no_grad():
        ours = target.forward(torch.tensor([sequence]), target.new_state(1, len(sequence)))[0].double().numpy()
    scores = engine.all_logits(sequence)
    tv = numeric_tv(scores[len(ids) - 1:len(sequence) - 1], ours[len(ids) - 1:len(sequence) - 1],
                    max(sampling.temperature, 1e-6))
    tokens = torch.tensor([list(row) for row in run.rows], dtype=torch.int64)
    ours_sampling = Sampling(sampling.temperature, sampling.top_k or None,
                             None if sampling.top_p >= 1.0 else sampling.top_p)
    report = audit_sampler(EngineSamples(tuple(ids), tokens).sampler(), target, list(ids), ours_sampling,
                           n=len(tokens), horizon=horizon, seed=seed, level=level)
    return {"numeric_tv": tv.tolist(), "audit": report.as_dict(), "passed": report.passed,
            "detectable_tv": report.as_dict().get("detectable_tv")}
