"""Time ``audit_sampler`` on the reference speculative decoder with the tiny models (the issue's goal:
n = 100,000 sequences of 16 tokens in under 60 s on 2 CPU cores).

    python -m decoders.audit.throughput --out results/audit_bench.json

writes every run's seconds with the settings that produced them (device, threads, batch size, gamma,
temperature, n, horizon) and prints a one-line summary.
"""

from __future__ import annotations

import argparse
import sys

import torch

from decoders.audit.setups import sampler, speculative_run, tiny_draft, tiny_target
from decoders.audit.statistical import audit_sampler
from decoders.sampling import Sampling
from decoders.harness.bench import environment
from decoders.speculative import SpeculativeConfig
from spectheory.outputs import write_json
from spectheory.timing import Timing

PROMPT = [1, 2]


def run(n: int, horizon: int, gamma: int, temperature: float, batch: int, runs: int) -> dict:
    target = tiny_target("tinygpt", 5, dtype=torch.float32)
    draft = tiny_draft("tabular", target, dtype=torch.float32)
    config = SpeculativeConfig(gamma, Sampling(temperature))
    sample = sampler(speculative_run(target, draft, PROMPT, config, horizon), PROMPT, horizon, batch=batch)
    reports = [audit_sampler(sample, target, PROMPT, config.sampling, n=n, horizon=horizon, seed=seed, draft=draft)
               for seed in range(runs)]
    timing = Timing(tuple(report.seconds for report in reports))
    return {"benchmark": "audit_sampler, reference speculative decoder",
            "environment": environment("cpu", torch.float32),
            "target": "tinygpt (d_model 16, 1 layer), V = 5, float32", "draft": "tabular order 1",
            "n": n, "horizon": horizon, "gamma": gamma, "temperature": temperature, "batch_size": batch,
            "runs": runs, **timing.as_dict(),
            "passed": [report.passed for report in reports], "p_values": [report.p_value for report in reports],
            "detectable_tv": reports[0].detectable_tv}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--gamma", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=8192, help="sequences per decoder call")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args()
    result = run(args.n, args.horizon, args.gamma, args.temperature, args.batch, args.runs)
    if args.out:
        write_json(args.out, result, command="python -m decoders.audit.throughput " + " ".join(sys.argv[1:]))
    print(f"audit_sampler n = {args.n}, horizon {args.horizon}: median {result['median_seconds']:.1f} s over "
          f"{args.runs} runs on {result['environment']['cpu_count']} CPU cores "
          f"({result['environment']['torch_threads']} torch threads)")


if __name__ == "__main__":
    main()
