"""Batch-1 wall-clock benchmark of speculative decoding against our autoregressive decoder on held-out
prompts, over a gamma sweep and temperatures, with the Theorem 3.8 prediction from the measured alpha and c
(Table 4 analogue) and the cost model's, and each decoder's efficiency (seconds inside model calls over wall
seconds); then a batch sweep (tokens per second, speedup and prediction per batch size). Warm-up, repeats,
medians; CUDA synchronised. --hf adds our loops against Hugging Face generate / assisted generation."""

from __future__ import annotations

import argparse
import statistics

import torch

from decoders.harness.alpha import MAX_PROMPTS
from decoders.harness.bench import MAX_REPEATS, BenchSettings
from decoders.harness.policy_bench import BENCH_POLICIES, check_policies, policy_lines
from decoders.harness.runs import bench_document, policy_document, tree_document
from decoders.harness.tree_bench import TREE_BUDGETS, check_budgets, tree_lines
from decoders.harness.tasks import TASKS
from spectheory.cli.options import add_device, add_dtype, add_target, add_text, draft_help
from spectheory.costs import CostProfile
from spectheory.outputs import check_writable, write_json

DEFAULTS = BenchSettings()
CONTEXT = "prompt + tokens + gamma + 1 must fit the target's context (256 for the shipped target)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target(parser)
    parser.add_argument("--draft", default="transformer", metavar="DRAFT", help=draft_help("transformer"))
    add_text(parser, "the prompts")
    parser.add_argument("--task", choices=TASKS, help="prompts from a task on the held-out text (completion, rewrite) "
                                                      "instead of windows of it")
    add_device(parser)
    add_dtype(parser)
    parser.add_argument("--gammas", type=int, nargs="+", default=list(DEFAULTS.gammas), metavar="G",
                        help="gammas to benchmark (default 1 to 8); " + CONTEXT)
    parser.add_argument("--temperatures", type=float, nargs="+", default=list(DEFAULTS.temperatures), metavar="T",
                        help="temperatures (default 0 1)")
    parser.add_argument("--prompts", type=int, default=DEFAULTS.prompts,
                        help=f"held-out prompts, decoded one at a time, at most {MAX_PROMPTS} (each is decoded in full "
                             f"per run; default {DEFAULTS.prompts})")
    parser.add_argument("--prompt-length", type=int, default=DEFAULTS.prompt_length,
                        help=f"tokens per prompt (default {DEFAULTS.prompt_length}); " + CONTEXT)
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens,
                        help=f"tokens generated per prompt (default {DEFAULTS.max_new_tokens}); " + CONTEXT)
    parser.add_argument("--repeats", type=int, default=DEFAULTS.repeats,
                        help=f"timed repeats, median reported, at most {MAX_REPEATS} (default {DEFAULTS.repeats})")
    parser.add_argument("--warmup", type=int, default=DEFAULTS.warmup,
                        help=f"untimed runs first, at most {MAX_REPEATS} (default {DEFAULTS.warmup})")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="prompt selection seed (default 0)")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=list(DEFAULTS.batch_sizes), metavar="B",
                        help="the batch sweep: rows per call, each decoding whole batches of at least --prompts prompts "
                             "(default 1 4 16 64; none: no sweep)")
    parser.add_argument("--batch-gammas", type=int, nargs="+", default=list(DEFAULTS.batch_gammas), metavar="G",
                        help="gammas of the batch sweep (default 2 4)")
    parser.add_argument("--hf", action="store_true", help="also compare with Hugging Face generate and assisted "
                                                          "generation (a pair of TinyGPTs, converted, or of model "
                                                          "directories)")
    parser.add_argument("--hf-gamma", type=int, help="assistant tokens for the comparison (default: best gamma at T=0)")
    parser.add_argument("--tree", action="store_true", help="instead: the optimal draft tree against the chain at "
                                                            "each node budget, T = 0 (docs/theory.md §12)")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(TREE_BUDGETS), metavar="N",
                        help="--tree: nodes per verify call, the root included (default 4 8 16 32)")
    parser.add_argument("--policies", nargs="*", metavar="NAME", help="instead: draft-length policies against the "
                        f"fixed --gammas at each temperature (docs/theory.md §13); no names: all of {' '.join(BENCH_POLICIES)}")
    parser.add_argument("--out", help="write the JSON report here")


