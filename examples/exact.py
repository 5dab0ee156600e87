"""The README's example: decode speculatively, then prove the decoder exact by enumeration."""

import torch

from decoders import Sampling, SpeculativeConfig, generate_speculative, seeded
from decoders.audit import autoregressive_law, compare_laws, speculative_law, tiny_draft, tiny_target

target = tiny_target("tabular", vocab_size=5)  # or your own model: decoders.models.protocol.CausalModel
draft = tiny_draft("close", target)  # a noisy copy of the target
config = SpeculativeConfig(gamma=3, sampling=Sampling(temperature=1.0))
prompt = [1, 2]
run = generate_speculative(
    target, draft, torch.tensor([prompt]), max_new_tokens=16, config=config, randomness=seeded(0)
)
print(run.tokens[0], f"{run.stats.mean_tokens_per_iteration:.2f} tokens per target call")

# Exact: every random draw of the decoder enumerated; its law of the next 3 tokens against the target's own.
law, branches = speculative_law(target, draft, prompt, config, horizon=3)
report = compare_laws(
    law, autoregressive_law(target, prompt, config.sampling, 3), method="dp", horizon=3, branches=branches
)
print(f"{branches} branches, total variation {report.total_variation:.12f}:", "PASS" if report.passed else "FAIL")
