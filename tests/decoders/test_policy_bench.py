"""The policy bench's replay (docs/theory.md §13) against greedy decoding: along the target's greedy text the
replayed policy accepts exactly what the decoder with the same policy accepted, iteration by iteration."""

import pytest
import torch

from decoders.autoregressive import generate_autoregressive
from decoders.harness.alpha import acceptance_calibration
from decoders.harness.policy_bench import greedy_trace, predicted, replay_prompts
from decoders.policies import POLICIES, make_policy
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from spectheory.costs import CostProfile
from tree_bench_inputs import VOCAB, tiny_gpt

TOKENS = 40


@pytest.mark.parametrize("name", POLICIES)
def test_replay_against_greedy_decoding(name):
    target, draft = tiny_gpt(0), tiny_gpt(1)
    prompts = torch.randint(0, VOCAB, (3, 6), generator=torch.Generator().manual_seed(2))
    calibration = acceptance_calibration(target, draft, torch.randint(0, VOCAB, (4, 32), generator=torch.Generator()
                                                                      .manual_seed(3)), GREEDY, skip=8)
    rule = make_policy(name, gamma=3, cap=6, calibration=calibration)
    measured = []
    for prompt in prompts:  # one policy object over the prompts, as the bench runs it
        stats = generate_speculative(target, draft, prompt[None], max_new_tokens=TOKENS, randomness=seeded(0),
                                     config=SpeculativeConfig(6, GREEDY, policy=rule)).stats
        measured.append([step[0] for step in stats.accepted_per_iteration])
    continuations = torch.tensor([p.tolist() + list(generate_autoregressive(
        target, p[None], max_new_tokens=TOKENS + 7, sampling=GREEDY, randomness=seeded(0)).tokens[0]) for p in prompts])
    fresh = make_policy(name, gamma=3, cap=6, calibration=calibration)
    iterations = replay_prompts(fresh, greedy_trace(target, draft, continuations, 6), cap=6, tokens=TOKENS)
    assert [[n for _, n in row] for row in iterations] == measured


def test_predicted_speedup_against_hand_count():
    """Two iterations, (2 proposed, 2 accepted) and (0, 0): 3 + 1 tokens over 2 calls; seconds by hand."""
    profile = CostProfile(t_step=1.0, t_draft=0.1, t_verify=(1.0, 1.2, 1.4), t_iteration=0.05, acceptance=(0.5, 0.5),
                          target_prefill=2.0, draft_prefill=0.5)
    result = predicted([[(2, 2), (0, 0)]], profile, 4)
    assert result["tokens_per_call"] == 2.0
    assert result["speedup"] == pytest.approx((2.0 + 4 * 1.0) / (2.5 + (0.2 + 1.4 + 0.05) + (0.1 + 1.0 + 0.05)))
