"""The policy bench's replay (docs/theory.md §13) against greedy decoding: along the target's greedy text the
replayed policy accepts exactly what the decoder with the same policy accepted, iteration by iteration; at T = 1
its draws against the along-text theory of the same text."""

import pytest
import torch
from tree_bench_inputs import VOCAB, tiny_gpt

from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import acceptance_calibration, adjusted_along_text, betas_along_text
from decoders.bench.inputs import Pair
from decoders.bench.policy_bench import acceptance_trace, predicted, replay, replay_prompts
from decoders.policies import POLICIES, make_policy
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from spectheory.costs import CostProfile
from spectheory.positional import expected_iterations_along

TOKENS = 40


@pytest.mark.parametrize("name", POLICIES)
def test_replay_against_greedy_decoding(name):
    target, draft = tiny_gpt(0), tiny_gpt(1)
    prompts = torch.randint(0, VOCAB, (3, 6), generator=torch.Generator().manual_seed(2))
    calibration = acceptance_calibration(
        target, draft, torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(3)), GREEDY, skip=8
    )
    rule = make_policy(name, gamma=3, cap=6, calibration=calibration)
    measured = []
    for prompt in prompts:  # one policy object over the prompts, as the bench runs it
        stats = generate_speculative(
            target,
            draft,
            prompt[None],
            max_new_tokens=TOKENS,
            randomness=seeded(0),
            config=SpeculativeConfig(6, GREEDY, policy=rule),
        ).stats
        measured.append([step[0] for step in stats.accepted_per_iteration])
    continuations = torch.tensor(
        [
            p.tolist()
            + list(
                generate_autoregressive(
                    target, p[None], max_new_tokens=TOKENS + 7, sampling=GREEDY, randomness=seeded(0)
                ).tokens[0]
            )
            for p in prompts
        ]
    )
    fresh = make_policy(name, gamma=3, cap=6, calibration=calibration)
    traces = acceptance_trace(Pair(target, draft), continuations, 6, GREEDY, draws=5)
    assert len(traces) == 1  # at T = 0 nothing is random: one draw, whatever draws asks
    (trace,) = traces
    iterations = replay_prompts(fresh, trace, cap=6, tokens=TOKENS)
    assert [[n for _, n in row] for row in iterations] == measured


def _sampled_text(seed: int):
    target, draft = tiny_gpt(0), tiny_gpt(1)
    prompt = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(seed))
    text = torch.tensor(
        [
            prompt[0].tolist()
            + list(
                generate_autoregressive(
                    target, prompt, max_new_tokens=TOKENS + 4, sampling=Sampling(1.0), randomness=seeded(seed)
                ).tokens[0]
            )
        ]
    )
    return target, draft, text


@pytest.mark.parametrize("gamma", [pytest.param(1, marks=pytest.mark.slow), 3])  # gamma 1: slow (docs/project.md)
def test_sampled_replay_against_along_text_theory(gamma):
    """At T = 1 a fixed gamma replayed along one sampled text accepts position t with probability beta_t =
    sum min(p, q), so its mean iterations over draws estimate expected_iterations_along(beta, gamma) without
    bias. 400 draws; the mean is tested within 4 standard errors (false-positive probability about 6e-5).
    Control: the same drafts accepted with min(1, q / p) (the ratio inverted) miss by more than 8 of them."""
    target, draft, text = _sampled_text(4)
    traces = acceptance_trace(Pair(target, draft), text, 6, Sampling(1.0), draws=400, seed=1)
    counts = torch.tensor(
        [float(len(replay(make_policy("fixed", gamma=gamma), trace, cap=gamma, tokens=TOKENS)[0])) for trace in traces]
    )
    betas, _ = betas_along_text(target, draft, text, Sampling(1.0), skip=6)
    expected = expected_iterations_along(betas[0, :TOKENS].double().numpy(), gamma)
    error = counts.std() / len(counts) ** 0.5
    assert abs(counts.mean() - expected) < 4 * error
    p, q, _, _ = adjusted_along_text(target, draft, text, Sampling(1.0), 6)  # [1, T, V]
    wrong_counts = []
    for i, trace in enumerate(traces[:100]):
        x = trace["drafted"][..., None]
        inverted = q.gather(-1, x)[..., 0] / p.gather(-1, x)[..., 0]  # the bug: min(1, q / p)
        accepted = torch.rand(inverted.shape, generator=torch.Generator().manual_seed(i)) < inverted
        wrong_counts.append(
            float(
                len(
                    replay(make_policy("fixed", gamma=gamma), dict(trace, accepted=accepted), cap=gamma, tokens=TOKENS)[
                        0
                    ]
                )
            )
        )
    assert abs(torch.tensor(wrong_counts).mean() - expected) > 8 * error


