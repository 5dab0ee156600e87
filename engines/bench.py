"""llama.cpp's speed with and without speculation, measured and predicted (docs/engines.md, "Bench").

Greedy decoding of the same prompts, plainly and with prompt lookup at each gamma, timed interleaved over
repeats (medians, min-max spread). The speedup is plain decode seconds over speculative decode seconds for the
same tokens (prefill apart: both paths prefill alike, and a prompt's prefill is reported beside).

The prediction is the cost model of docs/theory.md §10 with the engine's own costs, measured apart from the
runs it predicts: t_step, one plain decode step (the plain runs' decode seconds per token); t_verify(k), one
``Llama.eval`` of k tokens on the speculating instance (``logits_all``, as its loop runs); t_sample, one
``Llama.sample`` (paid once per emitted token); t_lookup, one prompt-lookup call. From the speculative runs
it takes only what a cost model needs of the text: the distribution of proposal lengths m (prompt lookup
proposes fewer than gamma tokens, or none, where the text has no match) and the tokens per iteration
(accepted + 1). An iteration then costs t_lookup + E[t_verify(m + 1)] + E[tokens] t_sample, and the predicted
speedup is E[tokens] t_step / that (``spectheory.costs.calibrated_speedup``).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from engines.base import EngineSampling
from engines.llama_cpp import LlamaCppEngine, _add_counters
from spectheory.costs import calibrated_speedup
from spectheory.optimum import best_choice
from spectheory.timing import host
from spectheory.validation import as_int

__all__ = ["engine_bench", "engine_bench_lines", "measure_engine_costs", "server_bench"]

GREEDY = EngineSampling(temperature=0.0)


def _median_seconds(call, repeats: int = 7) -> float:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def measure_engine_costs(engine: LlamaCppEngine, prompt_ids: list, max_tokens: int) -> dict:
    """t_verify(k) for k = 1..``max_tokens``, t_sample and t_lookup in seconds, after ``prompt_ids`` (module
    docstring); each the median of 7 calls, k interleaved."""
    llama = engine.llama(True)
    llama.reset()
    llama.eval(list(prompt_ids))
    base = llama.n_tokens
    extra = list(prompt_ids[-max_tokens:])  # tokens to evaluate: any ids of the text serve

    def verify(k):
        llama.n_tokens = base
        llama.eval(extra[:k])
    verify(1)  # warm
    t_verify = [_median_seconds(lambda k=k: verify(k)) for k in range(1, max_tokens + 1)]
    llama.n_tokens = base
    llama.eval(extra[:1])
    sampler_args = dict(top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, temp=0.0, repeat_penalty=1.0)
    t_sample = _median_seconds(lambda: llama.sample(idx=llama.n_tokens - 1, **sampler_args), repeats=21)
    lookup = engine._draft(max_tokens - 1, [])
    history = np.asarray(list(prompt_ids) + extra, dtype=np.intc)
    t_lookup = _median_seconds(lambda: lookup(history), repeats=21)
    return {"t_verify": t_verify, "t_sample": t_sample, "t_lookup": t_lookup, "context": base}


def _decode_all(engine: LlamaCppEngine, prompts: list, tokens: int, gamma: int) -> dict:
    """Greedy decoding of every prompt at ``gamma`` (0: plain): seconds to the first token and after it, the
    tokens, the counters."""
    out = {"prefill": 0.0, "decode": 0.0, "tokens": 0, "rows": [], "counters": {}}
    for ids in prompts:
        row, counters, to_first, after = engine.generate_ids(ids, tokens, GREEDY, speculate=gamma)
        out["prefill"] += to_first
        out["decode"] += after
        out["tokens"] += len(row)
        out["rows"].append(row)
        out["counters"] = _add_counters(out["counters"], counters) if counters else out["counters"]
    return out


def _spread(values: list) -> list:
    return [min(values), statistics.median(values), max(values)]


def _row(gamma: int, plain: list, runs: list, costs: dict) -> dict:
    """One gamma's measured and predicted speedup (module docstring)."""
    ratios = [p["decode"] / (p["tokens"] - len(p["rows"])) / (r["decode"] / (r["tokens"] - len(r["rows"])))
              for p, r in zip(plain, runs)]  # decode seconds per token after the first, plain over speculative
    counters = runs[0]["counters"]
    rounds = counters["num_drafts"] + counters["rounds_without_draft"]
    per_iteration = 1 + counters["num_accepted_tokens"] / rounds
    lengths = counters["num_draft_tokens"] / rounds  # mean proposal length m, empty rounds included
    verify = sum(count * costs["t_verify"][m] for m, count in enumerate(counters["proposal_length_counts"])) / rounds
    seconds = costs["t_lookup"] + verify + per_iteration * costs["t_sample"]
    t_step = statistics.median(p["decode"] / (p["tokens"] - len(p["rows"])) for p in plain)
    predicted = float(calibrated_speedup(per_iteration, t_step, seconds))
    trials = sum(counters["reached_per_position"])
    alpha = counters["num_accepted_tokens"] / trials if trials else None
    return {"gamma": gamma, "speedup": statistics.median(ratios), "speedup_spread": _spread(ratios),
            "predicted_speedup": predicted, "predicted_over_measured": predicted / statistics.median(ratios),
            "tokens_per_iteration": per_iteration, "mean_proposal_length": lengths, "alpha": alpha,
            "alpha_standard_error": None if alpha is None else float(np.sqrt(alpha * (1 - alpha) / trials)),
            "seconds_per_iteration_predicted": seconds, "counters": counters,
            "greedy_equal_to_plain": runs[0]["rows"] == plain[0]["rows"],
            "decode_seconds": [r["decode"] for r in runs], "tokens_per_second": statistics.median(
                (r["tokens"] - len(r["rows"])) / r["decode"] for r in runs)}


