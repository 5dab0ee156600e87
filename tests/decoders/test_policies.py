"""Draft-length policies (docs/theory.md §13) against autoregressive decoding (greedy, token for token), against
the target's exact law (every policy, whole runs), and against the rules the engines document."""

import copy

import numpy as np
import pytest
import torch

from decoders.audit import setups
from decoders.audit.exact import autoregressive_law, compare_laws, speculative_law, whole_run_law
from decoders.audit.mutants import mutant
from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import acceptance_calibration
from decoders.models.history import TabularModel
from decoders.policies import (
    POLICIES,
    BatchSchedulePolicy,
    HeuristicPolicy,
    MovingAveragePolicy,
    calibrate_acceptance,
    make_policy,
    roc_threshold,
)
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative

VOCAB = 5
PROMPTS = [[1, 2, 3], [4], [2, 2, 0, 1], [3, 3]]


def pair():
    """The audits' tiny TinyGPT pair (peaked but varied conditionals), float64."""
    target = setups.tiny_target("tinygpt", VOCAB)
    return target, setups.tiny_draft("tinygpt", target)


def policy(name, target, draft, cap=None, sampling=GREEDY):
    windows = torch.randint(0, VOCAB, (8, 16), generator=torch.Generator().manual_seed(5))
    calibration = acceptance_calibration(target, draft, windows, sampling, skip=2) if name == "rejection-risk" else None
    return make_policy(name, gamma=3, cap=cap, calibration=calibration, batch_size=None if cap is None else 1)


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("batch", (1, 4))
def test_greedy_with_policy_against_autoregressive(name, batch):
    target, draft = pair()
    reference = generate_autoregressive(
        target, PROMPTS[:batch], max_new_tokens=24, sampling=GREEDY, randomness=seeded(0)
    )
    config = SpeculativeConfig(8, GREEDY, policy=policy(name, target, draft))
    generation = generate_speculative(
        target, draft, PROMPTS[:batch], max_new_tokens=24, config=config, randomness=seeded(1)
    )
    assert generation.tokens == reference.tokens
    proposed = [n for step in generation.stats.proposed_per_iteration for n in step]
    assert max(proposed) <= 8 and generation.stats.draft_calls <= 8 * generation.stats.iterations


@pytest.mark.parametrize("name", POLICIES)
def test_exact_law_with_policy_against_target(name):
    """The prefix programme at T = 1 (each iteration from a fresh policy state), every policy capped at 3 drafts."""
    target, draft = pair()
    sampling = Sampling(1.0)
    config = SpeculativeConfig(3, sampling, policy=policy(name, target, draft, cap=3, sampling=sampling))
    law, branches = speculative_law(target, draft, [1, 2], config, 3, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 3), method="prefix-dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, (name, report.max_abs_difference)


@pytest.mark.parametrize(
    "name",
    ["heuristic"] + [pytest.param(name, marks=pytest.mark.slow) for name in ("confidence-roc", "moving-average")],
)
def test_exact_whole_runs_with_stateful_policy_against_target(name):
    """Whole runs (the policy's state carries from iteration to iteration) on tables of V = 3, capped at 2."""
    target = TabularModel.random(torch.Generator().manual_seed(0), 3, 2, dtype=torch.float64)
    draft = TabularModel.random(torch.Generator().manual_seed(1), 3, 1, dtype=torch.float64)
    sampling = Sampling(1.0)
    chosen = make_policy(name, cap=2)
    if name == "moving-average":
        chosen.warmup, chosen.interval = 1, 1  # decide after every iteration, so that its state matters here

    def run(randomness):
        config = SpeculativeConfig(2, sampling, policy=copy.deepcopy(chosen))
        return generate_speculative(
            target, draft, [[1, 2]], max_new_tokens=3, config=config, randomness=randomness
        ).tokens[0]

    law, branches = whole_run_law(run, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 3), method="whole-run", horizon=3, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, (name, report.max_abs_difference)


def test_policy_peeks_fails_the_exact_audit():
    """Negative control: a rule that stops before the draft the target likes less (reading p) moves the law."""
    target, draft = pair()
    sampling = Sampling(1.0)
    law, branches = speculative_law(
        target, draft, [1, 2], SpeculativeConfig(3, sampling), 3, step=mutant("policy-peeks").step, progress=False
    )
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 3), method="prefix-dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference > 1e-3


