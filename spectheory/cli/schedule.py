"""Draft length per batch size from cost profiles measured at several batch sizes (docs/theory.md §13): for each
profile (`spectheory profile --batch-size B --out FILE`) the cost model's optimal gamma at that batch size and the
speedup it predicts, printed as the engines take it: vLLM-style ranges of batch sizes with their
`num_speculative_tokens`, TensorRT-LLM's `draft_len_schedule` and SGLang-style candidate steps per batch size."""

from __future__ import annotations

import argparse
import json

from spectheory.cli.calibrated import load_profile
from spectheory.costs import CostProfile
from spectheory.validation import as_positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--costs", nargs="+", required=True, metavar="PROFILE",
                        help="cost profiles written by `spectheory profile --out`, one per batch size")
    parser.add_argument("--tokens", type=int, help="new tokens per sequence: the prefill costs count (default: per token)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def schedule(profiles: dict, tokens: int | None = None) -> list[dict]:
    """{batch size: CostProfile} -> per batch size, ascending: the optimal gamma and its predicted speedup."""
    rows = []
    for batch, profile in sorted(profiles.items()):
        gamma = profile.optimal_gamma(tokens=tokens)
        rows.append({"batch_size": batch, "gamma": gamma, "speedup": profile.speedup(gamma, tokens=tokens),
                     "gamma_max": profile.gamma_max})
    return rows


def engine_settings(rows: list[dict]) -> dict:
    """The schedule in the engines' words: ranges of batch sizes (up to the next measured size - 1, the last open)
    with their length, a {batch size: length} table, and SGLang-style candidates (the length and its neighbours)."""
    ranges = [[row["batch_size"], nxt["batch_size"] - 1, row["gamma"]] for row, nxt in zip(rows, rows[1:])]
    ranges.append([rows[-1]["batch_size"], None, rows[-1]["gamma"]])
    candidates = {row["batch_size"]: sorted({max(row["gamma"] - 2, 0), row["gamma"], min(row["gamma"] + 2,
                                                                                          row["gamma_max"])})
                  for row in rows}
    return {"num_speculative_tokens_per_batch_size": ranges,
            "draft_len_schedule": {row["batch_size"]: row["gamma"] for row in rows},
            "sglang_candidate_steps": candidates}


def run(args: argparse.Namespace) -> int:
    tokens = None if args.tokens is None else as_positive_int("tokens", args.tokens)
    profiles = {}
    for path in args.costs:
        profile = CostProfile.from_dict(load_profile(path)["profile"])
        if profile.batch_size in profiles:
            raise ValueError(f"two cost profiles at batch size {profile.batch_size} (second: {path!r})")
        profiles[profile.batch_size] = profile
    rows = schedule(profiles, tokens)
    settings = engine_settings(rows)
    if args.json:
        print(json.dumps({"rows": rows, **settings}, indent=2, allow_nan=False))
        return 0
    for row in rows:
        print(f"batch {row['batch_size']}: gamma {row['gamma']} (predicted {row['speedup']:.3f}x)")
    print(f"vLLM num_speculative_tokens_per_batch_size (min, max, k): {settings['num_speculative_tokens_per_batch_size']}")
    print(f"TensorRT-LLM draft_len_schedule: {settings['draft_len_schedule']}")
    print(f"SGLang candidate steps per batch size: {settings['sglang_candidate_steps']}")
    return 0
