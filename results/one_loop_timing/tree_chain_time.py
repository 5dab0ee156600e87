"""Seconds of one chain-shaped tree run through generate_tree (the shipped pair, Tree.chain(4), the rrs verifier,
T = 1, batch 8, 64 new tokens), median of 5 after a warm-up, in the source tree at argv[1]: before issue 56 the
tree step's own causal chain path ran it, after it the chain decoder does (decoders.tree.runs_as_chain)."""
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from decoders.models.zoo import load_pair
from decoders.tree import TreeConfig, generate_tree
from decoders.sampling import Sampling
from decoders.randomness import seeded
from spectheory.trees import Tree
target, draft = load_pair()
prompts = [[1 + (i * 7 + j) % 50 for j in range(16)] for i in range(8)]
config = TreeConfig(Tree.chain(4), Sampling(temperature=1.0), "rrs")
seconds = []
for r in range(6):
    start = time.perf_counter()
    generate_tree(target, draft, prompts, max_new_tokens=64, config=config, randomness=seeded(r))
    seconds.append(time.perf_counter() - start)
print(statistics.median(seconds[1:]))
