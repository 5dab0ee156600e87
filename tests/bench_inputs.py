"""Tiny random models and small bench settings (``decoders.bench.bench``): the bench's and the forecast's tests'
input."""

import torch

from decoders.bench.bench import BenchSettings
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig

V = 20


def tiny(d_model, layers, seed):
    config = TinyGPTConfig(V, d_model=d_model, n_layer=layers, n_head=2, max_context=96)
    return TinyGPT(config).initialize(torch.Generator().manual_seed(seed), std=0.3).eval()


SETTINGS = BenchSettings(
    gammas=(1, 3),
    temperatures=(0.0, 1.0),
    prompts=2,
    prompt_length=8,
    max_new_tokens=12,
    repeats=2,
    warmup=1,
    call_steps=4,
)
