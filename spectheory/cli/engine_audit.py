"""`spectheory audit --engine`: a serving engine's speculative sampler audited (docs/engines.md). At
temperature 0 its greedy tokens with speculation against its plain greedy tokens at every --gammas; above it,
its samples with speculation against a second sample by the two-sample test: the same engine plain
(--against plain), a second server (--against URL) or a file (--against FILE.jsonl); --samples A.jsonl
--against B.jsonl compares two files drawn anywhere."""

from __future__ import annotations

import argparse
import json
import statistics

from tqdm import tqdm

from decoders.audit.samples import read_rows
from decoders.engines import END, ENGINES, EngineRun, EngineSampling, open_engine
from decoders.engines.audit import (SECOND_SIDE_SEED, against_model, batch_shape_difference, check_model_law,
                                    compare_runs, greedy_checks)
from decoders.engines.llama_cpp import LlamaCppEngine
from decoders.harness.zoo import load_named
from decoders.engines.openai import is_url
from spectheory.outputs import check_writable, write_json
from spectheory.validation import as_int

__all__ = ["add_engine_arguments", "engine_requested", "run_engine_audit", "ENGINE_PROMPT"]

#: The default prompt: a ChatML rewrite request (SmolLM2's template), where prompt lookup has text to copy.
ENGINE_PROMPT = ("<|im_start|>user\nAdd type hints to this Python code. Repeat all of the code:\n```python\n"
                 "def scale(values, factor):\n    total = 0\n    for value in values:\n        total += value * factor\n"
                 "    return total\n```<|im_end|>\n<|im_start|>assistant\n```python\n")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engines (docs/engines.md)")
    group.add_argument("--engine", metavar="ENGINE", help=f"audit a serving engine: {', '.join(ENGINES)} (in-process, "
                       "on --target's GGUF file, default smollm2) or an OpenAI-compatible server's URL")
    group.add_argument("--against", metavar="WHAT", help="the second sample: plain (the engine without speculation, "
                       "the default), a server URL, or a samples file (JSON Lines); or model: our float32 model of "
                       "the same GGUF file, by the statistical audit")
    group.add_argument("--speculate", type=int, default=4, help="the engine's draft tokens per step (default 4)")
    group.add_argument("--gammas", type=int, nargs="+", default=list(range(1, 9)),
                       help="temperature 0: the speculation lengths checked for greedy equality (default 1..8)")
    group.add_argument("--min-p", type=float, default=0.0, help="engine sampling: min-p (default 0, off)")
    group.add_argument("--repeat-penalty", type=float, default=1.0, help="engine sampling: repetition penalty "
                       "(default 1, off)")
    group.add_argument("--concurrency", type=int, default=4, help="requests in flight to a server (default 4)")
    group.add_argument("--out", metavar="FILE.json", help="write the verdict and both samples as JSON")


def engine_requested(args: argparse.Namespace) -> bool:
    return args.engine is not None or args.against is not None


def _sampling(args) -> EngineSampling:
    return EngineSampling(args.temperature, args.top_k or 0, 1.0 if args.top_p is None else args.top_p,
                          args.min_p, args.repeat_penalty)


def _side(spec: str, args, sampling: EngineSampling, n: int, horizon: int, *, speculate: int, seed: int,
          engine=None) -> tuple[str, EngineRun]:
    """(description, run) of one side: an engine (opened here unless given) or a samples file."""
    if spec.endswith(".jsonl") and not is_url(spec):
        prompt, rows = read_rows(spec)
        return f"samples file {spec} ({len(rows)} rows)", EngineRun(tuple(rows), 0.0)
    engine = engine or _open(spec, args)
    with tqdm(total=n, desc=f"{engine.name} speculate {speculate}", unit="sample", delay=1, leave=False,
              disable=None) as bar:
        run = engine.generate(args.prompt_text or ENGINE_PROMPT, n, horizon, sampling, speculate=speculate,
                              seed=seed, progress=bar.update)
    lost = f", {run.lost} of {n} samples lost" if run.lost else ""
    return f"{engine.name}, speculate {speculate} ({len(run.rows)} rows{lost})", run


def _against_model(args, engine, described: str, run: EngineRun, sampling: EngineSampling) -> int:
    """--against model: the engine's samples against our model of the same GGUF file (docs/engines.md §3)."""
    if not isinstance(engine, LlamaCppEngine):
        raise ValueError("--against model needs the in-process engine (--engine llama-cpp): it reads token ids")
    target, _ = load_named(str(engine.model_path), role="target")
    found = against_model(engine, target, args.prompt_text or ENGINE_PROMPT, run, sampling, level=args.level,
                          seed=args.seed)
    tv = found["numeric_tv"]
    print(f"audit: {described} against our float32 model of {engine.model_path.name}; {sampling.describe()}")
    print(f"numeric difference alone (llama.cpp's quantized kernels against our float32), total variation per "
          f"position along its greedy text: median {statistics.median(tv):.4f}, max {max(tv):.4f}")
    print(f"statistical audit: p = {found['audit']['p_value']:.3g}: {'PASS' if found['passed'] else 'FAIL'}")
    if args.out:
        write_json(args.out, dict(found, engine=described, sampling=sampling.describe(),
                                  rows=[list(row) for row in run.rows]), command=args.command_line)
    return 0 if found["passed"] else 1