def test_predicted_speedup_against_hand_count():
    """Two iterations, (2 proposed, 2 accepted) and (0, 0): 3 + 1 tokens over 2 calls; seconds by hand: the first
    drafts 2 (0.2 + 0.05) and verifies 3 positions (1.4), the second drafted nothing (its round's 0.05, no draft
    step) and verifies 1 (1.0)."""
    profile = CostProfile(
        t_step=1.0,
        t_draft=0.1,
        t_verify=(1.0, 1.2, 1.4),
        t_iteration=0.05,
        acceptance=(0.5, 0.5),
        target_prefill=2.0,
        draft_prefill=0.5,
    )
    result = predicted([[(2, 2), (0, 0)]], profile, 4)
    assert result.tokens_per_call == 2.0
    assert result.speedup == pytest.approx((2.0 + 4 * 1.0) / (2.5 + (0.2 + 1.4 + 0.05) + (1.0 + 0.05)))


def test_policies_capped_by_the_context_against_the_uncapped_rule():
    """transformers' heuristic may draft 64 tokens; where the models' context (160) leaves less after the prompt
    (8) and the new tokens (100), the bench caps every policy there (51) instead of failing on the room, as the
    shipped report at its defaults did (64 + 128 + 65 > 256). Control: the uncapped rule does not fit."""
    from tree_bench_inputs import held_out

    from decoders.bench.bench import BenchSettings
    from decoders.bench.policy_bench import PolicyPlan, bench_policies

    target, draft = tiny_gpt(0), tiny_gpt(1)
    prompts = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(0))
    settings = BenchSettings(
        gammas=(2,), temperatures=(0.0,), prompts=1, prompt_length=8, max_new_tokens=100, repeats=1, warmup=0
    )
    document = bench_policies(
        Pair(target, draft), prompts, held_out(), settings, PolicyPlan(("heuristic",)), progress=False
    )
    heuristic = next(row for row in document.temperatures[0].rows if row.decoder == "heuristic")
    assert heuristic.policy == "heuristic (at most 51)"
    assert heuristic.mean_acceptance_length == pytest.approx(heuristic.tokens_per_call)  # the engines' names
    assert len(heuristic.per_position_acceptance_rate) == 51
    with pytest.raises(ValueError, match="exceeds the model's context of 160 tokens"):
        generate_speculative(
            target,
            draft,
            prompts,
            max_new_tokens=100,
            randomness=seeded(0),
            config=SpeculativeConfig(64, GREEDY, policy=make_policy("heuristic")),
        )


def test_policy_rows_against_every_committed_file():
    """The policy bench's row format (decoders.bench.rows.PolicyRow) reads every such row committed under results/,
    each vintage's keys with their values. Control: an unknown key is refused."""
    from committed_results import committed_rows, misread

    from decoders.bench.rows import PolicyRow

    rows = committed_rows("rows", frozenset({"decoder", "drafted_per_token"}))
    assert len(rows) >= 50, len(rows)
    assert misread(PolicyRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        PolicyRow.from_dict(dict(rows[0], odd=1))
