"""Benchmark: vectorised simulators against a straightforward per-iteration Python loop doing the same work.

``python -m sims.throughput [--out FILE.json]`` measures simulated draft tokens per second for the token-level
simulator (V = 1000) and the i.i.d. acceptance process, each against a loop that runs one iteration at a
time with numpy's own ``Generator.choice`` / ``Generator.random`` per draw. Timings are medians over
``--repeats`` runs after a warm-up; the JSON records the machine, sizes, gamma and repeats.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from plumbing.outputs import write_json
from plumbing.timing import time_repeats
from plumbing.validation import as_positive_int
from sims.acceptance import simulate_iid
from sims.families import contexts_with_alpha
from sims.token_level import residual_weights, simulate_speculative

__all__ = ["loop_token_level", "loop_iid", "main"]


def loop_token_level(
    rng: np.random.Generator, p: np.ndarray, q: np.ndarray, weights: np.ndarray, gamma: int, iterations: int
) -> np.ndarray:
    """Algorithm 1 one iteration and one draw at a time: accepted draft tokens per iteration.  # [N]"""
    vocabulary = p.shape[1]
    accepted = np.empty(iterations, dtype=np.int64)
    for n in range(iterations):
        contexts = rng.choice(len(weights), size=gamma + 1, p=weights)
        count = 0
        for i in range(gamma):
            k = contexts[i]
            x = rng.choice(vocabulary, p=q[k])
            if rng.random() < min(1.0, p[k, x] / q[k, x]):
                count += 1
                continue
            residual = residual_weights(p[k], q[k])
            rng.choice(vocabulary, p=residual / residual.sum())
            break
        else:
            rng.choice(vocabulary, p=p[contexts[gamma]])
        accepted[n] = count
    return accepted


def loop_iid(rng: np.random.Generator, alpha: float, gamma: int, iterations: int) -> np.ndarray:
    """i.i.d. Bernoulli(alpha) acceptance one position at a time: accepted draft tokens.  # [N]"""
    accepted = np.empty(iterations, dtype=np.int64)
    for n in range(iterations):
        count = 0
        while count < gamma and rng.random() < alpha:
            count += 1
        accepted[n] = count
    return accepted


def _case(name: str, draft_tokens_vectorised: int, vectorised, draft_tokens_loop: int, loop, repeats: int) -> dict:
    vectorised_timing = time_repeats(vectorised, repeats=repeats, warmup=1)
    loop_timing = time_repeats(loop, repeats=repeats, warmup=1)
    vectorised_rate = draft_tokens_vectorised / vectorised_timing.median
    loop_rate = draft_tokens_loop / loop_timing.median
    return {
        "case": name,
        "vectorised_draft_tokens_per_second": vectorised_rate,
        "loop_draft_tokens_per_second": loop_rate,
        "speedup": vectorised_rate / loop_rate,
        "vectorised_draft_tokens": draft_tokens_vectorised,
        "loop_draft_tokens": draft_tokens_loop,
        "vectorised_timing": vectorised_timing.as_dict(),
        "loop_timing": loop_timing.as_dict(),
    }


def run_benchmark(
    *,
    vocabulary: int = 1000,
    contexts: int = 64,
    gamma: int = 4,
    alpha: float = 0.8,
    iterations: int = 200_000,
    loop_iterations: int = 2_000,
    repeats: int = 5,
    seed: int = 0,
) -> dict:
    """Both cases; returns the JSON document."""
    rng = np.random.default_rng(seed)
    table = contexts_with_alpha(rng, vocabulary, contexts, alpha)
    cases = [
        _case(
            "token-level",
            iterations * gamma,
            lambda: simulate_speculative(rng, table, gamma, iterations),
            loop_iterations * gamma,
            lambda: loop_token_level(rng, table.p, table.q, table.weights, gamma, loop_iterations),
            repeats,
        ),
        _case(
            "iid acceptance",
            10 * iterations * gamma,
            lambda: simulate_iid(rng, alpha, gamma, 10 * iterations),
            10 * loop_iterations * gamma,
            lambda: loop_iid(rng, alpha, gamma, 10 * loop_iterations),
            repeats,
        ),
    ]
    return {
        "benchmark": "sims.throughput",
        "cases": cases,
        "settings": {
            "vocabulary": vocabulary,
            "contexts": contexts,
            "gamma": gamma,
            "alpha": table.alpha(),
            "iterations": iterations,
            "loop_iterations": loop_iterations,
            "repeats": repeats,
            "seed": seed,
            "timing": "median of repeats after one warm-up, time.perf_counter",
        },
    }


def main(argv=None) -> int:
    """``python -m sims.throughput [--out FILE.json] [--repeats N] [--seed S]``."""
    parser = argparse.ArgumentParser(prog="python -m sims.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the JSON document here as well as printing a summary")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    document = run_benchmark(repeats=as_positive_int("repeats", args.repeats), seed=args.seed)
    for case in document["cases"]:
        print(
            f"{case['case']:>15}: vectorised {case['vectorised_draft_tokens_per_second']:.3g} draft tokens/s, "
            f"loop {case['loop_draft_tokens_per_second']:.3g} draft tokens/s, {case['speedup']:.0f}x"
        )
    if args.out:
        write_json(args.out, document, command="python -m sims.throughput " + " ".join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