def _lines(document: dict, args: argparse.Namespace) -> list[str]:
    env = document["environment"]
    lines = [f"c = {document['c']:.4f} (draft call {document['draft_call_seconds'] * 1e3:.3f} ms / target call "
             f"{document['target_call_seconds'] * 1e3:.3f} ms), {env['device_name']}, {env['dtype']}",
             "   T  gamma  tokens/iter  alpha  speedup (min-max)     calibrated  cal/measured  Thm 3.8  measured/Thm"
             "  efficiency"]
    for row in document["rows"]:
        low, _, high = row["speedup_spread"]
        lines.append(f"{row['temperature']:4g}  {row['gamma']:5d}  {row['tokens_per_iteration']:11.3f}  "
                     f"{row['alpha_counts']:5.3f}  {row['speedup']:7.3f} ({low:.2f}-{high:.2f})  "
                     f"{row['calibrated_speedup']:10.3f}  {row['calibrated_over_measured']:12.3f}  "
                     f"{row['predicted_speedup']:7.3f}  {row['measured_over_predicted']:12.3f}  {_share(row['efficiency'])}")
    lines += [_error_summary(name, document["rows"], key, 0.10)
              for name, key in (("calibrated", "calibrated_speedup"), ("Theorem 3.8", "predicted_speedup"))]
    for temperature in args.temperatures:
        best = document["best"][str(temperature)]
        profile = CostProfile.from_dict(document["profiles"][temperature])
        calibrated = profile.optimal_gamma(tokens=args.max_new_tokens)
        lines.append(f"T = {temperature:g}: best gamma {best['gamma']}, speedup {best['speedup']:.3f} over our "
                     f"autoregressive decoder ({document['autoregressive_seconds'][temperature]:.3f} s for "
                     f"{args.prompts} x {args.max_new_tokens} tokens), pooled alpha {document['alpha'][temperature]:.3f};"
                     f" the cost model recommends gamma {calibrated} ({profile.speedup(calibrated, tokens=args.max_new_tokens):.3f}x;"
                     f" t_step {profile.t_step * 1e3:.3f} ms, t_draft {profile.t_draft * 1e3:.3f} ms, t_verify(2..{profile.gamma_max + 1})"
                     f" {profile.t_verify[1] * 1e3:.3f}..{profile.t_verify[-1] * 1e3:.3f} ms, t_iteration {profile.t_iteration * 1e3:.3f} ms)")
    for temperature, costs in document["autoregressive"].items():
        lines.append(f"T = {float(temperature):g}, autoregressive: {costs['seconds_per_token'] * 1e3:.3f} ms per token, "
                     f"{costs['over_target_call']:.3f} x ({costs['over_target_call_spread'][0]:.2f}-"
                     f"{costs['over_target_call_spread'][1]:.2f}) the one-token target call timed beside it "
                     f"({costs['target_call_seconds'] * 1e3:.3f} ms), efficiency {_share(costs['efficiency'])}")
    lines += _batch_lines(document.get("batches"))
    for row in document.get("hf", {}).get("rows", []):
        lines.append(f"HF, T = {row['temperature']:g}, gamma {document['hf']['gamma']}: " + "; ".join(
            f"{kind} ours (adapter) {row[f'{kind}_ours_adapter_seconds']:.3f} s{_native(row, kind)} vs {theirs} "
            f"{row[f'{kind}_hf_{theirs}_seconds']:.3f} s, {row[f'{kind}_ours_adapter_over_hf']:.2f}x "
            f"({row[f'{kind}_ours_adapter_over_hf_spread'][0]:.2f}-{row[f'{kind}_ours_adapter_over_hf_spread'][1]:.2f})"
            for kind, theirs in (("ar", "generate"), ("speculative", "assisted")) if f"{kind}_ours_adapter_over_hf" in row))
    return lines


