"""Wall-clock timing and host description shared by every benchmark (docs/theory.md §9; standard library only).

``time_repeats`` runs ``warmup`` untimed calls, then ``repeats`` timed ones, each bracketed by an optional
``synchronize`` (the decoders pass a CUDA synchronisation), and keeps every time so that results report
the median with its spread. ``host`` says where numbers come from: Python, platform, CPU, package versions.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Callable

import numpy as np

from plumbing.validation import as_non_negative_int, as_positive_int

__all__ = [
    "Timing",
    "repeat_ratios",
    "speedup_interval",
    "units_needed",
    "time_repeats",
    "time_interleaved",
    "host",
    "cpu_name",
    "PACKAGES",
]

#: Packages whose versions every result records (absent ones are recorded as null).
PACKAGES = ("spectheory", "numpy", "scipy", "sympy", "torch", "transformers", "matplotlib")


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed repeat, summarised by the median and the spread (min, max)."""

    seconds: tuple

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def as_dict(self) -> dict:
        return {
            "median_seconds": self.median,
            "min_seconds": min(self.seconds),
            "max_seconds": max(self.seconds),
            "seconds": list(self.seconds),
        }


def repeat_ratios(baseline: Timing, timing: Timing) -> list:
    """Per repeat, the baseline's seconds over ``timing``'s (runs timed interleaved: a speedup per repeat)."""
    return [a / b for a, b in zip(baseline.seconds, timing.seconds)]


def speedup_interval(
    plain, speculative, plain_tokens, speculative_tokens, *, level: float = 0.95, draws: int = 2000, seed: int = 0
) -> list:
    """[low, high]: a ``level`` bootstrap interval of a bench's speedup, the median over repeats of plain seconds
    per token over speculative seconds per token, resampling the repeats and the prompts (two levels, with
    replacement, the same draw for both paths). ``plain``, ``speculative``: decode seconds [repeats][prompts];
    ``*_tokens``: the tokens each prompt's decode produced [prompts]."""
    plain, speculative = np.asarray(plain, dtype=np.float64), np.asarray(speculative, dtype=np.float64)
    tokens = np.asarray(plain_tokens, dtype=np.float64), np.asarray(speculative_tokens, dtype=np.float64)
    if plain.ndim != 2 or plain.shape != speculative.shape or tokens[0].shape != tokens[1].shape != plain.shape[1:]:
        raise ValueError(
            f"speedup_interval needs [repeats][prompts] seconds and [prompts] tokens of one shape, got "
            f"{plain.shape}, {speculative.shape}, {tokens[0].shape}, {tokens[1].shape}"
        )
    generator = np.random.default_rng(seed)
    repeats, prompts = plain.shape
    rows = generator.integers(repeats, size=(draws, repeats))  # [draws, repeats]
    columns = generator.integers(prompts, size=(draws, prompts))  # [draws, prompts]

    def picked(seconds):  # [repeats, prompts] -> [draws, repeats]: the resampled prompts' sums
        return np.take_along_axis(seconds[rows], columns[:, None, :], axis=2).sum(axis=2)

    per_token = [
        picked(seconds) / count[columns].sum(axis=1, keepdims=True)
        for seconds, count in ((plain, tokens[0]), (speculative, tokens[1]))
    ]  # [draws, repeats] each
    statistic = np.median(per_token[0] / per_token[1], axis=1)  # [draws]
    return [float(q) for q in np.quantile(statistic, [(1 - level) / 2, (1 + level) / 2])]


def units_needed(units: int, half_width: float, tolerance: float) -> int:
    """The sampling units (prompts) that would narrow a 95% interval of relative half-width ``half_width``,
    measured on ``units`` of them, to +-``tolerance``: units (half_width / tolerance)^2, as 1 / sqrt(units)."""
    return max(1, math.ceil(units * (half_width / tolerance) ** 2))


def time_repeats(
    run: Callable[[], object], *, repeats: int, warmup: int, synchronize: Callable[[], None] | None = None
) -> Timing:
    """Seconds of ``run()`` over ``repeats`` timed calls after ``warmup`` untimed ones."""
    return time_interleaved({"run": run}, repeats=repeats, warmup=warmup, synchronize=synchronize)["run"]


def time_interleaved(
    runs: dict,
    *,
    repeats: int,
    warmup: int,
    synchronize: Callable[[], None] | None = None,
    progress: Callable[[], None] | None = None,
) -> dict:
    """``{name: Timing}`` of several runs timed in turn: every run's warm-up first, then repeat r of every run
    before repeat r + 1 of any, so that drift of the machine hits them all alike. ``progress()`` is called
    after each call."""
    repeats, warmup = as_positive_int("repeats", repeats), as_non_negative_int("warmup", warmup)
    sync, tick = synchronize or (lambda: None), progress or (lambda: None)
    for _ in range(warmup):
        for run in runs.values():
            run()
            tick()
    seconds = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            sync()
            start = time.perf_counter()
            run()
            sync()
            seconds[name].append(time.perf_counter() - start)
            tick()
    return {name: Timing(tuple(values)) for name, values in seconds.items()}


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def host() -> dict:
    """The machine and software a result was produced with."""
    return {
        "versions": {"python": platform.python_version(), **{name: _version(name) for name in PACKAGES}},
        "host": {"platform": platform.platform(), "cpu": cpu_name(), "cpu_count": os.cpu_count()},
    }
