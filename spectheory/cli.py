"""Deprecated: the command line moved out of the theory package into its own top-level package,
``spectheory_cli`` (docs/project.md, "Layout"). ``from spectheory.cli import main`` keeps working, with a
``DeprecationWarning``, until version 0.3; import ``spectheory_cli.main`` instead. The ``spectheory`` command and
``python -m spectheory`` are unchanged."""

from __future__ import annotations

import warnings

__all__ = ["main"]


def __getattr__(name: str):
    if name != "main":
        raise AttributeError(f"module 'spectheory.cli' has no attribute {name!r} (the CLI moved to spectheory_cli)")
    warnings.warn("spectheory.cli is deprecated: import main from spectheory_cli (removed in 0.3)", DeprecationWarning,
                  stacklevel=2)
    from spectheory_cli import main

    return main