def _open(spec: str, args):
    return open_engine(spec, gguf=None if args.target == "tinygpt" else args.target, concurrency=args.concurrency)


def _check(args) -> tuple[EngineSampling, int, int]:
    if args.engine is None and args.samples is None:
        raise ValueError("--against compares an engine (--engine) or a samples file (--samples) with a second sample")
    if args.samples is not None and args.against is None:
        raise ValueError("--samples with --engine flags needs --against B.jsonl (or drop --engine flags)")
    if args.exact or args.mutant or args.policy:
        raise ValueError("--engine audits the engine's own sampler: drop --exact, --mutant and --policy")
    as_int("speculate", args.speculate, low=1, high=64)
    as_int("concurrency", args.concurrency, low=1, high=256)
    for gamma in args.gammas:
        as_int("gammas", gamma, low=1, high=64)
    if args.out:
        check_writable(args.out)
    if args.against == "model":
        check_model_law(_sampling(args))
    horizon = 64 if args.temperature == 0 and args.horizon is None else (4 if args.horizon is None else args.horizon)
    return _sampling(args), as_int("horizon", horizon, low=1, high=1024), as_int(
        "n", 5000 if args.n is None else args.n, low=2, high=1_000_000)


def run_engine_audit(args: argparse.Namespace) -> int:
    sampling, horizon, n = _check(args)
    if sampling.temperature == 0 and args.samples is None:
        engine = _open(args.engine, args)
        with tqdm(total=len(args.gammas), desc="greedy", unit="gamma", delay=1, leave=False, disable=None) as bar:
            plain, checks = greedy_checks(engine, args.prompt_text or ENGINE_PROMPT, horizon, args.gammas, bar.update)
        explained = [check for check in checks if not check.equal and check.diagnosis
                     and check.diagnosis["verdict"].startswith("batch-shape")]
        passed, samples = all(check.equal for check in checks) or len(explained) == sum(not c.equal for c in checks), {}
        document = {"engine": engine.name, "horizon": horizon, "prompt": args.prompt_text or ENGINE_PROMPT,
                    "prompt_ids": list(engine.tokenize(args.prompt_text or ENGINE_PROMPT))
                    if isinstance(engine, LlamaCppEngine) else None, "plain": list(plain),
                    "checks": [check.as_dict() for check in checks], "passed": passed}
        print(f"audit: {engine.name}, greedy with speculation against its plain greedy decoding, {horizon} tokens")
        for check in checks:
            counts, why = check.counters, check.diagnosis
            accepted = f" (accepted {counts['num_accepted_tokens']} of {counts['num_draft_tokens']} drafted)" \
                if counts else ""
            print(f"gamma {check.gamma}: " + ("equal" if check.equal else f"differs at token {check.first_difference}")
                  + accepted + ("" if why is None else f"; margin of the plain token {why['margin_one_token']:+.3f} "
                                f"in a one-token call, {why['margin_two_tokens']:+.3f} in a two-token call: "
                                f"{why['verdict']}"))
        if isinstance(engine, LlamaCppEngine):
            shape = batch_shape_difference(engine, document["prompt_ids"], [t for t in plain if t != END])
            document["batch_shape"] = shape
            print(f"the same positions evaluated one token per call and {shape['chunk']} per call: logits differ by "
                  f"up to {max(shape['max_logit_difference']):.3f}; the laws at T = 1 by a total variation of median "
                  f"{shape['tv_median']:.4f}, max {shape['tv_max']:.4f} per position")
        print("greedy: " + ("PASS" if passed else "FAIL") + (f" ({len(explained)} of {len(checks)} gammas differ by "
                                                             "batch-shape numerics)" if explained else ""))
    else:
        engine = None if args.engine is None else _open(args.engine, args)
        a_text, a = _side(args.samples or args.engine, args, sampling, n, horizon, speculate=args.speculate,
                          seed=args.seed, engine=engine)
        against = args.against or "plain"
        if against == "model":
            return _against_model(args, engine, a_text, a, sampling)
        b_text, b = _side(args.engine if against == "plain" else against, args, sampling, n, horizon, speculate=0,
                          seed=args.seed + SECOND_SIDE_SEED, engine=engine if against == "plain" else None)
        report = compare_runs(a, b, args.level)
        passed = report.passed
        document = dict(report.as_dict(), a=a_text, b=b_text, sampling=sampling.describe(), lost=[a.lost, b.lost])
        samples = {"rows_a": [list(row) for row in a.rows], "rows_b": [list(row) for row in b.rows]}
        print(f"audit: {a_text} against {b_text}; {sampling.describe()}, horizon {report.horizon}")
        print(f"two-sample (token KS and prefix chi-square per position, Bonferroni): p = {report.p_value:.3g}, "
              f"detectable TV {report.detectable_tv:.3f} at n = {report.n_a} + {report.n_b}: "
              f"{'PASS' if passed else 'FAIL'}")
    if args.out:
        write_json(args.out, dict(document, **samples), command=args.command_line)
    if args.json:
        print(json.dumps(document, allow_nan=False))
    return 0 if passed else 1