def test_heuristic_against_transformers_rule():
    """+2 after a fully accepted iteration, max(1, n - 1) otherwise; "heuristic" carries the length to the next
    call, "heuristic-transient" starts again from num_assistant_tokens."""
    for transient in (False, True):
        rule = HeuristicPolicy(gamma_max=64, start=5, transient=transient)
        state = rule.start(3, "cpu")
        rule.update(state, torch.tensor([5, 5, 1]), torch.tensor([5, 2, 0]))
        assert state["length"].tolist() == [7, 4, 4]
        assert rule.start(3, "cpu")["length"].tolist() == ([5, 5, 5] if transient else [7, 4, 4])


def test_heuristic_start_against_transformers_default():
    """The heuristic schedule starts where transformers' does, in the decoders and in the simulators (the simulator
    once started at 5)."""
    from transformers import GenerationConfig

    import sims.policies
    from decoders import policies

    default = GenerationConfig._get_default_generation_params()["num_assistant_tokens"]
    assert policies.HEURISTIC_START == sims.policies.HEURISTIC_START == default == 20
    assert make_policy("heuristic").start(1, "cpu")["length"].tolist() == [default]


def test_roc_threshold_against_brute_force():
    """fpr + 3 fnr minimised over every candidate threshold, as transformers' sklearn ROC curve does."""
    rng = np.random.default_rng(0)
    scores = rng.random(40)
    matches = (rng.random(40) < scores).astype(int)
    best = min(
        (np.mean(scores[matches == 0] >= t) + 3 * (1 - np.mean(scores[matches == 1] >= t)), -t)
        for t in np.concatenate([[np.inf], scores])
    )
    assert roc_threshold(scores, matches) == -best[1]


def test_calibration_against_exact_acceptance():
    """For one (p, q) the calibrated acceptance of a bin is the q-weighted mean of min(1, p/q) over its tokens."""
    p = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    q = torch.tensor([[0.05, 0.15, 0.8]], dtype=torch.float64)
    calibration = calibrate_acceptance(p, q, bins=4)
    predicted = calibration.predict(q[0])
    assert predicted.tolist() == pytest.approx([(0.05 * 1 + 0.15 * 1) / 0.2] * 2 + [0.25])


def test_moving_average_against_sglang_rule():
    """An EMA (0.2) of accepted drafts; after 10 warm-up iterations, every 5: down while below the lower step - 0.75,
    up while above the current step - 0.5."""
    rule = MovingAveragePolicy()
    state = rule.start(1, "cpu")
    assert rule.limit(state, 1, "cpu").tolist() == [5]  # the middle of (1, 3, 5, 7), the average starts there
    for _ in range(10):
        rule.update(state, torch.tensor([5]), torch.tensor([0]))
    assert rule.limit(state, 1, "cpu").tolist() == [3]  # 5 x 0.8^10 = 0.537 <= 3 - 0.75, not <= 1 - 0.75
    for _ in range(4):
        rule.update(state, torch.tensor([3]), torch.tensor([3]))
    assert rule.limit(state, 1, "cpu").tolist() == [3]  # no decision until the 15th iteration
    rule.update(state, torch.tensor([3]), torch.tensor([7]))
    assert rule.limit(state, 1, "cpu").tolist() == [5]  # 2.99 > 3 - 0.5, not > 5 - 0.5


def test_batch_schedule_against_its_table():
    rule = BatchSchedulePolicy({1: 4, 8: 2, 32: 1})
    assert [int(rule.limit({}, size, "cpu")[0]) for size in (1, 7, 8, 31, 32, 64)] == [4, 4, 2, 2, 1, 1]


def test_batch_schedule_default_against_its_docstring():
    """The docstring's default table is the code's (it once said {4: 4, ...} where the code had {1: 4, ...})."""
    assert BatchSchedulePolicy().schedule == {1: 4, 8: 2, 32: 1}
    assert "default {1: 4, 8: 2, 32: 1}" in BatchSchedulePolicy.__doc__


def test_unknown_policy_names_the_choices():
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("nope")


def test_exact_law_with_carried_heuristic_against_target():
    """transformers' heuristic length carries from one call to the next; the prefix programme must start each
    iteration from a fresh copy, or the lengths of one batch of branches leak into the next. At the audit's
    defaults (V = 5, gamma 2, horizon 4) the leak lost 1.7% of the mass (max |law - target| 0.0055)."""
    from decoders.audit.setups import tiny_draft, tiny_target

    target = tiny_target("tinygpt", 5)
    draft = tiny_draft("tabular", target)
    sampling = Sampling(1.0)
    config = SpeculativeConfig(2, sampling, policy=make_policy("heuristic", gamma=2, cap=2))
    law, branches = speculative_law(target, draft, [1, 2], config, 4, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], sampling, 4), method="prefix-dp", horizon=4, branches=branches
    )
    assert report.max_abs_difference <= 1e-9, report.max_abs_difference
    assert config.afresh().policy is not config.policy and config.afresh().policy.initial == 2
