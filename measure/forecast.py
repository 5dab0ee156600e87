"""The forecast of a gamma sweep, made before it and judged on it (docs/measuring.md, "Forecasts"): per temperature a
cost profile (docs/theory.md §10) measured on prompts the sweep does not decode, its speedup at each gamma and the
gamma it recommends (``forecast_sweep``); then, on the sweep's rows, forecast over measured at every gamma, the
recommended gamma's measured speedup, its loss against the best measured gamma and whether the sweep's 95%
intervals tell the two apart (``judge_forecast``). ``spectheory bench --forecast-prompts N`` and
``spectheory report`` print both."""

from __future__ import annotations

import time

import torch

from measure.bench import BenchSettings
from measure.profile import measure_profile
from spectheory.optimum import best_choice, best_gamma_row

__all__ = ["FORECAST_SEED", "FORECAST_LOSS", "forecast_sweep", "judge_forecast", "check_disjoint"]

FORECAST_SEED = 2  # the forecast's prompts: seed + 2 (a bench's are seed, the report's sweep's seed + 1)
FORECAST_LOSS = 0.05  # a forecast's gamma is good when it loses at most this against the best measured gamma


def check_disjoint(forecast_prompts: torch.Tensor, prompts: torch.Tensor) -> None:
    """A forecast judged on a sweep must not have seen the sweep's prompts (``[P, L]`` each)."""
    shared = set(map(tuple, forecast_prompts.tolist())) & set(map(tuple, prompts.tolist()))
    if shared:
        raise ValueError(f"the forecast's prompts share {len(shared)} prompt(s) with the sweep's: choose another "
                         f"--seed or fewer --forecast-prompts")


def forecast_sweep(target, draft, prompts: torch.Tensor, settings: BenchSettings, *, repeats: int,
                   progress=None) -> dict:
    """Per temperature of ``settings`` a cost profile (``measure.profile.measure_profile``: costs and acceptance along
    the text decoded) on ``prompts`` ``[P, L]``, over ``repeats`` timed repeats after one warm-up; its speedup at
    each of ``settings.gammas`` and the gamma it recommends among them (ties to the smaller). Nothing the sweep
    measures goes into it."""
    start, s = time.perf_counter(), settings
    temperatures = []
    for temperature in s.temperatures:
        profile, spread = measure_profile(target, draft, prompts, s.at(temperature), gamma_max=max(s.gammas),
                                          max_new_tokens=s.max_new_tokens, repeats=repeats, warmup=1,
                                          progress=progress)
        speedups = [{"gamma": gamma, "speedup": profile.speedup(gamma, tokens=s.max_new_tokens)} for gamma in s.gammas]
        best = best_choice(speedups, lambda row: row["speedup"], lambda row: row["gamma"])
        temperatures.append({"temperature": temperature, "gamma": best["gamma"], "speedup": best["speedup"],
                             "speedups": speedups, "profile": profile.as_dict(), "spread": spread})
    return {"prompts": len(prompts), "prompt_ids": prompts.tolist(), "repeats": repeats, "warmup": 1,
            "temperatures": temperatures, "seconds": time.perf_counter() - start}


def judge_forecast(forecast: dict, rows: list) -> dict:
    """One temperature's forecast (an entry of ``forecast_sweep``'s ``temperatures``) against the sweep's ``rows`` at
    that temperature (``measure.bench.bench_row``'s, with ``speedup_interval``): forecast / measured at every gamma
    and whether the forecast lies in the measured 95% interval; the forecast's gamma measured, its loss against the
    best measured gamma, and ``resolved``: whether the intervals of the two are apart (where they overlap, the
    sweep cannot tell the loss from noise)."""
    measured = {row["gamma"]: row for row in rows}
    best, chosen = best_gamma_row(rows), measured[forecast["gamma"]]  # the forecast chooses among the swept gammas
    judged = [{"gamma": f["gamma"], "forecast": f["speedup"], "measured": measured[f["gamma"]]["speedup"],
               "forecast_over_measured": f["speedup"] / measured[f["gamma"]]["speedup"],
               "measured_interval": measured[f["gamma"]]["speedup_interval"],
               "inside_interval": _inside(f["speedup"], measured[f["gamma"]]["speedup_interval"])}
              for f in forecast["speedups"]]
    loss = 1 - chosen["speedup"] / best["speedup"]
    return {"forecast_gamma": forecast["gamma"], "forecast_speedup": forecast["speedup"],
            "measured_speedup_at_forecast_gamma": chosen["speedup"], "forecast_loss": loss,
            "forecast_within_5_percent": loss <= FORECAST_LOSS, "forecast_by_gamma": judged,
            "best_measured_gamma": best["gamma"], "best_measured_speedup": best["speedup"],
            "loss_resolved": chosen["speedup_interval"][1] < best["speedup_interval"][0]}


def _inside(value: float, interval: list) -> bool:
    return interval[0] <= value <= interval[1]
