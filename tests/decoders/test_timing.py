"""Timing-only acceptance (decoders.timing; docs/gpu.md) against its definition: the accepted counts follow the
truncated geometric law of alpha, whatever the pair; it is not a sampler, and the audits refuse it where they see
the step and fail it where it is a black box."""

import pytest
import torch
from scipy import stats

from decoders.audit.exact import speculative_law
from decoders.audit.setups import sampler, speculative_run, tiny_draft, tiny_target
from decoders.audit.statistical import audit_sampler
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import REFERENCE_STEP, SpeculativeConfig, generate_speculative
from decoders.timing import TimingOnlyStep

GAMMA = 4


@pytest.mark.parametrize("alpha", (0.0, 0.6, 0.9, 1.0))
def test_timing_only_accepted_counts_against_truncated_geometric(alpha):
    """P(k accepted) = alpha^k (1 - alpha) for k < gamma and alpha^gamma at gamma, on a pair (a TinyGPT and a table)
    whose own acceptance is 0.06: a chi-square of goodness of fit over more than 3,000 iterations, false positive 1e-4
    (the degenerate alphas exactly)."""
    target = tiny_target("tinygpt", 5, dtype=torch.float32)
    draft = tiny_draft("tabular", target, dtype=torch.float32)
    generation = generate_speculative(
        target,
        draft,
        [[1, 2]] * 500,
        max_new_tokens=32,
        config=SpeculativeConfig(GAMMA, Sampling(1.0)),
        randomness=seeded(0),
        step=TimingOnlyStep(alpha),
    )
    counts = [n for iteration in generation.stats.accepted_per_iteration for n in iteration]
    observed = torch.bincount(torch.tensor(counts), minlength=GAMMA + 1).double()
    law = torch.tensor([alpha**k * (1 - alpha) for k in range(GAMMA)] + [alpha**GAMMA], dtype=torch.float64)
    assert len(counts) > 3000
    if alpha in (0.0, 1.0):
        assert observed[law == 0].sum() == 0
        return
    p_value = stats.chisquare(observed.numpy(), (law * len(counts)).numpy()).pvalue
    assert p_value > 1e-4, (observed.tolist(), p_value)


def test_audits_refuse_timing_only_acceptance():
    target = tiny_target("tabular", 5)
    draft = tiny_draft("tabular", target)
    config = SpeculativeConfig(2, Sampling(1.0))
    with pytest.raises(ValueError, match="not a sampler"):
        speculative_law(target, draft, [1, 2], config, 3, step=TimingOnlyStep(0.8))
    with pytest.raises(ValueError, match="not a sampler"):
        speculative_run(target, draft, [1, 2], config, 3, step=TimingOnlyStep(0.8))
    with pytest.raises(ValueError, match="verifier 'token'"):
        generate_speculative(
            target,
            draft,
            [[1, 2]],
            max_new_tokens=4,
            config=SpeculativeConfig(2, Sampling(1.0), verifier="block"),
            randomness=seeded(0),
            step=TimingOnlyStep(0.8),
        )


@pytest.mark.parametrize("step, passes", ((REFERENCE_STEP, True), (TimingOnlyStep(0.8), False)))
def test_statistical_audit_of_timing_only_acceptance_as_a_black_box(step, passes):
    """Sampled as an engine would be (the audit sees tokens only), 20,000 rows of 3 tokens: the timing mode FAILs
    (p < 1e-6 at this size), the reference step on the same pair PASSes (false positive 0.01)."""
    target = tiny_target("tinygpt", 5, dtype=torch.float32)
    draft = tiny_draft("tabular", target, dtype=torch.float32)
    config = SpeculativeConfig(2, Sampling(1.0))

    def generate(prompts, randomness):  # the decoder as a black box: nothing declares what its step is
        return generate_speculative(
            target, draft, prompts, max_new_tokens=3, config=config, randomness=randomness, step=step
        ).tokens

    report = audit_sampler(
        sampler(generate, [1, 2], 3, progress=False),
        target,
        [1, 2],
        Sampling(1.0),
        n=20_000,
        horizon=3,
        seed=0,
        draft=draft,
    )
    assert report.passed == passes and (passes or report.p_value < 1e-6), report.p_value
