"""``spectheory <command>``: thin argument parsing over the packages.

Bad input (argparse's or a ``ValueError`` from the packages) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

import numpy as np
from tqdm import tqdm

from sims.families import FAMILIES
from sims.run import PROCESSES, SimulationSpec, run_simulation
from spectheory import __version__
from spectheory.block_verification import VERIFIERS
from spectheory.calculator import format_latex, format_text, gamma_table
from spectheory.speedup import alpha_from_tokens_per_iteration

__all__ = ["main", "build_parser"]

USAGE_ERROR = 2


class _UsageError(Exception):
    """Raised instead of argparse's multi-line usage message."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message}")


def _add_gamma(commands) -> None:
    gamma = commands.add_parser(
        "gamma",
        help="optimal gamma, expected tokens, speedup and operations for given alpha and c",
        description="For each alpha, a table of gamma -> expected tokens per iteration (Eq. 1), "
                    "walltime speedup (Theorem 3.8) and arithmetic-operations factor (Theorem 3.11), "
                    "with the optimal gamma marked. gamma = 0 is autoregressive decoding.",
    )
    source = gamma.add_mutually_exclusive_group(required=True)
    source.add_argument("--alpha", type=float, nargs="+", metavar="A",
                        help="mean acceptance rate(s) alpha = E[beta], in [0, 1]")
    source.add_argument("--tokens-per-iteration", type=float, metavar="X",
                        help="measured mean tokens per iteration (with the bonus/correction token); "
                             "with --gamma, reports the implied alpha and its table")
    gamma.add_argument("--gamma", type=int, metavar="G", help="the gamma at which --tokens-per-iteration was measured")
    gamma.add_argument("--c", type=float, default=0.0,
                       help="cost of a draft call relative to a target call (default 0)")
    gamma.add_argument("--c-hat", type=float, default=None,
                       help="draft arithmetic per token relative to the target's (default: equal to --c)")
    gamma.add_argument("--gamma-max", type=int, default=16, help="largest gamma considered (default 16)")
    output = gamma.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document: a list, one object per alpha")
    output.add_argument("--latex", action="store_true", help="print LaTeX tabulars")
    gamma.set_defaults(run=_run_gamma)


def _run_gamma(args: argparse.Namespace) -> int:
    implied_from = None
    if args.tokens_per_iteration is not None:
        if args.gamma is None:
            raise _UsageError("spectheory gamma: error: --tokens-per-iteration needs --gamma")
        alphas = [float(alpha_from_tokens_per_iteration(args.tokens_per_iteration, args.gamma))]
        implied_from = {"tokens_per_iteration": args.tokens_per_iteration, "gamma": args.gamma}
    elif args.gamma is not None:
        raise _UsageError("spectheory gamma: error: --gamma goes with --tokens-per-iteration")
    else:
        alphas = args.alpha
    c_hat = args.c if args.c_hat is None else args.c_hat
    results = [gamma_table(alpha, args.c, c_hat, args.gamma_max) for alpha in alphas]
    if args.json:
        documents = [dict(result.as_dict(), **({"implied_from": implied_from} if implied_from else {}))
                     for result in results]
        print(json.dumps(documents, indent=2, allow_nan=False))
        return 0
    if implied_from:
        print(f"{args.tokens_per_iteration:g} tokens per iteration at gamma = {args.gamma} implies "
              f"alpha = {alphas[0]:.6f} (inverse of Eq. 1)\n")
    render = format_latex if args.latex else format_text
    print("\n\n".join(render(result) for result in results))
    return 0


