"""A tiny tree-against-chain bench (``decoders.bench.tree_bench``): its tests' and the figure tests' input."""

import numpy as np
import torch

from decoders.bench.bench import BenchSettings
from decoders.bench.documents import TreeBench
from decoders.bench.inputs import Pair
from decoders.bench.tree_bench import TreePlan, bench_trees
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig

VOCAB = 16
SETTINGS = BenchSettings(prompts=2, prompt_length=8, max_new_tokens=12, repeats=1, warmup=0, batch_sizes=())


def tiny_gpt(seed):
    torch.manual_seed(seed)  # initialisation only
    return TinyGPT(TinyGPTConfig(VOCAB, d_model=16, n_layer=1, n_head=2, max_context=160)).eval()


def held_out():
    return np.random.default_rng(0).integers(0, VOCAB, size=400)


def small_tree_document(draft=None, budgets=(4, 8), dynamic=None) -> TreeBench:
    """The bench on tiny models (also the figure tests' input)."""
    target = tiny_gpt(0)
    prompts = torch.randint(
        0, VOCAB, (SETTINGS.prompts, SETTINGS.prompt_length), generator=torch.Generator().manual_seed(1)
    )
    return bench_trees(
        Pair(target, draft if draft is not None else tiny_gpt(1), draft_name="tiny"),
        prompts,
        held_out(),
        SETTINGS,
        TreePlan(budgets=budgets, dynamic=dynamic),
        progress=False,
    )
