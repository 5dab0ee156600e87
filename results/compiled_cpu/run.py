"""Issue 69, point 5: the compiled, static-cache path (inductor) against the eager path on this CPU, interleaved in
one run: ms per new token of autoregressive decoding and the chain's speedup at gamma 4, T = 0, batch 1, for
SmolLM2-135M (the real GGUF weights) with the copy and smollm2-draft drafts, and the shipped pair (TinyGPT target
and transformer draft, compiled through their GPT-2 twins). Usage: python results/compiled_cpu/run.py OUT.json
[REPEATS]. Compile time is the first (warm-up) run of each compiled decoder, reported apart."""

import statistics
import sys
import time

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import environment
from decoders.bench.inputs import compiled_models, load_inputs
from decoders.bench.prompts import text_windows
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.outputs import write_json

GAMMA, PROMPTS, PROMPT_LENGTH, NEW = 4, 3, 64, 48
PAIRS = {"smollm2": ("smollm2", ["copy", "smollm2-draft"]), "shipped": (None, ["transformer"])}


def decoders_of(target, drafts: dict) -> dict:
    """name -> decode(prompt) for the autoregressive decoder and the chain with each draft."""
    runs = {
        "autoregressive": lambda prompt: generate_autoregressive(
            target, prompt, max_new_tokens=NEW, sampling=GREEDY, randomness=seeded(0)
        )
    }
    for name, draft in drafts.items():
        runs[f"chain {name}"] = lambda prompt, draft=draft: generate_speculative(
            target, draft, prompt, max_new_tokens=NEW, config=SpeculativeConfig(GAMMA, GREEDY), randomness=seeded(0)
        )
    return runs


def timed(decode, prompts) -> tuple:
    started = time.perf_counter()
    tokens = [decode(prompts[i : i + 1]).tokens[0] for i in range(len(prompts))]
    return time.perf_counter() - started, tokens


def main(out: str, repeats: int = 5) -> None:
    torch.manual_seed(0)
    document = {
        "environment": environment("cpu", torch.float32),
        "gamma": GAMMA,
        "temperature": 0.0,
        "batch_size": 1,
        "prompts": PROMPTS,
        "prompt_length": PROMPT_LENGTH,
        "max_new_tokens": NEW,
        "repeats": repeats,
        "backend": "inductor",
        "pairs": {},
    }
    for pair, (target_name, draft_names) in PAIRS.items():
        inputs = load_inputs(target_name, draft_names, compile="off")
        prompts = torch.tensor(text_windows(inputs.held_out, PROMPTS, PROMPT_LENGTH, 3))
        paths = {
            "eager": decoders_of(inputs.target, inputs.drafts),
            "compiled": decoders_of(*compiled_models(inputs.target, inputs.drafts, "on")),
        }
        seconds = {path: {name: [] for name in runs} for path, runs in paths.items()}
        first, tokens = {}, {}
        for path, runs in paths.items():  # warm-up: inductor compiles every call shape here
            for name, decode in runs.items():
                first[f"{path} {name}"], tokens[(path, name)] = timed(decode, prompts)
                print(pair, path, name, f"first run {first[f'{path} {name}']:.1f} s", flush=True)
        for _ in range(repeats):  # interleaved: eager and compiled of each decoder back to back
            for name in paths["eager"]:
                for path in ("eager", "compiled"):
                    seconds[path][name].append(timed(paths[path][name], prompts)[0])
        new_tokens = PROMPTS * NEW
        rows = {}
        for name in paths["eager"]:
            ms = {path: [1000 * s / new_tokens for s in seconds[path][name]] for path in paths}
            rows[name] = {
                **{f"{path}_ms_per_token": statistics.median(ms[path]) for path in paths},
                **{f"{path}_ms_per_token_range": [min(ms[path]), max(ms[path])] for path in paths},
                "compiled_over_eager": statistics.median(c / e for c, e in zip(ms["compiled"], ms["eager"])),
                "greedy_tokens_equal": tokens[("eager", name)] == tokens[("compiled", name)],
            }
        for name in rows:
            if name != "autoregressive":
                for path in paths:
                    rows[name][f"{path}_speedup"] = statistics.median(
                        a / c for a, c in zip(seconds[path]["autoregressive"], seconds[path][name])
                    )
        document["pairs"][pair] = {"target": target_name or "shipped target", "rows": rows, "first_run_seconds": first}
        print(pair, rows, flush=True)
    write_json(out, document, command="python " + " ".join(sys.argv))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