def engine_bench(engine: LlamaCppEngine, prompts: list, *, gammas, max_new_tokens: int, repeats: int,
                 warmup: int = 1, progress=None) -> dict:
    """The bench document of ``engine`` on ``prompts`` (lists of ids): plain and every gamma interleaved per
    repeat, the costs measured first (module docstring)."""
    gammas = [as_int("gammas", g, low=1, high=32) for g in gammas]
    repeats, max_new_tokens = as_int("repeats", repeats, low=1, high=100), as_int("max_new_tokens", max_new_tokens,
                                                                                  low=2, high=1024)
    costs = measure_engine_costs(engine, prompts[0], max(gammas) + 1)
    runs: dict = {0: [], **{g: [] for g in gammas}}
    for repeat in range(warmup + repeats):
        for gamma in runs:
            result = _decode_all(engine, prompts, max_new_tokens, gamma)
            if repeat >= warmup:
                runs[gamma].append(result)
            if progress:
                progress(1)
    plain = runs.pop(0)
    rows = [_row(gamma, plain, runs[gamma], costs) for gamma in gammas]
    recommended = best_choice([{"gamma": 0, "predicted_speedup": 1.0}] + rows, lambda row: row["predicted_speedup"],
                              lambda row: row["gamma"])["gamma"]
    t_step = statistics.median(p["decode"] / (p["tokens"] - len(p["rows"])) for p in plain)
    return {"engine": engine.name, "model": engine.model_path.name, "threads": engine.threads, "temperature": 0.0,
            "batch_size": 1, "dtype": "GGUF quantized (llama.cpp kernels)", "device": "cpu", "repeats": repeats,
            "warmup": warmup, "prompts": len(prompts), "prompt_tokens": [len(p) for p in prompts],
            "max_new_tokens": max_new_tokens, "costs": dict(costs, t_step=t_step),
            "plain": {"tokens_per_second": 1 / t_step, "decode_seconds": [p["decode"] for p in plain],
                      "prefill_seconds": [p["prefill"] for p in plain]},
            "rows": rows, "recommended_gamma": recommended, "environment": host()}


def server_bench(speculating, plain, prompts: list, *, max_new_tokens: int, repeats: int, warmup: int = 1,
                 progress=None) -> dict:
    """Two OpenAI-compatible servers of one model, one speculating and one not (a server's own setting), timed
    on greedy completions of ``prompts`` (texts) interleaved over repeats: seconds per generated token of
    each, end to end (prefill and HTTP included), and their ratio. Servers report no costs, so there is no
    prediction here; the in-process engine has one."""
    repeats = as_int("repeats", repeats, low=1, high=100)
    seconds: dict = {"plain": [], "speculating": []}
    rows: dict = {"plain": None, "speculating": None}
    for repeat in range(warmup + repeats):
        for name, server in (("plain", plain), ("speculating", speculating)):
            runs = [server.generate(prompt, 1, max_new_tokens, GREEDY) for prompt in prompts]
            tokens = sum(run.generated_tokens for run in runs)
            if repeat >= warmup:
                seconds[name].append(sum(run.seconds for run in runs) / tokens)
                rows[name] = [run.rows[0] for run in runs]
            if progress:
                progress(1)
    ratios = [p / s for p, s in zip(seconds["plain"], seconds["speculating"])]
    return {"engine": speculating.name, "against": plain.name, "temperature": 0.0, "batch_size": 1,
            "repeats": repeats, "warmup": warmup, "prompts": len(prompts), "max_new_tokens": max_new_tokens,
            "seconds_per_token": seconds, "speedup": statistics.median(ratios), "speedup_spread": _spread(ratios),
            "greedy_equal": rows["plain"] == rows["speculating"], "environment": host()}


def engine_bench_lines(document: dict) -> list:
    lines = [f"{document['engine']} ({document['model']}, {document['threads']} threads, {document['cpu']}): plain "
             f"{document['plain']['tokens_per_second']:.1f} tokens/s; our reference autoregressive decoder "
             f"{document['ours_tokens_per_second']:.1f} tokens/s on the same model (llama.cpp "
             f"{document['plain']['tokens_per_second'] / document['ours_tokens_per_second']:.2f}x faster per token)"]
    for row in document["rows"]:
        low, _, high = row["speedup_spread"]
        alpha = "n/a" if row["alpha"] is None else f"{row['alpha']:.3f}"
        lines.append(f"gamma {row['gamma']}: measured {row['speedup']:.3f}x ({low:.3f}-{high:.3f}), predicted "
                     f"{row['predicted_speedup']:.3f}x (ratio {row['predicted_over_measured']:.3f}); "
                     f"{row['tokens_per_iteration']:.2f} tokens per call, proposals {row['mean_proposal_length']:.2f} "
                     f"tokens, alpha {alpha}; greedy equal to plain: {row['greedy_equal_to_plain']}")
    gamma = document["recommended_gamma"]
    lines.append("recommended: " + ("do not speculate (gamma 0)" if gamma == 0 else f"gamma {gamma}"))
    return lines
