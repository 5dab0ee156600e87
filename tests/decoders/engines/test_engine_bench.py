"""The engine bench (decoders/engines/bench.py) against hand computations and stand-in engines: its prediction and
forecast from call costs and counters, the forecast's jackknife over its prompts, a round's cost split by whether it
drafted, sampled benches, an engine that remembers its answers, the checks that withhold a forecast, and the
measured speedup's interval against its coverage."""

from dataclasses import replace

import numpy as np
import pytest
from engine_standin import MarkovEngine

from spectheory.recommendation import from_sweep

#: One prompt of 16 tokens: plain decoding at 8 ms a token after the first, speculation at 10 ms with server-style
#: counters (totals only: 10 rounds, 20 drafted, 5 accepted); call costs t_verify = 10, 12, 14 ms, t_draft 1 ms.
PLAIN = [{"decode": 0.008 * 15, "decodes": [0.008 * 15], "tokens": 16, "rows": [[0] * 16]}]
RUNS = [
    {
        "decode": 0.010 * 15,
        "decodes": [0.010 * 15],
        "tokens": 16,
        "rows": [[0] * 16],
        "counters": {"num_draft_tokens": 20, "num_accepted_tokens": 5, "rounds": 10},
    }
]
#: A bench of two prompts at gammas 2 and 4 with a forecast from one other prompt.
TWO_GAMMAS = dict(gammas=[2, 4], max_new_tokens=12, repeats=2, warmup=0, forecast_prompts=[[7, 8, 9]])
COSTS = {"t_verify": [0.010, 0.012, 0.014], "t_sample": 0.0, "t_round": 0.0, "t_draft": 0.001}


def test_server_bench_against_stand_in_costs():
    """Two stand-in servers whose tokens cost 2 ms and 1 ms: the speculating one measures 2x, repeat by repeat."""
    from decoders.engines.bench import server_bench

    document = server_bench(
        MarkovEngine(seconds_per_token=0.001),
        MarkovEngine(seconds_per_token=0.002),
        ["a", "bb"],
        max_new_tokens=8,
        repeats=3,
        warmup=1,
    )
    assert document.speedup == pytest.approx(2.0) and document.speedup_spread == pytest.approx([2.0] * 3)
    assert document.greedy_equal and document.repeats == 3 and len(document.seconds_per_token["plain"]) == 3


def test_engine_bench_prediction_against_hand_computation():
    """One gamma's row from server-style counters (totals only: 10 rounds, 20 drafted, 5 accepted) and costs t_verify =
    10, 12, 14 ms, t_draft 1 ms, t_sample 0: 1.5 tokens per round, mean proposal 2, so a round costs 2 x 1 + t_verify(3)
    = 16 ms, a plain step t_verify(1) = 10 ms, and the prediction is 1.5 x 10 / 16 = 0.9375 (the plain runs' own 8 ms a
    token does not enter it); the speedup measured is plain seconds per token over speculative (8 ms against 10 ms:
    0.8). With a counted length distribution (1 round of 0 drafts, 9 of 2) the verify term is its expectation instead:
    (10 + 9 x 14) / 10 = 13.6 ms. A draft that also evaluates the verify batch (t_draft_batch(3) = 4 ms, llama-server's)
    makes the round 20 ms: 0.75. A t_sample of 1 ms makes the plain step 11 ms and the round 17.5 ms."""
    from decoders.engines.bench import _row, _verify_seconds

    plain, runs, costs = PLAIN, RUNS, COSTS
    row = _row(2, plain, runs, costs)
    assert row.predicted_speedup == pytest.approx(0.9375) and row.speedup == pytest.approx(0.8)
    assert row.speedup_interval == pytest.approx([0.8, 0.8])  # one repeat of one prompt: no spread
    assert row.alpha is None and row.acceptance_rate == pytest.approx(0.25)
    assert row.tokens_per_iteration == pytest.approx(1.5) and row.mean_proposal_length == pytest.approx(2.0)
    counted = {"num_draft_tokens": 18, "proposal_length_counts": [1, 0, 9]}
    assert _verify_seconds(counted, costs["t_verify"], 10) == pytest.approx(0.0136)
    assert _verify_seconds({"num_draft_tokens": 15}, costs["t_verify"], 10) == pytest.approx(0.013)  # m 1.5
    with_batch = _row(2, plain, runs, dict(costs, t_draft_batch=[0.002, 0.003, 0.004]))  # + t_draft_batch(3)
    assert with_batch.predicted_speedup == pytest.approx(1.5 * 10 / 20)
    sampled = _row(2, plain, runs, dict(costs, t_sample=0.001))
    assert sampled.predicted_speedup == pytest.approx(1.5 * 11 / 17.5)


