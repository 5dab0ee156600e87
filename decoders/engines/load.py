"""A server under load (docs/engines-load.md): requests kept in flight at a concurrency, each streamed so
that its time to the first token and its time per output token after it are its own, and the goodput (output tokens
per second over all requests) of the whole run, a new request sent as soon as one is answered
(``decoders.engines.openai.in_flight``). The engines' ``load_run`` (``decoders.engines.base.CAPABILITIES``) build on
``streamed``; ``decoders.engines.load_bench`` alternates plain and speculative servers over it."""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field

__all__ = ["LoadRequest", "LoadRun", "streamed", "check_concurrency"]


@dataclass(frozen=True)
class LoadRequest:
    """One streamed request: its output tokens, seconds to its first token and to its last (from sending it), the
    engine iterations it took after its first token (its rounds: each emits its accepted drafts and one token), and its
    own speculation counters where the engine reports them per request (llama-server; {} else)."""

    tokens: int
    first_seconds: float
    seconds: float
    rounds: int
    counters: dict = field(default_factory=dict)

    @property
    def time_per_output_token(self) -> float:
        """Seconds per output token after the first (TPOT)."""
        return (self.seconds - self.first_seconds) / max(self.tokens - 1, 1)


@dataclass(frozen=True)
class LoadRun:
    """``requests`` sent to one server with ``concurrency`` in flight (speculating ``speculate`` tokens, 0: plain):
    wall ``seconds`` from the first sent to the last answered, the server's speculation counters over the run, and
    its iterations (forward steps) where it counts them (vLLM; None else)."""

    concurrency: int
    speculate: int
    requests: tuple
    seconds: float
    counters: dict = field(default_factory=dict)
    iterations: int | None = None

    @property
    def tokens(self) -> int:
        return sum(request.tokens for request in self.requests)

    @property
    def goodput(self) -> float:
        """Output tokens per second over all requests."""
        return self.tokens / self.seconds


def streamed(url: str, body: dict, timeout: float = 600.0) -> tuple[float, float, list]:
    """POST ``body`` (a streaming request) to ``url``: (seconds to the first server-sent event, seconds to the end of
    the answer, every event's JSON in order). An event is a ``data: {...}`` line; ``data: [DONE]`` ends it."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
    )
    started, first, events = time.perf_counter(), None, []
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        for raw in answer:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            first = first if first is not None else time.perf_counter() - started
            events.append(json.loads(line[len("data:") :]))
    if first is None:
        raise ValueError(f"{url} answered a streaming request with no event")
    return first, time.perf_counter() - started, events


def check_concurrency(concurrency: int, room: int, words: str) -> None:
    """A server decodes at most ``room`` requests together (its slots or max sequences): a concurrency above it would
    queue requests, not batch them."""
    if concurrency > room:
        raise ValueError(
            f"concurrency {concurrency} is above the {room} requests the server decodes together; start it with {words}"
        )
