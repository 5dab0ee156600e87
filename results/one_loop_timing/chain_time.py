"""Seconds of one chain-decoder run (the shipped pair, gamma 4, T = 1, batch 8, 64 new tokens), median of 5,
in the tree at argv[1]: the before/after timing of issue 56's one loop."""
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from decoders.models.zoo import load_pair
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.sampling import Sampling
from decoders.randomness import seeded
target, draft = load_pair()
prompts = [[1 + (i * 7 + j) % 50 for j in range(16)] for i in range(8)]
config = SpeculativeConfig(4, Sampling(temperature=1.0))
seconds = []
for r in range(6):
    start = time.perf_counter()
    generate_speculative(target, draft, prompts, max_new_tokens=64, config=config, randomness=seeded(r))
    seconds.append(time.perf_counter() - start)
print(statistics.median(seconds[1:]))