def _add_simulate(commands) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="Monte-Carlo tokens per iteration and speedup, beside their closed forms",
        description="Simulate speculative iterations and compare the mean tokens per iteration (with its "
                    "standard error) and the walltime speedup with the closed forms: Eq. 1 and Theorem 3.8 "
                    "(iid, token-level), the position-dependent product (positional), the exact Markov "
                    "expectation (markov).",
    )
    simulate.add_argument("--process", choices=PROCESSES, default="iid",
                          help="acceptance process (default iid); token-level draws real tokens from a family")
    simulate.add_argument("--alpha", type=float, help="acceptance rate for iid; target mean alpha for token-level")
    simulate.add_argument("--gamma", type=int, help="draft tokens per iteration (positional: defaults to the "
                                                    "number of --acceptance rates)")
    simulate.add_argument("--acceptance", type=float, nargs="+", metavar="A",
                          help="positional: acceptance rate of draft position 1, 2, ... given the ones before")
    simulate.add_argument("--regime-acceptance", type=float, nargs="+", metavar="A",
                          help="markov: acceptance rate in each regime")
    simulate.add_argument("--transition", type=float, nargs="+", metavar="P",
                          help="markov: K x K regime transition matrix, row-major")
    simulate.add_argument("--family", choices=FAMILIES, default="mixture",
                          help="token-level: synthetic (p, q) family (default mixture)")
    simulate.add_argument("--vocabulary", type=int, default=100, help="token-level: vocabulary size (default 100)")
    simulate.add_argument("--lenience", type=float, default=1.0, help="token-level: lenience l in (0, 1] (default 1)")
    simulate.add_argument("--verifier", choices=VERIFIERS, default="token",
                          help="token-level: token (Algorithm 1) or block (Sun et al.) verification")
    simulate.add_argument("--c", type=float, default=0.0, help="cost of a draft call relative to a target call")
    simulate.add_argument("--n", type=int, default=100_000, help="iterations to simulate (default 100000)")
    simulate.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(run=_run_simulate)


def _simulation_spec(args: argparse.Namespace) -> SimulationSpec:
    gamma = args.gamma
    if gamma is None:
        if args.process != "positional" or args.acceptance is None:
            raise _UsageError("spectheory simulate: error: --gamma is required")
        gamma = len(args.acceptance)
    return SimulationSpec(process=args.process, gamma=gamma, c=args.c, iterations=args.n, alpha=args.alpha,
                          acceptance=None if args.acceptance is None else tuple(args.acceptance),
                          regime_acceptance=None if args.regime_acceptance is None else tuple(args.regime_acceptance),
                          transition=None if args.transition is None else tuple(args.transition),
                          family=args.family, vocabulary=args.vocabulary, lenience=args.lenience,
                          verifier=args.verifier)


def _run_simulate(args: argparse.Namespace) -> int:
    spec = _simulation_spec(args)
    if args.seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {args.seed}")

    def progress(sizes):
        """Counts iterations (streams for markov), shown on a terminal once a run takes over a second."""
        unit = " streams" if spec.process == "markov" else " iterations"
        with tqdm(total=sum(sizes), desc="simulate", unit=unit, unit_scale=True, delay=1.0, disable=None,
                  file=sys.stderr) as bar:
            for size in sizes:
                yield size
                bar.update(size)

    summary = run_simulation(np.random.default_rng(args.seed), spec, seed=args.seed, progress=progress)
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2, allow_nan=False))
        return 0
    print(f"process {spec.process}, gamma = {spec.gamma}, c = {spec.c:g}, {spec.iterations} iterations, "
          f"seed {args.seed}; alpha = {summary.alpha:.6f}")
    print(f"tokens per iteration: simulated {summary.mean_tokens_per_iteration:.5f} "
          f"+- {summary.standard_error:.5f} (1 SE), theory {summary.theory_tokens_per_iteration:.5f}, "
          f"z = {summary.z_score:+.2f}")
    print(f"walltime speedup:     simulated {summary.speedup:.5f} +- {summary.speedup_standard_error:.5f}, "
          f"theory {summary.theory_speedup:.5f}")
    if "eq1_at_mean_alpha" in summary.extra:
        print(f"Eq. 1 at the same mean alpha would say {summary.extra['eq1_at_mean_alpha']:.5f}")
    return 0


