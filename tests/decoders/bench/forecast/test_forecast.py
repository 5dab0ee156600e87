"""The forecast of a gamma sweep (decoders.bench.forecast.sweep; docs/measuring.md, Forecasts): judged by hand, made
from its own profiles, and carried by the bench's document and lines, never from the sweep's prompts."""

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from bench_inputs import SETTINGS, tiny

from decoders.bench.bench import BenchSettings, seconds_grid
from decoders.bench.bench_lines import bench_lines, loss_resolution
from decoders.bench.documents import BenchDocument
from decoders.bench.forecast.document import Judgement, TemperatureForecast
from decoders.bench.forecast.sweep import (
    acceptance_runs,
    forecast_speedups,
    forecast_sweep,
    judge_forecast,
    prompts_needed,
)
from decoders.bench.inputs import Pair
from decoders.bench.profile import SAMPLES, ProfilePlan, measure_profile
from decoders.bench.prompts import FORECAST_SEED, draw_prompts, other_prompts, text_windows
from decoders.bench.rows import BenchRow, ForecastRow
from decoders.bench.runs import BenchRun, bench_document
from decoders.sampling import GREEDY
from plumbing.timing import Timing, speedup_interval
from spectheory.cost_checks import CostChecks, check_costs
from spectheory.costs import CostProfile
from spectheory.intervals import forecast_interval


def _row(gamma, speedup, interval):
    return BenchRow(
        temperature=0.0,
        gamma=gamma,
        seconds=1.0,
        iterations=1,
        tokens_per_iteration=1.0,
        speedup=speedup,
        speedup_interval=interval,
    )


def _forecast(gamma: int) -> TemperatureForecast:
    speedups = tuple(
        ForecastRow(gamma=g, speedup=x, standard_error=0.1, interval=[x * 0.8, x * 1.25])
        for g, x in ((1, 1.05), (2, 1.2), (4, 1.6))
    )
    chosen = next(row for row in speedups if row.gamma == gamma)
    profile = CostProfile(t_step=1.0, t_draft=0.1, t_verify=(1.0, 1.1), t_iteration=1.2, acceptance=(0.5,))
    return TemperatureForecast(
        temperature=0.0,
        gamma=gamma,
        speedup=chosen.speedup,
        speedups=speedups,
        prompts_needed=None,
        profile=profile,
        spread={},
    )


def test_judge_forecast_against_rows_by_hand():
    """Forecast / measured at each gamma, the interval test, the loss of the forecast's gamma against the best and
    whether the intervals resolve it; a forecast that picks the best gamma loses nothing."""
    rows = [_row(1, 1.0, [0.9, 1.1]), _row(2, 1.5, [1.45, 1.55]), _row(4, 1.2, [1.1, 1.3])]
    forecast = _forecast(4)
    judged = judge_forecast(forecast, rows)
    assert [row.forecast_over_measured for row in judged.forecast_by_gamma] == pytest.approx([1.05, 0.8, 4 / 3])
    assert [row.inside_interval for row in judged.forecast_by_gamma] == [True, False, False]
    # combined: |log 0.8| = 0.223 <= hypot(log 1.25, log 1.5/1.45) = 0.226; |log 4/3| = 0.288 > hypot(0.223, 0.080)
    assert [row.covered for row in judged.forecast_by_gamma] == [True, True, False]
    assert judged.forecast_interval == pytest.approx([1.28, 2.0])
    assert judged.best_measured_gamma == 2 and judged.forecast_loss == pytest.approx(1 - 1.2 / 1.5)
    assert not judged.forecast_within_5_percent and judged.loss_resolved  # 1.3 < 1.45
    overlapping = judge_forecast(
        forecast, [_row(1, 1.0, [0.9, 1.1]), _row(2, 1.5, [1.25, 1.7]), _row(4, 1.2, [1.1, 1.3])]
    )
    assert not overlapping.loss_resolved
    right = judge_forecast(_forecast(2), rows)
    assert right.forecast_loss == 0 and right.forecast_within_5_percent
    assert [
        loss_resolution(one.forecast_gamma, one.best_measured_gamma, one.loss_resolved)
        for one in (judged, overlapping, right)
    ] == [
        "a loss the sweep resolves (95% intervals apart)",
        "within the sweep's noise (95% intervals overlap)",
        "the same gamma",
    ]
    assert Judgement.from_dict(json.loads(json.dumps(judged.as_dict()))) == judged  # the JSON edge and back


