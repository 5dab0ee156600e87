from decoders.bench.inputs import load_inputs
from decoders.bench.prompts import benchmark_prompts
from decoders.engines import open_engine
from decoders.engines.base import EngineSampling
from decoders.engines.llama_server import completion_body

engine = open_engine("llama-server")
inputs = load_inputs(str(engine.model_path), [])
prompts = [row.tolist() for row in benchmark_prompts(inputs, "rewrite", 8, 192, 0)]
greedy = EngineSampling(temperature=0.0)
ids = prompts[1]
plain = engine.generate_ids(ids, 128, greedy, speculate=0)[0]
spec, counters, _, _ = engine.generate_ids(ids, 128, greedy, speculate=8)
at = next(i for i, (a, b) in enumerate(zip(plain, spec)) if a != b)
print("at", at, plain[at], spec[at], counters)
server = engine.server(0)
for j in range(1, 10):
    prefix = ids + plain[: at - j]
    server.post("/completion", dict(completion_body(prefix, 1, greedy, 0), cache_prompt=True, id_slot=0))
    body = dict(completion_body(ids + plain[:at], 1, greedy, 0), cache_prompt=True, id_slot=0, n_probs=2)
    answer = server.post("/completion", body)
    top = answer["completion_probabilities"][0]["top_logprobs"]
    print(j, answer["timings"]["prompt_n"], [(t["id"], round(t["logprob"], 4)) for t in top])
# the speculating server itself, asked for the same position after the common prefix, one token
s8 = engine.server(8)
for _k in range(3):
    a = s8.post("/completion", dict(completion_body(ids + plain[:at], 1, greedy, 0), n_probs=2))
    print(
        "spec server prompt eval",
        [(t["id"], round(t["logprob"], 4)) for t in a["completion_probabilities"][0]["top_logprobs"]],
    )
engine.close()