AUDIT_DRAFTS = "tabular, tinygpt, ngram, copy, random"  # decoders.audit.setups.DRAFTS (imported lazily: torch)
AUDIT_MUTANTS = ("residual-from-p, ratio-q-over-p, q-at-temperature-1, filter-on-target-only, no-rollback, "
                 "verify-one-late, rejected-token-kept, one-uniform, bonus-from-draft, silent-lenience")


def _add_audit(commands) -> None:
    audit = commands.add_parser(
        "audit",
        help="prove or test that a decoder samples exactly the target's distribution",
        description="Audit a decoder configuration on tiny seeded models. By default a statistical audit: n "
                    "sampled continuations tested with randomized PIT (Kolmogorov-Smirnov under three token "
                    "orderings) and a G-test on the first tokens, Bonferroni-combined. With --exact, the "
                    "decoder's exact law of the first --horizon tokens by enumerating its random choices. "
                    "Exit status 0 when it passes, 1 when it fails, 2 for bad arguments.",
    )
    audit.add_argument("--decoder", choices=("speculative", "autoregressive"), default="speculative",
                       help="the decoder to audit (default speculative)")
    audit.add_argument("--mutant", metavar="NAME", help=f"audit a planted-bug speculative decoder: {AUDIT_MUTANTS}")
    audit.add_argument("--target", choices=("tabular", "tinygpt", "shipped"), default="tinygpt",
                       help="tiny target model, or the shipped trained target (statistical only; default tinygpt)")
    audit.add_argument("--draft", help=f"tiny draft model: {AUDIT_DRAFTS} (default tabular); with --target shipped "
                                       f"a shipped draft: {ZOO_DRAFTS} (default transformer)")
    audit.add_argument("--vocabulary", type=int, default=5, help="vocabulary of the tiny models (default 5)")
    audit.add_argument("--verifier", choices=VERIFIERS, default="token", help="token (Algorithm 1) or block verification")
    audit.add_argument("--gamma", type=int, default=2, help="draft tokens per iteration (default 2)")
    audit.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, 0 = greedy (default 1)")
    audit.add_argument("--top-k", type=int, help="keep the k most likely tokens")
    audit.add_argument("--top-p", type=float, help="keep the smallest set of tokens with mass >= p")
    audit.add_argument("--lenience", type=float, default=1.0, help="lenience l in (0, 1] (default 1: exact)")
    audit.add_argument("--prompt", type=int, nargs="+", metavar="TOKEN", help="prompt token ids (default 1 2)")
    audit.add_argument("--prompt-text", help="shipped target: the prompt as text (default 'import ')")
    audit.add_argument("--horizon", type=int, default=4, help="tokens generated per sample (default 4)")
    audit.add_argument("--n", type=int, default=20_000, help="statistical: samples (default 20000)")
    audit.add_argument("--level", type=float, default=0.01, help="statistical: significance level (default 0.01)")
    audit.add_argument("--seed", type=int, default=0, help="statistical: random seed (default 0)")
    audit.add_argument("--exact", nargs="?", const="dp", choices=("dp", "whole-run"),
                       help="enumerate exactly instead: dp (prefix dynamic programme, default) or whole-run")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(run=_run_audit)


SHIPPED_AUDIT_BATCH = 256  # sequences per decoder call: the shipped target's cache is 6 MB per row


