"""The one progress bar (docs/project.md, "Errors and limits"): every long piece of work shows one the same way."""

from __future__ import annotations

from tqdm import tqdm

__all__ = ["progress_bar"]


def progress_bar(progress: bool | None, iterable=None, **options) -> tqdm:
    """A tqdm bar on stderr over ``iterable`` (or updated by hand), shown after one second and cleared when done:
    always when ``progress`` is True, never when False, and when None only on a terminal. ``options``: tqdm's
    ``total``, ``desc``, ``unit`` and the like."""
    return tqdm(iterable, delay=1, leave=False, disable=None if progress is None else not progress, **options)
