"""The two-sample audit (decoders/audit/two_sample.py) against its stated size and power, on a cheap engine
stand-in; the engine counters against hand counts."""

import numpy as np
import pytest
from scipy import stats

from decoders.audit.two_sample import detectable_tv_two_sample, two_sample_test
from engines.audit import SECOND_SIDE_SEED, as_categories, compare_runs, numeric_tv
from engines.base import END, EngineSampling
from engines.llama_cpp import proposal_counters
from engine_standin import MarkovEngine

T1 = EngineSampling(temperature=1.0)


def test_false_positive_rate_against_binomial_interval():
    """Plain against plain over 100 seeds at level 0.01: the number of failures lies in the binomial 99%
    interval [0, 4] (the interval's own miss probability is at most 1%, and the test is conservative, so this
    fails by chance with probability below 1%). Control: the planted bug (one side sampled at T = 0.9 when
    asked for T = 1) fails at every one of ten seeds at n = 5,000 a side (at 2,000 it fails at 9 of 10)."""
    engine, buggy = MarkovEngine(), MarkovEngine(applied_temperature=0.9)
    failures = sum(not compare_runs(engine.generate("p", 2000, 4, T1, seed=s),
                                    engine.generate("p", 2000, 4, T1, seed=s + SECOND_SIDE_SEED), 0.01).passed
                   for s in range(100))
    low, high = stats.binom.interval(0.99, 100, 0.01)
    assert low <= failures <= high, failures
    assert all(not compare_runs(engine.generate("p", 5000, 4, T1, seed=s),
                                buggy.generate("p", 5000, 4, T1, seed=s + SECOND_SIDE_SEED), 0.01).passed
               for s in range(10))


def test_detectable_tv_against_simulated_power():
    """A deviation of the stated detectable total variation at one position, mass moved onto the likeliest token
    (what a temperature bug does), is detected in at least 80% of 40 seeds (stated: 90%; asymptotic)."""
    n, horizon, level = 3000, 4, 0.01
    tv = detectable_tv_two_sample(n, n, 2 * horizon, level)
    engine, detected = MarkovEngine(), 0
    for s in range(40):
        a = np.array(engine.generate("p", n, horizon, T1, seed=s).rows)
        b = np.array(engine.generate("p", n, horizon, T1, seed=s + SECOND_SIDE_SEED).rows)
        rng = np.random.default_rng(s)
        top = np.bincount(b[:, 1], minlength=30).argmax()
        moved = (rng.random(n) < tv / (1 - np.mean(b[:, 1] == top))) & (b[:, 1] != top)
        b[moved, 1] = top  # the law at position 2 moves tv of its mass onto its likeliest token
        detected += not two_sample_test(a, b, level).passed
    assert detected >= 32, detected


def test_two_sample_errors():
    with pytest.raises(ValueError, match="one horizon"):
        two_sample_test(np.zeros((3, 2), dtype=int), np.zeros((3, 3), dtype=int))
    with pytest.raises(ValueError, match=r"sample a must be token ids of shape \[n >= 2"):
        two_sample_test(np.zeros((1, 2), dtype=int), np.zeros((3, 2), dtype=int))
    with pytest.raises(ValueError, match="level must be"):
        two_sample_test(np.zeros((3, 2), dtype=int), np.zeros((3, 2), dtype=int), level=0.0)


def test_categories_of_ids_and_text_pieces_against_hand_codes():
    a, b = as_categories([(5, "x"), (5, END)], [("x", 5), (7, END)])
    assert a.tolist() == [[0, 1], [0, 2]] and b.tolist() == [[1, 0], [3, 2]]


def test_proposal_counters_against_hand_counts():
    """Prompt [1, 2, 3], emitted 4 5 6 7 8: a proposal after 4 (context 4) of [5, 9] accepts 1; after 6
    (context 6) of [7, 8] accepts 2; an empty one after 5 is a round without a draft; after 8 (context 8) of
    [1] is cut by the horizon and not counted."""
    sequence = [1, 2, 3, 4, 5, 6, 7, 8]
    counters = proposal_counters([(4, [5, 9]), (5, []), (6, [7, 8]), (8, [1])], sequence, 3)
    assert counters == {"num_drafts": 2, "num_draft_tokens": 4, "num_accepted_tokens": 3, "rounds_without_draft": 1,
                        "reached_per_position": [2, 2, 0], "accepted_per_position": [2, 1, 0],
                        "proposal_length_counts": [1, 0, 2, 0]}


def test_numeric_tv_against_hand_computation():
    """Logits (0, 0) against (log 3, 0): laws (1/2, 1/2) and (3/4, 1/4), total variation 1/4; at T = 2 the second
    is (sqrt 3, 1) / (sqrt 3 + 1)."""
    ours, theirs = np.array([[0.0, 0.0]]), np.array([[np.log(3.0), 0.0]])
    assert numeric_tv(ours, theirs) == pytest.approx([0.25])
    assert numeric_tv(ours, theirs, 2.0) == pytest.approx([np.sqrt(3) / (np.sqrt(3) + 1) - 0.5])


def test_server_bench_against_stand_in_costs():
    """Two stand-in servers whose tokens cost 2 ms and 1 ms: the speculating one measures 2x, repeat by repeat."""
    from engines.bench import server_bench

    document = server_bench(MarkovEngine(seconds_per_token=0.001), MarkovEngine(seconds_per_token=0.002),
                            ["a", "bb"], max_new_tokens=8, repeats=3, warmup=1)
    assert document["speedup"] == pytest.approx(2.0) and document["speedup_spread"] == pytest.approx([2.0] * 3)
    assert document["greedy_equal"] and document["repeats"] == 3 and len(document["seconds_per_token"]["plain"]) == 3