def _audit_models(args: argparse.Namespace) -> tuple:
    """(target, draft or None, batch) for the audit; fills in the defaults of --draft and --prompt."""
    import torch

    from decoders.audit import setups

    speculative = args.decoder == "speculative"
    if args.target == "shipped":
        from decoders import zoo
        from decoders.corpus import encode

        if args.exact:
            raise ValueError("--exact enumerates tiny models only; audit --target shipped statistically")
        if args.prompt is not None and args.prompt_text is not None:
            raise ValueError("give --prompt or --prompt-text, not both")
        if args.prompt is None:
            args.prompt = encode("import " if args.prompt_text is None else args.prompt_text).tolist()
        args.draft = args.draft or "transformer"
        target = zoo.load_target()
        return target, zoo.load_draft(args.draft) if speculative else None, SHIPPED_AUDIT_BATCH
    if args.prompt_text is not None:
        raise ValueError("--prompt-text goes with --target shipped (tiny models take --prompt token ids)")
    args.prompt, args.draft = args.prompt or [1, 2], args.draft or "tabular"
    dtype = torch.float64 if args.exact else torch.float32
    target = setups.tiny_target(args.target, args.vocabulary, dtype=dtype)
    return target, setups.tiny_draft(args.draft, target, dtype=dtype) if speculative else None, 8192


def _run_audit(args: argparse.Namespace) -> int:
    from decoders.audit import exact, setups, statistical
    from decoders.audit.mutants import mutant
    from decoders.autoregressive import generate_autoregressive
    from decoders.sampling import Sampling
    from decoders.speculative import REFERENCE_STEP, SpeculativeConfig

    for name in ("horizon", "n"):
        if getattr(args, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(args, name)}")
    if args.seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {args.seed}")
    if args.mutant is not None and args.decoder != "speculative":
        raise ValueError(f"mutants are speculative decoders, got --decoder {args.decoder}")
    sampling = Sampling(args.temperature, args.top_k, args.top_p)
    config = SpeculativeConfig(args.gamma, sampling, args.lenience, args.verifier)
    step = REFERENCE_STEP if args.mutant is None else mutant(args.mutant).step
    target, draft, batch = _audit_models(args)
    if any(not 0 <= token < target.vocab_size for token in args.prompt):
        raise ValueError(f"prompt tokens must be in [0, {target.vocab_size}), got {args.prompt}")
    if args.decoder == "speculative":
        generate = setups.speculative_run(target, draft, args.prompt, config, args.horizon, step=step)
        described = (f"speculative ({args.mutant or 'reference'}), {args.verifier} verifier, gamma {args.gamma}, "
                     f"lenience {args.lenience:g}, draft {args.draft}")
    else:
        def generate(prompts, randomness):
            return generate_autoregressive(target, prompts, max_new_tokens=args.horizon, sampling=sampling,
                                           randomness=randomness).tokens
        described = "autoregressive"
    described += (f"; target {args.target}, V = {target.vocab_size}, {sampling}, prompt {args.prompt}, "
                  f"horizon {args.horizon}")
    if args.exact:
        reference = exact.autoregressive_law(target, args.prompt, sampling, args.horizon)
        method = args.exact if args.decoder == "speculative" else "whole-run"  # the DP is speculative's
        if method == "dp":
            law, branches = exact.speculative_law(target, draft, args.prompt, config, args.horizon, step=step)
        else:
            law, branches = exact.whole_run_law(lambda randomness: generate([args.prompt], randomness)[0])
        report = exact.compare_laws(law, reference, method=method, horizon=args.horizon, branches=branches)
        summary = (f"exact ({method}): {report.branches} branches, {report.sequences} sequences, total mass "
                   f"{report.total_mass:.15f}, max |law - target| {report.max_abs_difference:.3g}, total variation "
                   f"{report.total_variation:.3g}, tolerance {report.tolerance:g}")
    else:
        report = statistical.audit_sampler(setups.sampler(generate, args.prompt, args.horizon, batch=batch), target, args.prompt,
                                           sampling, n=args.n, horizon=args.horizon, seed=args.seed, draft=draft,
                                           level=args.level)
        tests = ", ".join(f"{name} {value:.3g}" for name, value in report.test_p_values.items())
        summary = (f"statistical: n = {report.n}, p = {report.p_value:.3g} (Bonferroni over {report.tests} tests: "
                   f"{tests}), level {report.level:g}; detects a per-position TV of {report.detectable_tv:.4f} "
                   f"with 90% power; {report.seconds:.1f} s")
    if args.json:
        print(json.dumps({"decoder": described, **report.as_dict()}, indent=2, allow_nan=False))
    else:
        print(f"audit: {described}")
        print(f"{summary}: {'PASS' if report.passed else 'FAIL'}")
    return 0 if report.passed else 1


