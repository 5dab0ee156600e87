"""Run the recipes of decoders.zoo: the target TinyGPT, the transformer draft, the draft distilled on
the target's samples (needs target and transformer), Stern proposal heads on the frozen target (needs
target), and the unigram/bigram models. Checkpoints go to --work and a rerun resumes from them; a finished
model is exported (float16) into --zoo."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cli.options import add_device, names
from decoders import zoo
from plumbing.outputs import check_writable
from plumbing.validation import as_positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models",
        nargs="+",
        choices=zoo.TRAINABLE + ("all",),
        metavar="MODEL",
        help=f"what to train: {names(zoo.TRAINABLE)} or all (in dependency order)",
    )
    parser.add_argument("--work", default="spectheory-work", help="checkpoint directory (default ./spectheory-work)")
    parser.add_argument("--zoo", help="export directory (default: the package's shipped zoo)")
    add_device(parser)
    parser.add_argument("--until", type=int, help="stop after this many steps in all (resume later)")
    parser.add_argument("--json", action="store_true", help="print the manifest entries as JSON")


def run(args: argparse.Namespace) -> int:
    if args.until is not None:
        as_positive_int("until", args.until)
    order = zoo.training_order(args.models)
    for path in [Path(args.work) / f"{name}.pt" for name in order] + [Path(args.zoo or zoo.ZOO) / "manifest.json"]:
        check_writable(path)  # checkpoints, and the manifest every export rewrites
    written = {}
    for name in order:
        written.update(
            zoo.train(
                name, work=args.work, zoo=args.zoo or zoo.ZOO, device=args.device, progress=None, until=args.until
            )
        )
    if args.json:
        print(json.dumps(written, indent=2, allow_nan=False))
        return 0
    for name, entry in written.items():
        loss = entry.get("final_held_out_loss_nats_per_char")
        print(
            f"{name}: {entry['parameters']} parameters, {entry['bytes'] / 1e6:.2f} MB"
            + (f", held-out loss {loss:.4f} nats/char after {entry['steps']} steps" if loss is not None else "")
        )
    if not written:
        print(f"stopped at step {args.until}: rerun without --until to finish and export")
    return 0
