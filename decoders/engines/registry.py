"""The registry of engine kinds (docs/extending.md): how a ``--engine`` spec names each kind, how one is opened, and
what it declares. A new kind is one ``register_engine(EngineKind(...))``; ``open_engine``, the CLI's help and the
error for an unknown spec are generated from ``ENGINE_KINDS``. Callers ask the kind what it declares
(``speculation``), never what its spec looks like."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from decoders.engines.base import Engine
from plumbing.registry import register

__all__ = [
    "EngineKind",
    "ENGINE_KINDS",
    "PER_REQUEST",
    "SERVER_START",
    "register_engine",
    "engine_kind",
    "engine_usages",
    "speculation_fixed",
    "is_samples_file",
    "open_engine",
]

#: Speculation chosen per call (``generate(..., speculate=k)``): one engine gives both sides of an audit or a bench.
PER_REQUEST = "per request"
#: Speculation fixed when the server started (its own settings): a plain side needs a second, plain server.
SERVER_START = "server start"


@dataclass(frozen=True)
class EngineKind:
    """One kind of engine. ``usage``: how a spec names it (help and errors); ``matches(spec)``: whether a spec is
    this kind's; ``open(spec, gguf=, concurrency=, threads=)``: an ``Engine`` (a ValueError, one line at the CLI, for
    a bad spec); ``speculation``: ``PER_REQUEST`` or ``SERVER_START``; ``description``: one line for docs and help.
    Optional capabilities are the engine's own (``decoders.engines.base.CAPABILITIES``)."""

    name: str
    usage: str
    matches: Callable[[str], bool]
    open: Callable[..., Engine]
    speculation: str
    description: str

    def __post_init__(self) -> None:
        if self.speculation not in (PER_REQUEST, SERVER_START):
            raise ValueError(f"speculation must be {PER_REQUEST!r} or {SERVER_START!r}, got {self.speculation!r}")


#: Every registered kind by name, in the order specs are matched.
ENGINE_KINDS: dict[str, EngineKind] = {}


def register_engine(kind: EngineKind) -> EngineKind:
    """Adds ``kind`` (a name already registered is a ValueError); returns it."""
    return register(ENGINE_KINDS, kind, "engine kind")


def engine_usages() -> str:
    """The registered kinds' usages, for help and errors: ``llama-cpp, llama-server[:OPTIONS] or URL``."""
    usages = [kind.usage for kind in ENGINE_KINDS.values()]
    return ", ".join(usages[:-1]) + f" or {usages[-1]}" if len(usages) > 1 else "".join(usages)


def _matching(spec: str) -> EngineKind | None:
    """The first registered kind whose ``matches`` takes ``spec``, or None."""
    return next((kind for kind in ENGINE_KINDS.values() if kind.matches(spec)), None)


def engine_kind(spec: str) -> EngineKind:
    """The kind whose ``matches`` takes ``spec``; a ValueError naming every usage where none does."""
    kind = _matching(spec)
    if kind is None:
        raise ValueError(f"engine must be one of {engine_usages()}, got {spec!r}")
    return kind


def speculation_fixed(spec: str) -> bool:
    """Whether the engine ``spec`` names fixes its speculation at its start (its plain side is a second engine); an
    engine of no registered kind (a user's object, opened by other means) speculates per request, as ``Engine``
    says."""
    kind = _matching(spec)
    return kind is not None and kind.speculation == SERVER_START


def is_samples_file(spec: str) -> bool:
    """Whether a side (--engine's or --against's) is a samples file: JSON Lines that no engine kind takes."""
    return spec.endswith(".jsonl") and _matching(spec) is None


def open_engine(spec: str, *, gguf: str | None = None, concurrency: int = 4, threads: int | None = None) -> Engine:
    """The engine ``spec`` names, opened by its kind (``gguf``: the ``--target`` a local engine reads)."""
    return engine_kind(spec).open(spec, gguf=gguf, concurrency=concurrency, threads=threads)