ZOO_DRAFTS = "transformer, distilled, bigram, unigram, copy, random"  # decoders.zoo.DRAFTS (lazily: torch)
ZOO_TRAINABLE = ("target", "transformer", "distilled", "heads", "ngrams")  # decoders.zoo.TRAINABLE


def _add_train(commands) -> None:
    train = commands.add_parser(
        "train",
        help="train the shipped target and drafts on the stdlib corpus (seeded, resumable)",
        description="Run the recipes of decoders.zoo: the target TinyGPT, the transformer draft, the draft "
                    "distilled on the target's samples (needs target and transformer), Stern proposal heads on "
                    "the frozen target (needs target), and the unigram/bigram models. Checkpoints go to --work "
                    "and a rerun resumes from them; a finished model is exported (float16) into --zoo.",
    )
    train.add_argument("models", nargs="+", choices=ZOO_TRAINABLE + ("all",), metavar="MODEL",
                       help=f"what to train: {', '.join(ZOO_TRAINABLE)} or all (in dependency order)")
    train.add_argument("--work", default="spectheory-work", help="checkpoint directory (default ./spectheory-work)")
    train.add_argument("--zoo", help="export directory (default: the package's shipped zoo)")
    train.add_argument("--device", default="cpu", help="torch device (default cpu)")
    train.add_argument("--until", type=int, help="stop after this many steps in all (resume later)")
    train.add_argument("--json", action="store_true", help="print the manifest entries as JSON")
    train.set_defaults(run=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    from decoders import zoo

    names = list(ZOO_TRAINABLE) if "all" in args.models else list(dict.fromkeys(args.models))
    names.sort(key=("ngrams", "transformer", "target", "distilled", "heads").index)
    if args.until is not None and args.until < 1:
        raise ValueError(f"until must be a positive integer, got {args.until}")
    written = {}
    for name in names:
        written.update(zoo.train(name, work=args.work, zoo=args.zoo or zoo.ZOO, device=args.device,
                                 progress=None, until=args.until))
    if args.json:
        print(json.dumps(written, indent=2))
        return 0
    for name, entry in written.items():
        loss = entry.get("final_held_out_loss_nats_per_char")
        print(f"{name}: {entry['parameters']} parameters, {entry['bytes'] / 1e6:.2f} MB"
              + (f", held-out loss {loss:.4f} nats/char after {entry['steps']} steps" if loss is not None else ""))
    if not written:
        print(f"stopped at step {args.until}: rerun without --until to finish and export")
    return 0


def _add_zoo_options(parser, default_draft: str = "transformer") -> None:
    parser.add_argument("--draft", default=default_draft, help=f"shipped draft: {ZOO_DRAFTS} (default {default_draft})")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16", "float64"), default="float32",
                        help="model dtype (default float32; weights are stored as float16)")


def _add_alpha(commands) -> None:
    alpha = commands.add_parser(
        "alpha",
        help="measured acceptance rate alpha of the shipped drafts (Table 3 analogue)",
        description="For each draft and temperature, alpha = mean sum_x min(p, q) along held-out text, and "
                    "alpha from the acceptance counts of speculative runs from held-out prompts.",
    )
    alpha.add_argument("--drafts", nargs="+", default=None, metavar="DRAFT", help=f"drafts (default all: {ZOO_DRAFTS})")
    alpha.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0], metavar="T",
                       help="temperatures (default 0 1)")
    alpha.add_argument("--windows", type=int, default=32, help="held-out windows of 256 characters (default 32)")
    alpha.add_argument("--prompts", type=int, default=16, help="held-out prompts for the acceptance counts (default 16)")
    alpha.add_argument("--gamma", type=int, default=4, help="gamma of the counted runs (default 4)")
    alpha.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    alpha.add_argument("--device", default="cpu", help="torch device (default cpu)")
    alpha.add_argument("--out", help="write the estimates as JSON here")
    alpha.add_argument("--markdown", help="write the Markdown table here")
    alpha.set_defaults(run=_run_alpha)


