"""Time ``audit_sampler`` on the reference speculative decoder with the tiny models (the goal: n = 100,000
sequences of 16 tokens in under 60 s on 2 CPU cores), or with ``--shipped-cost`` the audit's own cost on
the shipped pair against one batched forward pass of the target over the same sequences.

    python -m decoders.audit.throughput --out results/audit_bench.json
    python -m decoders.audit.throughput --shipped-cost --n 20000 --out results/audit_cost.json

Both write every run's seconds with the settings that produced them (device, threads, batch size, gamma,
temperature, n, horizon) and print a one-line summary. The cost benchmark samples once, then times, in
turn and ``--runs`` times each, the audit of those samples (conditionals of target and draft, PIT and
tests: everything but the sampler) and the target's forward pass over the same prompt + continuation
sequences in the audit's chunks; it reports the ratio per run and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import torch

from decoders import zoo
from decoders.audit.runs import SHIPPED_BATCH, SHIPPED_PROMPT
from decoders.audit.setups import sampler, speculative_run, tiny_draft, tiny_target
from decoders.audit.statistical import CHUNK, audit_sampler
from decoders.bench.bench import environment
from decoders.models.corpus import encode
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig
from plumbing.outputs import check_writable, write_json
from plumbing.timing import Timing, time_interleaved

PROMPT = [1, 2]


def run(n: int, horizon: int, gamma: int, temperature: float, batch: int, runs: int) -> dict:
    target = tiny_target("tinygpt", 5, dtype=torch.float32)
    draft = tiny_draft("tabular", target, dtype=torch.float32)
    config = SpeculativeConfig(gamma, Sampling(temperature))
    sample = sampler(speculative_run(target, draft, PROMPT, config, horizon), PROMPT, horizon, batch=batch)
    reports = [
        audit_sampler(sample, target, PROMPT, config.sampling, n=n, horizon=horizon, seed=seed, draft=draft)
        for seed in range(runs)
    ]
    timing = Timing(tuple(report.seconds for report in reports))
    return {
        "benchmark": "audit_sampler, reference speculative decoder",
        "environment": environment("cpu", torch.float32),
        "target": "tinygpt (d_model 16, 1 layer), V = 5, float32",
        "draft": "tabular order 1",
        "n": n,
        "horizon": horizon,
        "gamma": gamma,
        "temperature": temperature,
        "batch_size": batch,
        "runs": runs,
        **timing.as_dict(),
        "passed": [report.passed for report in reports],
        "p_values": [report.p_value for report in reports],
        "detectable_tv": reports[0].detectable_tv,
    }


def shipped_cost(n: int, horizon: int, gamma: int, temperature: float, runs: int) -> dict:
    """The audit's own seconds against the target's forward pass over its samples (module docstring)."""
    target, draft = zoo.load_target(), zoo.load_draft("transformer")
    prompt = encode(SHIPPED_PROMPT).tolist()
    config = SpeculativeConfig(gamma, Sampling(temperature))
    sample = sampler(speculative_run(target, draft, prompt, config, horizon), prompt, horizon, batch=SHIPPED_BATCH)
    started = time.perf_counter()
    tokens = sample(n, torch.Generator().manual_seed(0))  # [n, horizon]
    sampling_seconds = time.perf_counter() - started
    sequences = torch.cat([torch.tensor(prompt).expand(n, -1), tokens], dim=1)  # [n, L + horizon]
    reports = []

    def audit():
        reports.append(
            audit_sampler(
                lambda size, generator: tokens,
                target,
                prompt,
                config.sampling,
                n=n,
                horizon=horizon,
                seed=0,
                draft=draft,
            )
        )

    @torch.no_grad()
    def forward():
        for chunk in sequences.split(CHUNK):
            target.forward(chunk, target.new_state(len(chunk), chunk.shape[1]))

    timings = time_interleaved({"audit": audit, "target_forward": forward}, repeats=runs, warmup=0)
    ratios = [a / f for a, f in zip(timings["audit"].seconds, timings["target_forward"].seconds)]
    return {
        "benchmark": "the audit's own work against one batched target forward pass, shipped pair",
        "environment": environment("cpu", torch.float32),
        "target": "shipped",
        "draft": "transformer",
        "n": n,
        "horizon": horizon,
        "gamma": gamma,
        "temperature": temperature,
        "batch_size": SHIPPED_BATCH,
        "chunk": CHUNK,
        "runs": runs,
        "sampling_seconds": sampling_seconds,
        "audit_seconds": timings["audit"].as_dict(),
        "target_forward_seconds": timings["target_forward"].as_dict(),
        "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "runs": ratios},
        "peak_resident_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "passed": [report.passed for report in reports],
        "p_values": [report.p_value for report in reports],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--gamma", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=8192, help="sequences per decoder call")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shipped-cost", action="store_true", help="the audit's own cost on the shipped pair")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args()
    if args.out:
        check_writable(args.out)
    command = "python -m decoders.audit.throughput " + " ".join(sys.argv[1:])
    if args.shipped_cost:
        result = shipped_cost(args.n, args.horizon, args.gamma, args.temperature, args.runs)
        print(
            f"audit of n = {args.n}, horizon {args.horizon} on the shipped pair: own work "
            f"{result['audit_seconds']['median_seconds']:.1f} s, target forward "
            f"{result['target_forward_seconds']['median_seconds']:.1f} s, ratio {result['ratio']['median']:.2f} "
            f"(runs {result['ratio']['min']:.2f}..{result['ratio']['max']:.2f}); peak resident "
            f"{result['peak_resident_bytes'] / 2**30:.2f} GiB"
        )
    else:
        result = run(args.n, args.horizon, args.gamma, args.temperature, args.batch, args.runs)
        print(
            f"audit_sampler n = {args.n}, horizon {args.horizon}: median {result['median_seconds']:.1f} s over "
            f"{args.runs} runs on {result['environment']['cpu_count']} CPU cores "
            f"({result['environment']['torch_threads']} torch threads)"
        )
    if args.out:
        write_json(args.out, result, command=command)


if __name__ == "__main__":
    main()
