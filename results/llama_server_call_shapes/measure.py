"""What does an output row cost? A verify batch of k tokens asks for logits at all k positions; a prompt
evaluation of k tokens (how call_costs times t_verify(k)) at the last one only. Compare, on plain servers of the
target and of the 24-block draft (8 slots, 2 threads): the prompt evaluation of k tokens, and one decode step of k
greedy sequences in parallel (n_cmpl = k: k tokens, k output rows, k samples), interleaved over repeats.
Run from the repository root: python results/llama_server_call_shapes/measure.py TARGET.gguf DRAFT.gguf [REPEATS]
(here: SmolLM2-135M-Instruct Q4_1 and ``spectheory export-gguf --layers 24``); writes call_shapes.json beside it."""

import json
import statistics
import sys
from pathlib import Path

from decoders.bench.inputs import load_inputs
from decoders.bench.prompts import benchmark_prompts
from decoders.engines.base import EngineSampling
from decoders.engines.llama_server import LlamaServer, ServerOptions, completion_body, width_seconds

MODEL, DRAFT = sys.argv[1], sys.argv[2]
inputs = load_inputs(MODEL, [])
prompt = benchmark_prompts(inputs, "rewrite", 4, 192, 0)[3].tolist()  # not the bench's first prompt
K = 5
greedy = EngineSampling(temperature=0.0)


def step_seconds(server, k, tokens=33):
    answer = server.post("/completion", dict(completion_body(prompt, tokens, greedy, 0), n_cmpl=k))
    answers = answer if k > 1 else [answer]
    return statistics.median(a["timings"]["predicted_ms"] / (a["timings"]["predicted_n"] - 1) for a in answers)


out = {}
for name, path in (("target", MODEL), ("draft24", DRAFT)):
    server = LlamaServer(ServerOptions(slots=8, completions=8, threads=2).arguments(path, 0))
    widths, steps = [], {k: [] for k in range(1, K + 1)}
    for _rep in range(int(sys.argv[3]) if len(sys.argv) > 3 else 5):
        widths.append([s * 1e3 for s in width_seconds(server, prompt, K, 3)])
        for k in steps:
            steps[k].append(step_seconds(server, k))
    server.stop()
    w = [statistics.median(x[k] for x in widths) for k in range(K)]
    s = [statistics.median(steps[k]) for k in steps]
    out[name] = {"prompt_eval_ms": w, "parallel_step_ms": s, "widths_all": widths, "steps_all": steps}
    print(name, "prompt eval k=1..5 ms", [round(x, 2) for x in w])
    print(name, "parallel step k=1..5 ms", [round(x, 2) for x in s])
    print(name, "step - eval", [round(b - a, 2) for a, b in zip(w, s)])
(Path(__file__).parent / "call_shapes.json").write_text(json.dumps(out, indent=1))