def test_forecast_withheld_against_its_checks():
    """A forecast whose checks failed is withheld with their one line; one from before the checks is shown."""
    failed = replace(_forecast(4), temperature=1.0, checks=check_costs(0.0248, (0.003, 0.006, 0.007)))
    assert not failed.passed and failed.withheld.startswith("T = 1: the forecast withheld: ")
    assert _forecast(4).passed and _forecast(4).withheld == ""  # checks None: a forecast from before the checks
    passing = replace(failed, checks=CostChecks(()))
    assert passing.passed and passing.withheld == ""
    assert TemperatureForecast.from_dict(json.loads(json.dumps(failed.as_dict()))) == failed


def test_forecast_sweep_against_its_own_profiles():
    """The forecast's speedup at each gamma is its profile's (docs/theory.md §10), its gamma the best of them, and
    its standard error the jackknife's over the prompts."""
    target, draft = tiny(16, 2, 0), tiny(8, 1, 1)
    prompts = torch.randint(0, 20, (4, 8), generator=torch.Generator().manual_seed(3))
    forecast = forecast_sweep(Pair(target, draft), prompts, SETTINGS, repeats=1, cost_prompts=2)
    assert forecast.prompt_ids == prompts.tolist() and forecast.seconds > 0 and forecast.cost_prompts == 2
    assert [t.temperature for t in forecast.temperatures] == list(SETTINGS.temperatures)
    for block in forecast.temperatures:
        profile = block.profile
        speedups = {row.gamma: row.speedup for row in block.speedups}
        assert speedups == pytest.approx(
            {g: profile.speedup(g, tokens=SETTINGS.max_new_tokens) for g in SETTINGS.gammas}
        )
        assert block.gamma == max(speedups, key=lambda g: (speedups[g], -g))
        assert len(profile.acceptance_along_text) == 4 * (1 if block.temperature == 0 else SAMPLES)
        assert all(row.standard_error >= 0 for row in block.speedups)
        assert all(
            row.interval == pytest.approx(forecast_interval(row.speedup, row.standard_error, 4))
            for row in block.speedups
        )  # the stated interval: its 4 prompts' jackknife and the run error


def test_acceptance_runs_against_the_profiles_own():
    """At T = 0 the forecast's untimed runs see what the cost profile's timed runs at gamma_max saw on the same
    prompts (the same seeds): the same acceptance by position, alpha, texts and proposal lengths."""
    target, draft = tiny(16, 2, 0), tiny(8, 1, 1)
    prompts = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(4))
    profile, _ = measure_profile(Pair(target, draft), prompts, GREEDY, ProfilePlan(3, 12, 0, repeats=2, call_steps=4))
    runs = acceptance_runs(target, draft, prompts, GREEDY, gamma_max=3, max_new_tokens=12)
    assert len(runs) == 3 and all(len(run["texts"]) == 1 for run in runs)
    rebuilt = forecast_speedups(profile, runs, (1, 2, 3), 12)
    assert [row.speedup for row in rebuilt] == pytest.approx([profile.speedup(g, tokens=12) for g in (1, 2, 3)])
    other = acceptance_runs(target, tiny(8, 1, 9), prompts, GREEDY, gamma_max=3, max_new_tokens=12)  # control
    assert [run["texts"] for run in other] != [run["texts"] for run in runs]


