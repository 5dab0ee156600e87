"""Where does llama-server's greedy text under ngram-simple leave plain decoding on the default bench, and how close
is the tie there? Run from the repository root: python results/llama_server_greedy_np8/diagnose.py [GAMMA ...].

The default bench (`spectheory bench --engine llama-server`: 8 rewrite prompts of 192 tokens, 128 new tokens, the
engine's default options: ngram-simple, 8 slots) found greedy text unequal to plain decoding at every gamma. For each
prompt and gamma this finds the first differing position, then asks the plain server for the top two log-probabilities
there (``n_probs`` = 2, after the common prefix): a gap of a few thousandths of a nat is a near tie that a call's batch
shape can flip (docs/findings/llama-cpp.md), not a verifier bug. Both shapes are read from the plain server: its own
decode, one token a call (``n_probs`` while generating), and an evaluation of the whole prefix as one batch (``n_probs``
of the first token after it as a prompt), which is the shape a verify call has."""

import json
import sys
from pathlib import Path

from decoders.bench.inputs import load_inputs
from decoders.bench.prompts import benchmark_prompts
from decoders.engines import open_engine
from decoders.engines.base import EngineSampling

gammas = [int(g) for g in sys.argv[1:]] or [1, 4, 8]
engine = open_engine("llama-server")
inputs = load_inputs(str(engine.model_path), [])
prompts = [row.tolist() for row in benchmark_prompts(inputs, "rewrite", 8, 192, 0)]
greedy, found = EngineSampling(temperature=0.0), []
for p, ids in enumerate(prompts):
    plain = engine.generate_ids(ids, 128, greedy, speculate=0)[0]
    for gamma in gammas:
        spec = engine.generate_ids(ids, 128, greedy, speculate=gamma)[0]
        at = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a != b), None)
        if at is None:
            found.append({"prompt": p, "gamma": gamma, "equal": True})
            continue
        ((_, _, batch),) = engine.token_logprobs(ids + plain[:at], 1, greedy, speculate=0, top=2)
        decode = engine.token_logprobs(ids, at + 1, greedy, speculate=0, top=2)[at][2]
        found.append(
            {
                "prompt": p,
                "gamma": gamma,
                "equal": False,
                "position": at,
                "plain": plain[at],
                "speculative": spec[at],
                "decode_top_two": decode,
                "batch_top_two": batch,
                "decode_gap_nats": decode[0][1] - decode[1][1],
                "batch_gap_nats": batch[0][1] - batch[1][1],
            }
        )
        print(found[-1], flush=True)
engine.close()
(Path(__file__).parent / "found.json").write_text(json.dumps(found, indent=1))
print(f"{sum(not f['equal'] for f in found)} of {len(found)} (prompt, gamma) pairs differ")
