"""Seconds of one run on the shipped pair (batch 8, prompts of 16 tokens, 64 new tokens, T = 1, one torch thread),
median of 5 after a warm-up, in the source tree at argv[1]: the chain decoder at gamma 4 (argv[2] "chain", the
default), or a chain-shaped tree, Tree.chain(4) with the rrs verifier, through generate_tree ("tree-chain"). The
before/after timings of issue 56 (README.md)."""

import statistics
import sys
import time

sys.path.insert(0, sys.argv[1])  # the source tree to time: the imports below come from it
import torch  # noqa: E402

torch.set_num_threads(1)
from decoders.randomness import seeded  # noqa: E402
from decoders.sampling import Sampling  # noqa: E402
from decoders.speculative import SpeculativeConfig, generate_speculative  # noqa: E402
from decoders.tree import TreeConfig, generate_tree  # noqa: E402
from decoders.zoo import load_pair  # noqa: E402
from spectheory.trees import Tree  # noqa: E402

target, draft = load_pair()
prompts = [[1 + (i * 7 + j) % 50 for j in range(16)] for i in range(8)]
sampling = Sampling(temperature=1.0)
if (sys.argv[2] if len(sys.argv) > 2 else "chain") == "chain":
    decode, config = generate_speculative, SpeculativeConfig(4, sampling)
else:
    decode, config = generate_tree, TreeConfig(Tree.chain(4), sampling, "rrs")
seconds = []
for r in range(6):
    start = time.perf_counter()
    decode(target, draft, prompts, max_new_tokens=64, config=config, randomness=seeded(r))
    seconds.append(time.perf_counter() - start)
print(statistics.median(seconds[1:]))
