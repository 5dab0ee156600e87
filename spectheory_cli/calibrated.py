"""`spectheory gamma` with measured costs: the profile from --costs, overridden by the --t-* flags."""

from __future__ import annotations

import argparse
import json

from spectheory.calculator import calibrated_table, format_calibrated_text
from spectheory_cli import UsageError
from spectheory.costs import CostProfile, load_profile, text_profile

COST_FLAGS = ("t_step_ms", "t_draft_ms", "t_verify_ms", "t_iteration_ms", "acceptance", "acceptance_from")


def add_cost_flags(costs) -> None:
    """The measured costs as flags (an argument group of ``gamma`` and ``tree``), read by ``flag_costs``."""
    costs.add_argument("--t-step-ms", type=float, help="autoregressive decoder, ms per token")
    costs.add_argument("--t-draft-ms", type=float, help="one draft call (a chain's token, a tree's level), ms")
    costs.add_argument("--t-verify-ms", type=float, nargs="+", metavar="MS",
                       help="verifying k = 1, 2, ... positions, ms (gamma up to their number - 1)")
    costs.add_argument("--t-iteration-ms", type=float, help="accept, correct and rollback per iteration, ms (default 0)")


def flag_costs(args: argparse.Namespace) -> dict:
    """The --t-* flags given, in seconds: ``t_step``, ``t_draft``, ``t_iteration`` and the list ``t_verify``."""
    costs = {key: getattr(args, key + "_ms") / 1e3 for key in ("t_step", "t_draft", "t_iteration")
             if getattr(args, key + "_ms") is not None}
    if args.t_verify_ms is not None:
        costs["t_verify"] = [ms / 1e3 for ms in args.t_verify_ms]
    return costs


def cost_entries(args: argparse.Namespace) -> tuple[dict, str]:
    entries, described = {}, "flags"
    if args.costs:
        document = load_profile(args.costs)
        entries, described = dict(document["profile"]), f"{document['target']} with draft {document['draft']}"
        if args.pair and list(args.pair) != [document["target"], document["draft"]]:
            raise ValueError(f"cost profile {args.costs!r} is of {document['target']} with draft "
                             f"{document['draft']}, not of {args.pair[0]} with draft {args.pair[1]}")
    entries.update(flag_costs(args))
    if args.acceptance_from is not None:
        if args.acceptance is not None or args.alpha is not None or not args.costs:
            raise UsageError("spectheory gamma: error: --acceptance-from goes with --costs, without --acceptance or "
                             "--alpha")
        text = CostProfile.from_dict(text_profile(args.acceptance_from))
        return CostProfile.from_dict(entries).with_text(text).as_dict(), f"{described}, acceptance of " \
                                                                           f"{args.acceptance_from}"
    if args.acceptance is not None or not args.costs:
        gamma_max = len(entries.get("t_verify", [None, None])) - 1
        if args.acceptance is None and args.alpha is None:
            raise UsageError("spectheory gamma: error: measured costs without a profile need --alpha or --acceptance")
        acceptance = list(args.acceptance or [args.alpha[0]] * gamma_max)
        if args.costs:  # the profile's proposal lengths and overheads refitted to these positions
            entries = CostProfile.from_dict(entries).with_acceptance(acceptance).as_dict()
        entries["acceptance"] = acceptance
        entries["acceptance_along_text"] = []
    entries.setdefault("t_iteration", 0.0)
    return entries, described


def run(args: argparse.Namespace) -> int:
    if args.tokens_per_iteration is not None or (args.alpha is not None and len(args.alpha) > 1):
        raise UsageError("spectheory gamma: error: measured costs take at most one --alpha")
    entries, described = cost_entries(args)
    profile = CostProfile.from_dict(entries)
    alpha = None if args.alpha is None or args.acceptance is not None else args.alpha[0]
    table = calibrated_table(profile, alpha=alpha, c=args.c if args.c else None)
    if args.json:
        print(json.dumps(dict(table.as_dict(), costs_from=described), indent=2, allow_nan=False))
    else:
        print(f"cost profile: {described}")
        print(format_calibrated_text(table))
    return 0
