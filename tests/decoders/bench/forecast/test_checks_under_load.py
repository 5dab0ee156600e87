"""The forecast's checks driven by a clock (docs/forecasts.md, "Checks before a forecast"): the profile timed on an
injected clock whose models cost what their width says, times a load. A steady load is accepted whatever its level; a
load that comes and goes within each repeat (CPU-bound jobs switched on and off) is refused with the one line. No wall
time is read, so a busy machine changes nothing here."""

import pytest
import torch
from bench_inputs import SETTINGS, tiny

from decoders import _loop
from decoders.bench.forecast.document import SweepForecast
from decoders.bench.forecast.sweep import forecast_sweep
from decoders.bench.inputs import Pair
from decoders.bench.profile import ProfilePlan, measure_profile, profile_checks
from decoders.sampling import GREEDY

REPEATS = 3
TARGET_CALL, TARGET_POSITION, DRAFT_CALL = 1e-3, 5e-5, 1e-4  # seconds: a call, each position it adds, a draft call


class _LoadedClock:
    """Seconds that pass when a model works: ``work`` seconds at load 1 take ``work * load(done)`` on the clock,
    ``done`` being the work done so far (at load 1), so a schedule of load is the same whatever the load did."""

    def __init__(self, load):
        self.now, self.done, self.load = 0.0, 0.0, load

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds * self.load(self.done)
        self.done += seconds


class _Costed:
    """A model whose every forward pass first takes ``call + position * width`` seconds of work on ``clock``."""

    def __init__(self, inner, clock, call, position):
        self.inner, self.clock, self.call, self.position = inner, clock, call, position

    def forward(self, tokens, state, *rest):
        self.clock.work(self.call + self.position * tokens.shape[1])
        return self.inner.forward(tokens, state, *rest)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _profile(monkeypatch, load):
    clock = _LoadedClock(load)
    monkeypatch.setattr(_loop, "clock", clock)
    target = _Costed(tiny(16, 2, 0), clock, TARGET_CALL, TARGET_POSITION)
    draft = _Costed(tiny(8, 1, 1), clock, DRAFT_CALL, 0.0)
    prompts = torch.randint(0, 20, (1, 8), generator=torch.Generator().manual_seed(3))
    plan = ProfilePlan(3, 12, warmup=1, repeats=REPEATS, call_steps=0)
    profile, spread = measure_profile(Pair(target, draft), prompts, GREEDY, plan)
    return profile, spread, clock


@pytest.mark.parametrize("level", [1.0, 3.0])
def test_steady_load_accepted_against_the_costs_it_was_given(monkeypatch, level):
    """Under a steady load (1, or 3 throughout) the profile's widths cost what the model was given, t_verify(1) is the
    step, and every check passes."""
    profile, spread, _ = _profile(monkeypatch, lambda done: level)
    width = [level * (TARGET_CALL + TARGET_POSITION * k) for k in range(1, 5)]
    assert profile.t_verify == pytest.approx(width, rel=0.02)
    assert profile.t_step == pytest.approx(width[0], rel=0.02)
    checks = profile_checks(profile, spread)
    assert checks.passed, checks.as_dict()


def test_load_that_comes_and_goes_refused_against_steady(monkeypatch):
    """A load of 5 on during the first half of each repeat's work and off in the second (the autoregressive runs are
    timed first in a repeat, the verify widths last) breaks 'a width-1 verify is a step': refused, with the line
    naming it; the same load held throughout (control) is accepted."""
    _, _, steady = _profile(monkeypatch, lambda done: 1.0)
    per_repeat = steady.done / (REPEATS + 1)  # the warm-up and every repeat do the same work (greedy)
    profile, spread, _ = _profile(monkeypatch, lambda done: 5.0 if done % per_repeat < per_repeat / 2 else 1.0)
    checks = profile_checks(profile, spread)
    assert not checks.passed and "step" in [check.name for check in checks.failed], checks.as_dict()
    assert checks.line().startswith("forecast withheld: a width-1 verify call took ")


def test_forecast_sweep_records_its_checks(monkeypatch):
    """The forecast's document holds its checks per temperature, passed under a steady load."""
    clock = _LoadedClock(lambda done: 1.0)
    monkeypatch.setattr(_loop, "clock", clock)
    target = _Costed(tiny(16, 2, 0), clock, TARGET_CALL, TARGET_POSITION)
    draft = _Costed(tiny(8, 1, 1), clock, DRAFT_CALL, 0.0)
    prompts = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(3))
    forecast = forecast_sweep(Pair(target, draft), prompts, SETTINGS, repeats=2, cost_prompts=1)
    for entry in forecast.temperatures:
        names = [check.name for check in entry.checks.checks]
        assert entry.passed and names == ["step", "widths", "floor", "spread", "tokens", "ceiling"]
        assert SweepForecast.from_dict(forecast.as_dict()) == forecast  # the JSON edge and back
