"""Moved to ``jobs.spec_bench`` (measurement has no place among the figures); this name still resolves, with a
warning."""

from __future__ import annotations

import warnings

__all__ = ["ENGINE_GAMMAS", "engine_table", "whole_table"]


def __getattr__(name: str):
    if name in __all__:
        warnings.warn(f"paper_figs.spec_bench_tables.{name} moved: import it from jobs.spec_bench",
                      DeprecationWarning, stacklevel=2)
        from jobs import spec_bench

        return getattr(spec_bench, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