def test_prompts_needed_against_the_jackknife_by_hand():
    """Identical prompts pin the forecast exactly (standard error 0, one prompt needed); a 5% standard error from
    4 prompts needs 4 x (1.96 x 0.05 / 0.10)^2 = 3.84, so 4 prompts, and 10% needs 16."""
    assert prompts_needed([ForecastRow(gamma=1, speedup=2.0, standard_error=0.0)], 4) == 1
    assert prompts_needed([ForecastRow(gamma=1, speedup=2.0, standard_error=0.1)], 4) == 4
    assert (
        prompts_needed(
            [
                ForecastRow(gamma=1, speedup=2.0, standard_error=0.1),
                ForecastRow(gamma=2, speedup=1.0, standard_error=0.1),
            ],
            4,
        )
        == 16
    )
    assert prompts_needed([ForecastRow(gamma=1, speedup=2.0, standard_error=None)], 1) is None
    target, draft = tiny(16, 2, 0), tiny(8, 1, 1)
    prompt = torch.randint(0, 20, (1, 8), generator=torch.Generator().manual_seed(5))
    profile, _ = measure_profile(Pair(target, draft), prompt, GREEDY, ProfilePlan(3, 12, 0, repeats=1, call_steps=4))
    same = acceptance_runs(target, draft, prompt.repeat(3, 1), GREEDY, gamma_max=3, max_new_tokens=12)
    assert [row.standard_error for row in forecast_speedups(profile, same, (1, 3), 12)] == pytest.approx([0, 0])


def test_row_seconds_interval_against_ratios_by_hand():
    """A row's 95% interval (``bench_row``) is the bootstrap over the repeats and prompts of the seconds
    ``seconds_grid`` reads from the timings, [repeats][prompts]: it holds the pooled ratio; a sweep whose
    speculative runs took twice as long in every repeat and prompt has the interval [0.5, 0.5]."""
    timings = {
        ("autoregressive", 0, 0): Timing((1.0, 1.2, 1.1)),
        ("autoregressive", 1, 0): Timing((2.0, 2.1, 1.9)),
        (2, 0): Timing((0.5, 0.7, 0.6)),
        (2, 1): Timing((1.1, 1.0, 1.2)),
    }
    grids = [seconds_grid(timings, name, 2) for name in ("autoregressive", 2)]
    assert grids[0] == [[1.0, 2.0], [1.2, 2.1], [1.1, 1.9]]
    low, high = speedup_interval(*grids, [1, 1], [1, 1])
    assert low < 3.0 / 1.65 < high  # the repeats' summed ratios are 3.0/1.6, 3.3/1.7, 3.0/1.8
    doubled = {
        key: Timing(tuple(2 * t for t in timings[("autoregressive", key[1], 0)].seconds)) if key[0] == 2 else value
        for key, value in timings.items()
    }
    assert speedup_interval(
        *(seconds_grid(doubled, name, 2) for name in ("autoregressive", 2)), [1, 1], [1, 1]
    ) == pytest.approx([0.5, 0.5])


def test_other_prompts_against_the_sweeps():
    """The forecast's prompts are the first of its own draw that the sweep does not decode: a draw that repeats a
    sweep prompt loses it and still gives the count asked for."""
    sweep = torch.arange(12).reshape(3, 4)
    pool = torch.cat([sweep[1:2], sweep + 100, sweep[2:3]])  # [5, 4]: two of the sweep's among other prompts
    chosen = other_prompts(lambda n: pool[:n], 3, sweep)
    assert chosen.tolist() == (sweep + 100).tolist()
    assert other_prompts(lambda n: pool[:n], 2, sweep[:1]).tolist() == [[4, 5, 6, 7], [100, 101, 102, 103]]
    with pytest.raises(ValueError, match="only 3 prompts other than the sweep's"):
        other_prompts(lambda n: pool[:n], 4, sweep)