def _run_alpha(args: argparse.Namespace) -> int:
    from decoders import measure, zoo
    from decoders.corpus import load_corpus

    drafts = args.drafts or list(zoo.DRAFTS)
    for name in ("windows", "prompts", "gamma"):
        if getattr(args, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(args, name)}")
    target = zoo.load_target(device=args.device)
    models = {name: zoo.load_draft(name, device=args.device) for name in drafts}
    corpus = load_corpus()
    estimates = measure.alpha_table(target, models, corpus.held_out, tuple(args.temperatures), windows=args.windows,
                                    prompts=args.prompts, gamma=args.gamma, seed=args.seed)
    table = measure.alpha_markdown(estimates)
    document = {"command": args.command_line, "corpus_fingerprint": corpus.fingerprint, "estimates": [e.as_dict() for e in estimates]}
    _write(args.out, json.dumps(document, indent=2) + "\n")
    _write(args.markdown, table)
    print(table, end="")
    return 0


def _write(path, text: str) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


def _add_bench(commands) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure c, tokens per iteration and speedup of the shipped pair against Theorem 3.8",
        description="Batch-1 wall-clock benchmark of speculative decoding against our autoregressive decoder "
                    "on held-out prompts, over a gamma sweep and temperatures, with the Theorem 3.8 prediction "
                    "from the measured alpha and c (Table 4 analogue). Warm-up, repeats, medians; CUDA "
                    "synchronised. --hf adds our loops against Hugging Face generate / assisted generation.",
    )
    _add_zoo_options(bench)
    bench.add_argument("--gammas", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8], metavar="G")
    bench.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0], metavar="T")
    bench.add_argument("--prompts", type=int, default=8, help="held-out prompts, decoded one at a time (default 8)")
    bench.add_argument("--prompt-length", type=int, default=64, help="characters per prompt (default 64)")
    bench.add_argument("--max-new-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    bench.add_argument("--repeats", type=int, default=3, help="timed repeats, median reported (default 3)")
    bench.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    bench.add_argument("--seed", type=int, default=0, help="prompt selection seed (default 0)")
    bench.add_argument("--hf", action="store_true", help="also compare with Hugging Face generate (transformer drafts)")
    bench.add_argument("--hf-gamma", type=int, help="assistant tokens for the comparison (default: best gamma at T=0)")
    bench.add_argument("--out", help="write the JSON report here")
    bench.set_defaults(run=_run_bench)


def _run_bench(args: argparse.Namespace) -> int:
    import torch

    from decoders import bench, zoo
    from decoders.corpus import load_corpus
    from decoders.measure import text_windows

    settings = bench.BenchSettings(tuple(args.gammas), tuple(args.temperatures), args.prompts, args.prompt_length,
                                   args.max_new_tokens, args.repeats, args.warmup, seed=args.seed)
    dtype = getattr(torch, args.dtype)
    target, draft = zoo.load_pair(args.draft, device=args.device, dtype=dtype)
    if args.hf and not hasattr(draft, "config"):
        raise ValueError(f"--hf needs a transformer draft (transformer or distilled), got {args.draft!r}")
    prompts = text_windows(load_corpus().held_out, args.prompts, args.prompt_length, args.seed)
    report = bench.bench_pair(target, draft, prompts, settings, target_name="shipped target",
                              draft_name=args.draft)
    document = dict(report.as_dict(), command=args.command_line)
    lines = [f"c = {report.c:.4f} (draft call {report.draft_call_seconds * 1e3:.3f} ms / target call "
             f"{report.target_call_seconds * 1e3:.3f} ms), {report.environment['device_name']}, {args.dtype}",
             "   T  gamma  tokens/iter  alpha  speedup  predicted  measured/predicted"]
    for row in report.rows:
        lines.append(f"{row['temperature']:4g}  {row['gamma']:5d}  {row['tokens_per_iteration']:11.3f}  "
                     f"{row['alpha_counts']:5.3f}  {row['speedup']:7.3f}  {row['predicted_speedup']:9.3f}  "
                     f"{row['measured_over_predicted']:18.3f}")
    for temperature in settings.temperatures:
        best = report.best(temperature)
        lines.append(f"T = {temperature:g}: best gamma {best['gamma']}, speedup {best['speedup']:.3f} over our "
                     f"autoregressive decoder ({report.autoregressive_seconds[temperature]:.3f} s for "
                     f"{args.prompts} x {args.max_new_tokens} tokens), pooled alpha {report.alpha[temperature]:.3f}")
    if args.hf:
        gamma = args.hf_gamma or report.best(settings.temperatures[0])["gamma"]
        document["hf"] = bench.hf_comparison(target, draft, prompts, settings, gamma=gamma)
        for row in document["hf"]["rows"]:
            lines.append(f"HF, T = {row['temperature']:g}, gamma {gamma}: autoregressive ours {row['ar_ours_adapter_seconds']:.3f} s"
                         f" (native {row['ar_ours_native_seconds']:.3f}) vs generate {row['ar_hf_generate_seconds']:.3f} s;"
                         f" speculative ours {row['speculative_ours_adapter_seconds']:.3f} s (native "
                         f"{row['speculative_ours_native_seconds']:.3f}) vs assisted {row['speculative_hf_assisted_seconds']:.3f} s")
    _write(args.out, json.dumps(document, indent=2, allow_nan=False) + "\n")
    print("\n".join(lines))
    return 0


FIGURE_SCRIPTS = ("fig2_expected_tokens", "fig3_optimal_gamma", "fig4_speedup_operations", "table1", "fig5_timelines",
                  "simulation_vs_theory", "measured_vs_predicted", "speedup_vs_gamma", "table3_alpha",
                  "table5_lenience", "stern_fig4_blockwise", "dynamic_gamma_heatmap")  # paper_figs.SCRIPTS


def _add_figs(commands) -> None:
    figs = commands.add_parser(
        "figs",
        help="regenerate the papers' figures and tables (PNG and PDF; Markdown and CSV) from cached results",
        description="Run every paper_figs script: Leviathan et al. Figs. 2-5 and Tables 1, 3, 4 and 5 analogues, "
                    "simulation against theory, Stern et al. Fig. 4 analogue and the dynamic-gamma heat map. "
                    "Measured panels read the JSON in --results; --recompute reruns the simulations and "
                    "measurements first (tens of minutes on a CPU).",
    )
    figs.add_argument("--out", default="figures", help="directory for the figures (default figures)")
    figs.add_argument("--results", default="results", help="directory of the cached results (default results)")
    figs.add_argument("--recompute", action="store_true", help="rerun the simulations and measurements first")
    figs.add_argument("--only", nargs="+", choices=FIGURE_SCRIPTS, metavar="NAME",
                      help=f"just these scripts: {', '.join(FIGURE_SCRIPTS)}")
    figs.set_defaults(run=_run_figs)


def _run_figs(args: argparse.Namespace) -> int:
    import paper_figs

    written = paper_figs.make_all(args.out, args.results, names=tuple(args.only or paper_figs.SCRIPTS),
                                  recompute=args.recompute,
                                  progress=lambda items, **options: tqdm(items, delay=1, leave=False, disable=None,
                                                                         **options))
    for name, paths in written.items():
        print(f"{name}: {', '.join(str(path) for path in paths)}")
    return 0


def _add_report(commands) -> None:
    report = commands.add_parser(
        "report",
        help="the main job: measure a target/draft pair, recommend gamma, audit, benchmark, write report.md/.html",
        description="On the shipped pair (or --target/--draft): alpha along held-out text, c and the measured "
                    "speedup over a gamma sweep at batch 1, the gamma the calculator recommends (Theorem 3.8 at "
                    "the measured alpha and c), a statistical audit of speculative sampling at T = 1, and the "
                    "figures; writes report.json, report.md and report.html into --out. About three minutes on a "
                    "2-core CPU with the defaults.",
    )
    report.add_argument("--out", default="report", help="output directory (default report)")
    report.add_argument("--target", help="a TinyGPT file in the zoo's format (default: the shipped target)")
    report.add_argument("--draft", default="transformer",
                        help=f"a shipped draft ({ZOO_DRAFTS}) or a model file in the zoo's format (default transformer)")
    report.add_argument("--device", default="cpu", help="torch device (default cpu)")
    report.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0], metavar="T",
                        help="temperatures (default 0 1)")
    report.add_argument("--gammas", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8], metavar="G",
                        help="benchmarked gammas (default 1 to 8)")
    report.add_argument("--windows", type=int, default=32, help="held-out windows for alpha along text (default 32)")
    report.add_argument("--prompts", type=int, default=4, help="benchmark prompts, decoded one at a time (default 4)")
    report.add_argument("--max-new-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    report.add_argument("--repeats", type=int, default=3, help="timed repeats, median reported (default 3)")
    report.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    report.add_argument("--audit-n", type=int, default=4000, help="audit: sampled continuations (default 4000)")
    report.add_argument("--gamma-max", type=int, default=16, help="largest gamma the calculator considers (default 16)")
    report.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    report.set_defaults(run=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from decoders import zoo
    from paper_figs.report import ReportSettings, measure_pair, write_report

    settings = ReportSettings(tuple(args.temperatures), args.windows, tuple(args.gammas), args.prompts,
                              max_new_tokens=args.max_new_tokens, repeats=args.repeats, warmup=args.warmup,
                              audit_n=args.audit_n, gamma_max=args.gamma_max, seed=args.seed)  # checked before loading
    target = zoo.load_target(device=args.device) if args.target is None else zoo.load_file(args.target, device=args.device)
    draft = zoo.load_draft(args.draft, device=args.device) if args.draft in zoo.DRAFTS else \
        zoo.load_file(args.draft, device=args.device)
    document = measure_pair(target, draft, target_name=args.target or "shipped target", draft_name=args.draft,
                            settings=settings, command=args.command_line)
    paths = write_report(document, args.out)
    for r in document["recommendations"]:
        print(f"T = {r['temperature']:g}: recommended gamma {r['optimal_gamma']} (predicted {r['predicted_speedup']:.3f}x "
              f"at alpha {r['alpha']:.3f}, c {r['c']:.4f}); best measured gamma {r['best_measured_gamma']} at "
              f"{r['best_measured_speedup']:.3f}x")
    print(f"audit: {'PASS' if document['audit']['passed'] else 'FAIL'} (p = {document['audit']['p_value']:.3g})")
    print(f"wrote {', '.join(str(path) for path in paths if path.suffix in ('.md', '.html', '.json'))} "
          f"in {document['seconds']:.0f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectheory", description="Speculative decoding: theory, simulation, decoders, audits.")
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    _add_gamma(commands)
    _add_simulate(commands)
    _add_audit(commands)
    _add_train(commands)
    _add_alpha(commands)
    _add_bench(commands)
    _add_figs(commands)
    _add_report(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    prog = parser.prog
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise _UsageError(f"{prog}: error: a command is required (see {prog} --help)")
        prog = f"{prog} {args.command}"
        args.command_line = "spectheory " + " ".join(sys.argv[1:] if argv is None else argv)  # recorded in results
        return args.run(args)
    except _UsageError as error:
        print(error, file=sys.stderr)
    except ValueError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
