"""Draft length per batch size from cost profiles measured at several batch sizes (docs/theory.md §13): for each
profile (`spectheory profile --batch-size B --out FILE`, or every batch size of a bench's batch sweep,
`spectheory bench --batch-sizes B... --out FILE`) the cost model's optimal gamma at that batch size and the
speedup it predicts, printed as the engines take it: vLLM-style ranges of batch sizes with their
`num_speculative_tokens`, TensorRT-LLM's `draft_len_schedule` and SGLang-style candidate steps per batch size.
From a batch sweep the speedups measured there at its gammas are printed beside."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from plumbing.outputs import strict_loads
from plumbing.validation import as_positive_int, as_real
from spectheory.costs import PROFILE_KIND, CostProfile, batch_schedule, load_profile, schedule_settings
from spectheory.goodput import crossover_batch, goodput_lines, judged_lines, profile_goodput_schedule
from spectheory.optimum import best_choice


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--costs",
        nargs="+",
        required=True,
        metavar="FILE",
        help="cost profiles written by `spectheory profile --out`, one per batch size, or a bench "
        "JSON with a batch sweep (`spectheory bench --batch-sizes ... --out`)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="the batch sweep's temperature to read (default 0; profiles carry their own)",
    )
    parser.add_argument(
        "--tokens", type=int, help="new tokens per sequence: the prefill costs count (default: per token)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        metavar="B",
        help="goodput under concurrency from one batch-1 profile (docs/theory-goodput.md §16): the draft length at "
        "each of these batch sizes, its goodput over plain decoding's and the concurrency where speculation stops "
        "paying (the profile's calls must reach B (gamma + 1) positions: `profile --verify-widths`)",
    )
    parser.add_argument(
        "--against",
        metavar="FILE",
        help="with --concurrency: a bench with a batch sweep (`spectheory bench --batch-sizes ... --out`) whose "
        "measured speedups the goodput forecast is printed beside, row by row",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _sweep(document: dict, path: str, temperature: float) -> list[tuple]:
    """(batch size, profile, {gamma: measured speedup}) of a bench's batch sweep at ``temperature``."""
    sweep = document.get("batches")
    if not isinstance(sweep, dict) or not isinstance(sweep.get("profiles"), dict):
        raise ValueError(
            f"{path!r} is neither a cost profile nor a bench with a batch sweep (`spectheory bench "
            f"--batch-sizes ... --out`)"
        )
    found = [
        (int(batch), CostProfile.from_dict(entries))
        for key, entries in sweep["profiles"].items()
        for batch, at in [key.split(",")]
        if float(at) == temperature
    ]
    if not found:
        temperatures = sorted({float(key.split(",")[1]) for key in sweep["profiles"]})
        raise ValueError(
            f"the batch sweep of {path!r} has no temperature {temperature:g} (it has "
            f"{', '.join(f'{t:g}' for t in temperatures)})"
        )
    return [
        (
            batch,
            profile,
            {
                row["gamma"]: row["speedup"]
                for row in sweep["rows"]
                if row["batch_size"] == batch and row["temperature"] == temperature
            },
        )
        for batch, profile in found
    ]


def _read_bench(path: str) -> dict:
    """The JSON of ``path``; one line naming it where it is missing or malformed."""
    try:
        return strict_loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"--against {path}: cannot read a JSON bench ({error})") from None


def read_costs(paths, temperature: float) -> list[tuple]:
    """(batch size, profile, measured speedups or {}) from each file; one-line errors for a foreign file or a
    batch size given twice."""
    found = []
    for path in paths:
        try:
            document = strict_loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            document = None  # load_profile names what is wrong
        if isinstance(document, dict) and document.get("kind") != PROFILE_KIND and "batches" in document:
            found += _sweep(document, path, temperature)
        else:
            found.append((None, CostProfile.from_dict(load_profile(path)["profile"]), {}))
    seen = set()
    for batch, profile, _ in found:
        size = profile.batch_size if batch is None else batch
        if size in seen:
            raise ValueError(f"two cost profiles at batch size {size} (in {', '.join(map(repr, paths))})")
        seen.add(size)
    return [(profile.batch_size if batch is None else batch, profile, measured) for batch, profile, measured in found]


def _concurrency(args: argparse.Namespace, found: list) -> int:
    """--concurrency: the goodput schedule of one profile and its crossover, in the engines' settings."""
    if len(found) != 1:
        raise ValueError(f"--concurrency reads one batch-1 cost profile, got {len(found)}")
    batch, profile, _ = found[0]
    if batch != 1:
        raise ValueError(f"--concurrency reads a profile measured at batch 1, got batch {batch}")
    choices = profile_goodput_schedule(profile, args.concurrency)
    crossover = crossover_batch(choices)
    rows = [
        {"batch_size": c.batch, "gamma": c.gamma, "speedup": c.speedup, "gamma_max": profile.gamma_max} for c in choices
    ]
    settings = schedule_settings(rows)
    if args.json:
        print(json.dumps({"rows": rows, "crossover": crossover, **settings}, indent=2, allow_nan=False))
        return 0
    print("\n".join(goodput_lines(choices)))
    if args.against:
        measured = {batch: speedups for batch, _, speedups in _sweep(_read_bench(args.against), args.against, 0.0)}
        print("\n".join(judged_lines(profile, measured)))
    print(
        f"vLLM num_speculative_tokens_per_batch_size (min, max, k): {settings['num_speculative_tokens_per_batch_size']}"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    tokens = None if args.tokens is None else as_positive_int("tokens", args.tokens)
    temperature = float(as_real("temperature", args.temperature, low=0.0))
    found = read_costs(args.costs, temperature)
    if args.against and (not args.concurrency or args.json):
        raise ValueError("--against goes with --concurrency, printed as text (not --json)")
    if args.concurrency:
        return _concurrency(args, found)
    rows = batch_schedule({batch: profile for batch, profile, _ in found}, tokens)
    for row in rows:
        measured = next(m for batch, _, m in found if batch == row["batch_size"])
        if measured:
            row.update(
                measured_speedup={str(g): s for g, s in sorted(measured.items())},
                measured_best_gamma=best_choice({0: 1.0, **measured}.items(), lambda m: m[1], lambda m: m[0])[0],
            )
    settings = schedule_settings(rows)
    if args.json:
        print(json.dumps({"rows": rows, **settings}, indent=2, allow_nan=False))
        return 0
    for row in rows:
        measured = (
            ""
            if "measured_speedup" not in row
            else (
                "; measured "
                + ", ".join(f"gamma {g} {s:.3f}x" for g, s in row["measured_speedup"].items())
                + f": best {row['measured_best_gamma']}"
                + (" (none above 1x)" if row["measured_best_gamma"] == 0 else "")
            )
        )
        print(f"batch {row['batch_size']}: gamma {row['gamma']} (predicted {row['speedup']:.3f}x){measured}")
    print(
        f"vLLM num_speculative_tokens_per_batch_size (min, max, k): {settings['num_speculative_tokens_per_batch_size']}"
    )
    print(f"TensorRT-LLM draft_len_schedule: {settings['draft_len_schedule']}")
    print(f"SGLang candidate steps per batch size: {settings['sglang_candidate_steps']}")
    return 0
