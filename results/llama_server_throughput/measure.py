"""The audit's samples per second against the server's own generation of the same kind of tokens: per setting,
(a) the engine's generate() of 4-token samples at n_cmpl 16 (the audit's path), (b) the same server generating 64
tokens per completion, 16 per request (the server's plain generation speed, prompt amortized), both in tokens/s;
interleaved, 3 repeats, medians."""

import json
import statistics
import sys

from decoders.engines import open_engine
from decoders.engines.base import EngineSampling

P = "<|im_start|>user\nTell me something.<|im_end|>\n<|im_start|>assistant\n"
T1 = EngineSampling(1.0)
settings = {
    "plain": ("np=16,completions=16", 0),
    "match": ("spec=draft-simple,draft=/tmp/w/smollm2-8.gguf,np=16,completions=16", 4),
    "rejection": ("spec=draft-simple,draft=/tmp/w/smollm2-8.gguf,sampling=probabilistic,np=16,completions=16", 4),
}
engines = {name: open_engine("llama-server:" + opts) for name, (opts, _) in settings.items()}
out = {name: {"audit_tokens_per_second": [], "long_tokens_per_second": []} for name in settings}
for repeat in range(3):
    for name, (_opts, g) in settings.items():
        e = engines[name]
        r = e.generate(P, 320, 4, T1, speculate=g, seed=1000 * repeat)
        out[name]["audit_tokens_per_second"].append(4 * len(r.rows) / r.seconds)
        r = e.generate(P, 32, 64, T1, speculate=g, seed=5000 + 1000 * repeat)
        out[name]["long_tokens_per_second"].append(r.generated_tokens / r.seconds)
        print(
            repeat, name, out[name]["audit_tokens_per_second"][-1], out[name]["long_tokens_per_second"][-1], flush=True
        )
for v in out.values():
    v["audit_median"] = statistics.median(v["audit_tokens_per_second"])
    v["long_median"] = statistics.median(v["long_tokens_per_second"])
    v["ratio"] = v["audit_median"] / v["long_median"]
    v["audit_samples_per_second"] = v["audit_median"] / 4
    v["ratio_to_plain_long"] = (
        v["audit_median"] / out["plain"]["long_median"] if "long_median" in out["plain"] else None
    )
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1], "w"), indent=1)
for e in engines.values():
    e.close()
