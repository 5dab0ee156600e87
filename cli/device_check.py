"""The prepared device check (docs/gpu.md): our decoders' paths on a device held against autoregressive decoding
and the exact law, a short statistical audit with its planted-bug control, and the cost profiles of SmolLM2-shaped
random-weight Llama models (verify widths 1-64, batches 1-16), written into --out as JSON: `device_check.json` and
one `spectheory profile` document per pair, which `spectheory gamma --costs` and `spectheory tree --costs` read.
`.ci/device-check OUT` sets a GPU machine up and runs it; `--device cpu --dry-run` is the suite's run."""

from __future__ import annotations

import argparse

from cli import options
from decoders.bench.device_check import DRY_RUN, FULL, REPORT_NAME, run_check
from plumbing.outputs import check_writable
from plumbing.validation import as_positive_int

DEFAULT_BUDGET_SECONDS = 420  # the sections that start after it are skipped: under 8 minutes on one H100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory for device_check.json and the profiles")
    parser.add_argument("--device", type=options.device, default="cuda", help="torch device (default cuda)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny sizes (a tiny Llama, widths to 6, batches 1-2): checks that the check runs",
    )
    parser.add_argument(
        "--budget-seconds",
        type=int,
        default=DEFAULT_BUDGET_SECONDS,
        help=f"no section starts after this many seconds (default {DEFAULT_BUDGET_SECONDS})",
    )


def run(args: argparse.Namespace) -> int:

    as_positive_int("budget_seconds", args.budget_seconds)
    out = check_writable(args.out, directory=True)

    document = run_check(
        out,
        device=args.device,
        sizes=DRY_RUN if args.dry_run else FULL,
        budget_seconds=args.budget_seconds,
        command=args.command_line,
        log=lambda line: print(line, flush=True),
    )
    failed = [section.name for section in document.sections if section.failed]
    print(
        f"wrote {out / REPORT_NAME}: {len(document.sections)} sections, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else "")
    )
    return 1 if failed else 0