def test_engine_bench_forecast_against_hand_computation():
    """The forecast is the same model at the costs and counters measured on other prompts: 10 rounds, 20 drafted,
    10 accepted give 2 tokens per round and a 16 ms round (2 x 1 ms + t_verify(3)), so 2 x 10 / 16 = 1.25 against
    the measured 0.8 (outside its interval [0.8, 0.8]); a zero-width interval needs 1 prompt for +-3%."""
    from decoders.engines.bench import _row

    plain, runs, costs = PLAIN, RUNS, COSTS
    forecast = {"costs": costs, "counters": {"num_draft_tokens": 20, "num_accepted_tokens": 10, "rounds": 10}}
    row = _row(2, plain, runs, costs, forecast)
    assert row.forecast_speedup == pytest.approx(1.25) and row.forecast_over_measured == pytest.approx(1.5625)
    assert row.forecast_tokens_per_iteration == pytest.approx(2.0) and not row.forecast_inside_interval
    assert row.predicted_speedup == pytest.approx(0.9375) and row.prompts_for_3_percent == 1


class _CountingEngine:
    """A stand-in engine for the bench: gamma g accepts g // 2 tokens a round; it records the prompts whose call
    costs it measured."""

    name = "counting"

    @property
    def model_path(self):
        from pathlib import Path

        return Path("counting.gguf")

    def __init__(self):
        self.costed = []

    def tokenize(self, prompt):
        return list(prompt)

    def call_costs(self, ids, max_tokens):
        self.costed.append(list(ids))
        return {
            "t_verify": [0.010 + 0.001 * k for k in range(max_tokens)],
            "t_sample": 0.0,
            "t_round": 0.0,
            "t_draft": 0.001,
        }

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
        rounds = -(-horizon // (1 + speculate // 2))
        counters = (
            {"num_draft_tokens": speculate * rounds, "num_accepted_tokens": horizon - rounds, "rounds": rounds}
            if speculate
            else {}
        )
        # decode seconds as its call costs price them: a plain token one call of one position, a round its calls
        seconds = rounds * (0.010 + 0.001 * (2 * speculate)) if speculate else 0.010 * horizon
        return [1] * horizon, counters, 0.001, seconds


def test_engine_bench_forecast_against_other_prompts():
    """``engine_bench(forecast_prompts=...)``: the forecast's costs are measured on the other prompts, its
    counters come from runs of them, every row carries the forecast, the recommendation is the forecast's, and a
    forecast prompt that is also a bench prompt is refused."""
    from decoders.engines.bench import engine_bench, engine_bench_lines, predicted_round

    engine = _CountingEngine()
    document = engine_bench(
        engine,
        [[1, 2, 3], [4, 5, 6]],
        **TWO_GAMMAS,
    )
    # the forecast's costs timed beside each of its 2 gammas' runs, then the bench's beside each repeat
    assert engine.costed[:2] == [[7, 8, 9]] * 2 and all(ids == [1, 2, 3] for ids in engine.costed[2:])
    forecast = document.forecast
    for row in document.rows:
        expected = predicted_round(forecast.counters[row.gamma], forecast.costs)[3]
        assert row.forecast_speedup == pytest.approx(expected)
    best = max(document.rows, key=lambda row: (row.forecast_speedup, -row.gamma))
    assert document.forecast_gamma == (best.gamma if best.forecast_speedup > 1 else 0)
    assert document.recommendation == from_sweep(document.rows, document.forecast_gamma)
    document = replace(document, ours_tokens_per_second=1.0, cpu="stand-in", threads=1)
    printed = "\n".join(engine_bench_lines(document))
    assert "; the forecast from 1 other prompt (" in printed and f"picked gamma {best.gamma}" in printed
    assert forecast.checks.passed and not forecast.withheld
    with pytest.raises(ValueError, match="share a prompt"):
        engine_bench(engine, [[1, 2, 3]], gammas=[2], max_new_tokens=12, repeats=1, forecast_prompts=[[1, 2, 3]])


class _LoadedCostsEngine(_CountingEngine):
    """The stand-in whose forecast's call costs (on its prompt [7, 8, 9]) were timed under a load: 4.4 times what its
    runs then took."""

    def call_costs(self, ids, max_tokens):
        costs = super().call_costs(ids, max_tokens)
        return dict(costs, t_verify=[4.4 * t for t in costs["t_verify"]]) if list(ids) == [7, 8, 9] else costs


def test_engine_bench_withholds_a_forecast_whose_costs_failed_against_shown():
    """``bench --engine`` under the checks of docs/forecasts.md: a forecast timed under a load its runs did not see
    (its plain step 4.4 times theirs) is withheld with the one line, picks no gamma, and the sweep's rule recommends;
    the consistent stand-in's forecast is shown (the test above)."""
    from decoders.engines.bench import engine_bench, engine_bench_lines

    document = engine_bench(
        _LoadedCostsEngine(),
        [[1, 2, 3], [4, 5, 6]],
        **TWO_GAMMAS,
    )
    withheld = document.forecast.withheld
    (sweep,) = [check for check in document.forecast.checks.as_dict()["checks"] if check["name"] == "sweep"]
    assert sweep["value"] == pytest.approx(4.4 * 11 / 12)  # the runs' step: 12 tokens' seconds over the 11 after one
    assert withheld.startswith("forecast withheld: the forecast's decoding step took 4.03 times the sweep's")
    assert document.forecast_gamma is None and document.recommendation == from_sweep(document.rows)
    document = replace(document, ours_tokens_per_second=1.0, cpu="stand-in", threads=1)
    printed = engine_bench_lines(document)
    assert withheld in printed and not any("forecast / measured" in line for line in printed)


def test_speedup_interval_against_its_coverage():
    """Paired repeats x prompts with a true speedup of 2 (plain 2 s, speculative 1 s a token, 10% noise on each
    cell): over 200 seeded benches of 5 repeats x 4 prompts the 95% interval holds 2 in 180 to 200 of them (a
    correct interval fails this with probability about 0.001: binomial(200, 0.95) < 180), and is narrower than
    +-15% (the median's half-width). Negative control: benches whose true speedup is 1.43 put 2 outside at least
    190 of 200 intervals."""
    from plumbing.timing import speedup_interval

    generator = np.random.default_rng(5)
    tokens = np.array([10, 20, 40, 80])
    held, widths, excluded = 0, [], 0
    for _ in range(200):
        noise = 1 + 0.1 * generator.standard_normal((3, 5, 4))
        plain, speculative, slower = 2.0 * tokens * noise[0], 1.0 * tokens * noise[1], 1.4 * tokens * noise[2]
        low, high = speedup_interval(
            plain, speculative, tokens, tokens, draws=400, seed=int(generator.integers(1 << 30))
        )
        held += low <= 2.0 <= high
        widths.append((high - low) / 2 / 2.0)
        low, high = speedup_interval(plain, slower, tokens, tokens, draws=400)
        excluded += not low <= 2.0 <= high
    assert 180 <= held <= 200 and np.median(widths) < 0.15
    assert excluded >= 190


def test_median_costs_against_hand_computation():
    """Three repeats' costs: each scalar's median, each list's median element by element."""
    from decoders.engines.bench import median_costs, plain_step

    measured = [
        {"t_verify": [0.010, 0.020], "t_sample": 0.001},
        {"t_verify": [0.030, 0.010], "t_sample": 0.003},
        {"t_verify": [0.020, 0.030], "t_sample": 0.002},
    ]
    costs = median_costs(measured)
    assert costs["t_verify"] == pytest.approx([0.020, 0.020]) and costs["t_sample"] == pytest.approx(0.002)
    assert plain_step(costs) == pytest.approx(0.022)


def test_vllm_round_cost_against_its_runs():
    """vLLM's t_round is what its runs took beyond the model's rounds, per round (drafted or not: its proposer runs
    every step): runs of 10 rounds (4 drafting) that took 10 x 16 ms + 20 ms measure 2 ms."""
    from decoders.engines.vllm import VLLMEngine

    counters = {"num_drafts": 4, "num_draft_tokens": 20, "num_accepted_tokens": 5, "rounds": 10}

    class Runs:
        def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
            return [1] * 16, dict(counters), 0.0, 10 * 0.016 + 0.020

    assert VLLMEngine._round_seconds(Runs(), [1, 2], 2, COSTS, repeats=3) == pytest.approx(0.002)


class _ResidualEngine(_CountingEngine):
    """The counting stand-in whose rounds take 3 ms beyond the calls its costs price, and whose cost prompt says
    50 ms (a prompt the engine answers unlike the runs: docs/findings/forecasts-real.md, suffix decoding)."""

    def __init__(self, along: bool):
        super().__init__()
        self.along = along

    def round_cost_along_runs(self):
        return self.along

    def call_costs(self, ids, max_tokens):
        return dict(super().call_costs(ids, max_tokens), t_round=0.050)

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
        tokens, counters, first, seconds = super().generate_ids(ids, horizon, sampling, speculate, seed)
        return tokens, counters, first, seconds + 0.003 * counters.get("rounds", 0)


def test_forecast_round_cost_against_its_own_runs():
    """An engine whose t_round is a residual of runs has the forecast measure it along the forecast's runs: 3 ms a
    round beyond the calls at both gammas, not the cost prompt's 50 ms (kept beside as ``t_round_cost_prompt``), and
    the forecast prices rounds with it (gamma 2: 2 tokens a round, a 14 ms round + 3 ms, 2 x 10 / 17). Control: an
    engine without the capability keeps its cost prompt's 50 ms (2 x 10 / 64)."""
    from decoders.engines.bench import engine_bench, engine_bench_lines, round_residual

    along = engine_bench(_ResidualEngine(along=True), [[1, 2, 3]], **TWO_GAMMAS)
    assert along.forecast.costs["t_round"] == pytest.approx(0.003)
    assert along.forecast.costs["t_round_cost_prompt"] == pytest.approx(0.050)
    assert along.rows[0].forecast_speedup == pytest.approx(2 * 10 / 17)
    assert along.costs["t_round"] == pytest.approx(0.050)  # the bench's own costs: the cost prompt's, unchanged
    along = replace(along, ours_tokens_per_second=1.0, cpu="stand-in", threads=1)
    assert "rounds cost 3.0 ms beyond their calls" in "\n".join(engine_bench_lines(along))
    kept = engine_bench(_ResidualEngine(along=False), [[1, 2, 3]], **TWO_GAMMAS)
    assert kept.forecast.costs["t_round"] == pytest.approx(0.050)
    assert kept.rows[0].forecast_speedup == pytest.approx(2 * 10 / 64)
    fast = {"num_draft_tokens": 20, "num_accepted_tokens": 5, "rounds": 10}  # 16 ms a round by the model
    assert round_residual([(fast, 0.150, COSTS)]) == 0.0  # faster than its calls: clamped at 0


class _DriftingEngine(_ResidualEngine):
    """The residual stand-in on a machine 30% slower from its second cost timing on, calls and runs alike; its rounds
    still take 3 ms beyond their calls."""

    def __init__(self):
        super().__init__(along=True)
        self.timings = 0

    def _factor(self) -> float:
        return 1.3 if self.timings >= 2 else 1.0

    def call_costs(self, ids, max_tokens):
        self.timings += 1
        costs = super().call_costs(ids, max_tokens)
        return dict(costs, t_verify=[self._factor() * t for t in costs["t_verify"]], t_draft=self._factor() * 0.001)

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
        tokens, counters, first, seconds = _CountingEngine.generate_ids(self, ids, horizon, sampling, speculate, seed)
        return tokens, counters, first, self._factor() * seconds + 0.003 * counters.get("rounds", 0)


def test_forecast_round_cost_against_costs_timed_beside_its_runs():
    """The forecast times the engine's costs beside each gamma's runs, so a machine that slows by 30% between gamma 2's
    runs and gamma 4's leaves the round's own 3 ms, not the drift. Control: gamma 4's runs (4 rounds of 18 ms at the
    first timing's costs, 30% slower, + 3 ms each) against the first timing's costs give 0.3 x 18 + 3 = 8.4 ms."""
    from decoders.engines.bench import engine_bench, round_residual

    document = engine_bench(_DriftingEngine(), [[1, 2, 3]], **TWO_GAMMAS)
    assert document.forecast.costs["t_round"] == pytest.approx(0.003)
    first = _CountingEngine().call_costs([7, 8, 9], 5)
    counters = {"num_draft_tokens": 16, "num_accepted_tokens": 8, "rounds": 4}
    assert round_residual([(counters, 1.3 * 4 * 0.018 + 4 * 0.003, first)]) == pytest.approx(0.0084)


def test_engine_forecast_interval_carries_its_prompts_jackknife():
    """Two forecast prompts, one accepting all 10 of its drafts in 5 rounds and one none: summed, 2 tokens a round and
    a 16 ms round give 1.25; each left out leaves 1.875 or 0.625, so the jackknife's standard error is
    sqrt(1/2 x 2 x 0.625^2) = 0.625, and the stated interval is ``forecast_interval(1.25, 0.625, 2)``, wider than the
    run error's alone. Control: one prompt gives no standard error and the run error's interval."""
    from decoders.engines.bench import _forecast_fields
    from spectheory.intervals import forecast_interval

    costs = COSTS
    accepting = {"num_draft_tokens": 10, "num_accepted_tokens": 10, "rounds": 5}
    refusing = {"num_draft_tokens": 10, "num_accepted_tokens": 0, "rounds": 5}
    summed = {"num_draft_tokens": 20, "num_accepted_tokens": 10, "rounds": 10}
    fields = _forecast_fields({"costs": costs, "counters": summed, "by_prompt": [accepting, refusing]}, 1.0, [0.9, 1.1])
    assert fields["forecast_speedup"] == pytest.approx(1.25)
    assert fields["forecast_standard_error"] == pytest.approx(0.625)
    assert fields["forecast_interval"] == pytest.approx(forecast_interval(1.25, 0.625, 2))
    alone = _forecast_fields({"costs": costs, "counters": summed, "by_prompt": [summed]}, 1.0, [0.9, 1.1])
    assert alone["forecast_standard_error"] is None and alone["forecast_interval"] == pytest.approx(
        forecast_interval(1.25)
    )
    assert alone["forecast_interval"][1] < fields["forecast_interval"][1]


class _SeedRecordingEngine(_CountingEngine):
    """The counting stand-in that records each run's (temperature, seed, speculate)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
        self.calls.append((sampling.temperature, seed, speculate))
        return super().generate_ids(ids, horizon, sampling, speculate=speculate, seed=seed)


def test_sampled_engine_bench_against_its_seeds():
    """``engine_bench(temperature=1)``: every run samples at T = 1, prompt i seeded i on both paths and in every
    repeat, the document says T = 1, and no row claims greedy equality (None, printed as sampled). Control: at T = 0
    the rows compare greedy outputs (True for the stand-in)."""
    from decoders.engines.bench import engine_bench, engine_bench_lines

    engine = _SeedRecordingEngine()
    settings = dict(gammas=[2], max_new_tokens=12, repeats=2, warmup=1)
    document = engine_bench(engine, [[1, 2, 3], [4, 5, 6], [7, 8]], temperature=1.0, **settings)
    assert {temperature for temperature, _, _ in engine.calls} == {1.0}
    assert [seed for _, seed, _ in engine.calls] == [0, 1, 2] * 2 * 3  # 3 prompts, 2 paths, 1 + 2 repeats
    assert document.temperature == 1.0 and document.rows[0].greedy_equal_to_plain is None
    document = replace(document, ours_tokens_per_second=1.0, cpu="stand-in", threads=1)
    assert "sampled (T > 0): no greedy comparison" in "\n".join(engine_bench_lines(document))
    greedy = engine_bench(_SeedRecordingEngine(), [[1, 2, 3]], **settings)
    assert greedy.temperature == 0.0 and greedy.rows[0].greedy_equal_to_plain is True
    with pytest.raises(ValueError, match="temperature"):
        engine_bench(engine, [[1, 2, 3]], temperature=-1.0, **settings)


class _RememberingEngine(_CountingEngine):
    """A stand-in that drafts perfectly for a prompt it has answered before (as suffix decoding does) and as the
    counting stand-in otherwise."""

    def __init__(self):
        super().__init__()
        self.answered = set()

    def remembers_outputs(self):
        return True

    def generate_ids(self, ids, horizon, sampling, speculate=0, seed=0):
        key = (tuple(ids), speculate)
        if not speculate or key not in self.answered:
            self.answered.add(key)
            return super().generate_ids(ids, horizon, sampling, speculate=speculate, seed=seed)
        rounds = -(-horizon // (1 + speculate))
        counters = {"num_draft_tokens": speculate * rounds, "num_accepted_tokens": horizon - rounds, "rounds": rounds}
        return [1] * horizon, counters, 0.001, rounds * (0.010 + 0.001 * (2 * speculate))


def test_remembering_engine_forecast_counts_its_second_pass():
    """An engine that remembers its answers is measured on prompts it answered in the warm-up, so its forecast
    counts the second pass over its own prompts (gamma 2: 3 tokens a round, 12 tokens in 4 rounds) and the document
    and its lines say the prompts were repeated. Control: the counting stand-in's forecast is its first pass (2 tokens
    a round) and says nothing of repetition."""
    from decoders.engines.bench import engine_bench, engine_bench_lines

    settings = dict(gammas=[2], max_new_tokens=12, repeats=1, warmup=1, forecast_prompts=[[7, 8, 9]])
    document = engine_bench(_RememberingEngine(), [[1, 2, 3]], **settings)
    assert document.forecast.passes == 2 and document.repeated_prompts is True
    assert document.forecast.counters[2]["rounds"] == 4
    assert document.rows[0].forecast_tokens_per_iteration == pytest.approx(3.0)
    document = replace(document, ours_tokens_per_second=1.0, cpu="stand-in", threads=1)
    assert "measures prompts answered before" in "\n".join(engine_bench_lines(document))
    plain = engine_bench(_CountingEngine(), [[1, 2, 3]], **settings)
    assert plain.forecast.passes == 1 and plain.repeated_prompts is False
    assert plain.rows[0].forecast_tokens_per_iteration == pytest.approx(2.0)


def test_first_draft_in_batch_against_hand_computation():
    """vLLM's draft model drafts its first token in the pass that evaluates the verify batch (``first_draft_in_batch``
    = 1), so a round of m = 2 drafts makes one step of one token after it: with every one of the 10 rounds drafting,
    t_draft 1 ms and t_draft_batch(3) 4 ms, the hand computation's round (2 x 1 + 14 = 16 ms, above) costs
    1 + 14 + 4 = 19 ms, where llama-server's structure (m steps and the batch) costs 20 ms; with half the rounds
    drafting, 2 - 0.5 = 1.5 steps: 19.5 ms."""
    from decoders.engines.bench import predicted_round

    counters = {"num_drafts": 10, "num_draft_tokens": 20, "num_accepted_tokens": 5, "rounds": 10}
    costs = dict(COSTS, t_draft_batch=[0.002, 0.003, 0.004])
    assert predicted_round(counters, dict(costs, first_draft_in_batch=1))[2] == pytest.approx(0.019)
    assert predicted_round(counters, costs)[2] == pytest.approx(0.020)
    half = dict(counters, num_drafts=5)
    assert predicted_round(half, dict(costs, first_draft_in_batch=1))[2] == pytest.approx(0.0195)