def _native(row: dict, kind: str) -> str:
    """Our native decoder's seconds beside the adapter's, where the pair was converted from TinyGPTs."""
    seconds = row.get(f"{kind}_ours_native_seconds")
    return "" if seconds is None else f" (native {seconds:.3f} s)"


def _share(value) -> str:
    """An efficiency (model-call seconds over wall seconds), or n/a where the runs were not phase-timed."""
    return "n/a" if value is None else f"{value:.3f}"


def _batch_lines(sweep: dict | None) -> list[str]:
    """The batch sweep's table: tokens per second, measured speedup and the cost model's prediction."""
    if not sweep:
        return []
    lines = ["batch   T  gamma  prompts  AR tok/s  spec tok/s  speedup (min-max)     predicted  pred/measured"
             "  efficiency AR/spec"]
    for row in sweep["rows"]:
        low, _, high = row["speedup_spread"]
        lines.append(f"{row['batch_size']:5d}  {row['temperature']:3g}  {row['gamma']:5d}  {row['prompts']:7d}  "
                     f"{row['autoregressive_tokens_per_second']:8.0f}  {row['tokens_per_second']:10.0f}  "
                     f"{row['speedup']:7.3f} ({low:.2f}-{high:.2f})  {row['calibrated_speedup']:10.3f}  "
                     f"{row['calibrated_over_measured']:13.3f}  {_share(row['autoregressive_efficiency'])}/"
                     f"{_share(row['efficiency'])}")
    return lines + [_error_summary("batch sweep", sweep["rows"], "calibrated_speedup", 0.15)]


def _error_summary(name: str, rows: list, key: str, tolerance: float) -> str:
    """How far the prediction ``row[key]`` is from the measured speedups: median and largest
    |predicted / measured - 1|, and the rows within ``tolerance``."""
    errors = [abs(row[key] / row["speedup"] - 1) for row in rows]
    within = sum(error <= tolerance for error in errors)
    return (f"{name}: median |predicted / measured - 1| = {100 * statistics.median(errors):.1f}%, largest "
            f"{100 * max(errors):.1f}%, {within} of {len(rows)} rows within {100 * tolerance:.0f}%")


def run(args: argparse.Namespace) -> int:
    settings = BenchSettings(tuple(args.gammas), tuple(args.temperatures), args.prompts, args.prompt_length,
                             args.max_new_tokens, args.repeats, args.warmup, seed=args.seed,
                             batch_sizes=tuple(args.batch_sizes), batch_gammas=tuple(args.batch_gammas))
    if args.hf_gamma is not None and not args.hf:
        raise ValueError(f"--hf-gamma {args.hf_gamma} applies to the Hugging Face comparison: add --hf")
    if args.out:
        check_writable(args.out)
    if args.policies is not None:
        if args.hf or args.tree:
            raise ValueError("--policies compares draft-length policies in our decoder: --hf and --tree do not apply")
        document = policy_document(args.draft, settings, policies=check_policies(args.policies or BENCH_POLICIES),
                                   target=args.target, text=args.text, device=args.device,
                                   dtype=getattr(torch, args.dtype), task=args.task)
        if args.out:
            write_json(args.out, document, command=args.command_line)
        print("\n".join(policy_lines(document)))
        return 0
    if args.tree:
        if args.hf:
            raise ValueError("--tree compares trees with chains in our decoders: --hf does not apply")
        document = tree_document(args.draft, settings, budgets=check_budgets(args.budgets), target=args.target,
                                 text=args.text, device=args.device, dtype=getattr(torch, args.dtype), task=args.task)
        if args.out:
            write_json(args.out, document, command=args.command_line)
        print("\n".join(tree_lines(document)))
        return 0
    document = bench_document(args.draft, settings, target=args.target, text=args.text, device=args.device,
                              dtype=getattr(torch, args.dtype), hf=args.hf, hf_gamma=args.hf_gamma, task=args.task)
    if args.out:
        write_json(args.out, document, command=args.command_line)
    print("\n".join(_lines(document, args)))
    return 0