def test_draw_prompts_against_the_drawers_by_hand():
    """``draw_prompts``: the sweep's prompts are ``benchmark_prompts`` at seed + sweep_offset, the forecast's the first
    of the forecast seed's draw that the sweep does not hold; none without a forecast. Control: another offset draws
    another sweep."""
    stream = np.random.default_rng(0).integers(0, 20, size=400)
    inputs = SimpleNamespace(held_out=stream)
    drawn = draw_prompts(inputs, None, (3, 8), seed=5, forecast=4, sweep_offset=1)
    assert drawn.sweep.tolist() == text_windows(stream, 3, 8, 6).tolist()
    expected = other_prompts(lambda n: text_windows(stream, n, 8, 5 + FORECAST_SEED), 4, drawn.sweep)
    assert drawn.forecast.tolist() == expected.tolist()
    assert not {tuple(row) for row in drawn.forecast.tolist()} & {tuple(row) for row in drawn.sweep.tolist()}
    assert draw_prompts(inputs, None, (3, 8), seed=5).forecast is None
    assert draw_prompts(inputs, None, (3, 8), seed=5).sweep.tolist() != drawn.sweep.tolist()


def test_bench_forecast_against_the_sweep_it_did_not_see():
    """``bench --forecast-prompts``: the forecast's prompts are not the sweep's, each temperature is judged on the
    sweep's rows, every row carries its interval, and the lines print forecast beside measured."""
    settings = BenchSettings(
        gammas=(1, 2),
        temperatures=(0.0, 1.0),
        prompts=2,
        prompt_length=16,
        max_new_tokens=8,
        repeats=1,
        warmup=0,
        call_steps=4,
        batch_sizes=(),
    )
    typed = bench_document(
        BenchRun("bigram", settings, forecast_prompts=3, forecast_cost_prompts=1, forecast_repeats=1)
    )
    document = json.loads(json.dumps(typed.as_dict()))
    forecast = document["forecast"]
    assert not set(map(tuple, forecast["prompt_ids"])) & set(map(tuple, document["prompt_ids"]))
    assert document["sweep_seconds"] > 0 and forecast["seconds"] > 0
    for judged, ahead in zip(forecast["judged"], forecast["temperatures"]):
        rows = {row["gamma"]: row for row in document["rows"] if row["temperature"] == judged["temperature"]}
        assert [row["forecast_over_measured"] for row in judged["forecast_by_gamma"]] == pytest.approx(
            [f["speedup"] / rows[f["gamma"]]["speedup"] for f in ahead["speedups"]]
        )
    assert all(low <= high for row in document["rows"] for low, high in [row["speedup_interval"]])
    lines = "\n".join(bench_lines(typed))
    assert bench_lines(BenchDocument.from_dict(document)) == bench_lines(typed)  # the file prints the same
    assert "forecast from acceptance along 3 other prompts and a cost profile of 1" in lines
    for judged in forecast["judged"]:  # withheld where this machine's load moved (docs/measuring.md)
        shown = f"T = {judged['temperature']:g}: the forecast recommends gamma {judged['forecast_gamma']}"
        assert (judged["withheld"] or shown) in lines and bool(judged["withheld"]) != (shown in lines)


def test_forecast_rows_against_every_committed_file():
    """The forecast's rows (decoders.bench.rows.ForecastRow: a forecast's ``speedups``; JudgedRow: its
    ``forecast_by_gamma``) read every such row committed under results/, with their values. Control: a row with a
    key the format does not know is refused."""
    from committed_results import committed_rows, misread

    from decoders.bench.rows import JudgedRow

    found = {key: committed_rows(key) for key in ("speedups", "forecast_by_gamma")}
    assert len(found["speedups"]) >= 200 and len(found["forecast_by_gamma"]) >= 60
    for kind, rows in ((ForecastRow, found["speedups"]), (JudgedRow, found["forecast_by_gamma"])):
        assert misread(kind, rows) == []
        with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
            kind.from_dict(dict(rows[0], odd=1))
