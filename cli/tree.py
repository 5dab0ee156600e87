"""The optimal draft tree under a node budget (docs/theory-trees.md §12): Sequoia's dynamic programme over the rank
model, from rank frequencies a_1..a_k (--acceptance), or from alpha with k candidates per node (--alpha, --k:
each candidate accepted with alpha when the earlier ones were rejected, a_j = alpha (1 - alpha)^(j - 1)).
With costs (--c for Theorem 3.8's, or a cost profile / the --t-* flags) the tree maximises the speedup over
budgets and depths, one draft call per level; the best chain is printed beside it. The budget counts the
root (the last committed token): a verify call scores that many positions."""

from __future__ import annotations

import argparse
import json

from cli import UsageError
from cli.options import add_cost_flags, flag_costs
from plumbing.validation import as_int, as_positive_int, as_probability, as_real
from spectheory.costs import load_profile
from spectheory.trees import Tree, check_rank_acceptance, expected_tokens_rank, hardware_optimal_tree, optimal_tree


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--acceptance",
        type=float,
        nargs="+",
        metavar="A",
        help="rank frequencies a_1 a_2 ...: P(a node's j-th child is the accepted one), sum <= 1",
    )
    source.add_argument(
        "--alpha", type=float, help="acceptance of one candidate (with --k); default: the --costs profile's alpha"
    )
    parser.add_argument("--k", type=int, default=1, help="candidates per node with --alpha (default 1: a chain)")
    parser.add_argument(
        "--budget", type=int, required=True, help="most nodes, the root included (positions per verify call)"
    )
    parser.add_argument("--depth", type=int, help="most draft levels (default: no cap)")
    costs = parser.add_argument_group("costs (docs/theory.md §10); without them only expected tokens")
    costs.add_argument(
        "--c",
        type=float,
        help="Theorem 3.8's costs: a draft call is c target calls, verify costs one call at any width",
    )
    costs.add_argument(
        "--costs", metavar="FILE", help="a `spectheory profile --out` file; its t_verify must cover the budget"
    )
    add_cost_flags(costs)
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _acceptance(args: argparse.Namespace, profile: dict | None) -> list:
    if args.acceptance is not None:
        return list(check_rank_acceptance(args.acceptance))
    alpha = args.alpha if args.alpha is not None else (profile or {}).get("alpha")
    if alpha is None:
        raise UsageError("spectheory tree: error: give --acceptance, --alpha, or --costs with a profile that has alpha")
    alpha, k = float(as_probability("alpha", alpha)), as_positive_int("k", args.k)
    return [alpha * (1 - alpha) ** j for j in range(k)]


def _costs(args: argparse.Namespace, profile: dict | None, budget: int) -> dict | None:
    """{t_step, t_draft, t_verify, t_iteration} in seconds, or None without costs."""
    flags = flag_costs(args)
    if args.c is not None:
        if profile is not None or flags:
            raise UsageError("spectheory tree: error: --c goes alone, without --costs or the --t-* flags")
        c = float(as_real("c", args.c, low=0.0))
        return {"t_step": 1.0, "t_draft": c, "t_verify": [1.0] * budget, "t_iteration": 0.0}
    costs = {key: profile[key] for key in ("t_step", "t_draft", "t_verify", "t_iteration")} if profile else {}
    costs.update(flags)
    if not costs:
        return None
    costs.setdefault("t_iteration", 0.0)
    missing = [key for key in ("t_step", "t_draft", "t_verify") if key not in costs]
    if missing:
        raise UsageError(
            "spectheory tree: error: measured costs need "
            f"{', '.join('--' + m.replace('_', '-') + '-ms' for m in missing)}"
        )
    if len(costs["t_verify"]) < budget:
        raise ValueError(
            f"budget {budget} needs t_verify for 1..{budget} positions, the costs give "
            f"{len(costs['t_verify'])} (profile with --gamma-max {budget - 1} or lower --budget)"
        )
    return costs


def run(args: argparse.Namespace) -> int:
    budget = as_positive_int("budget", args.budget)
    depth = None if args.depth is None else as_int("depth", args.depth, low=0)
    profile = load_profile(args.costs)["profile"] if args.costs else None
    acceptance = _acceptance(args, profile)
    costs = _costs(args, profile, budget)
    tree, value = optimal_tree(acceptance, budget, depth)
    document = {
        "acceptance": acceptance,
        "budget": budget,
        "depth_cap": depth,
        "tree": tree.as_dict(),
        "expected_tokens": value,
        "chain": {
            "tree": Tree.chain(budget - 1).as_dict(),
            "expected_tokens": expected_tokens_rank(Tree.chain(budget - 1), acceptance[:1]),
        },
    }
    if costs is not None:
        best, _ = hardware_optimal_tree(acceptance, nodes=budget, depth=depth, **costs)
        chain, _ = hardware_optimal_tree(acceptance[:1], nodes=budget, depth=depth, **costs)
        document.update(costs=costs, best=best.as_dict(), best_chain=chain.as_dict())
    if args.json:
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    print(
        f"rank acceptance a = {', '.join(f'{a:.4g}' for a in acceptance)}; budget {budget} nodes"
        + (f", depth <= {depth}" if depth is not None else "")
    )
    print(
        f"optimal tree: {tree.size} nodes, depth {tree.depth}, {value:.4f} tokens per call "
        f"(a chain of {budget - 1}: {document['chain']['expected_tokens']:.4f})"
    )
    print(f"parents {list(tree.parents)}")
    print(tree.drawing())
    if costs is not None:
        best, chain = document["best"], document["best_chain"]
        verdict = "speculate" if best["speedup"] > 1 else "do not speculate"
        print(
            f"with costs: best tree {best['tree']['nodes']} nodes, depth {best['tree']['depth']}, "
            f"{best['expected_tokens']:.4f} tokens per call, speedup {best['speedup']:.4f}x; best chain gamma "
            f"{chain['tree']['nodes'] - 1}, speedup {chain['speedup']:.4f}x: {verdict}"
        )
        print(f"best tree parents {best['tree']['parents']}")
    return 0
