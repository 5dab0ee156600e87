"""Any OpenAI-compatible completions endpoint by URL (vLLM, SGLang, llama.cpp's server, llama-cpp-python's
server), driven as an engine (docs/engines.md).

One request per sample (``n`` = 1, seed ``seed + i``), ``concurrency`` of them in flight, each with a timeout
and retries with backoff; a sample whose every try failed is *lost* and counted, never dropped silently.
Tokens come back per position from ``logprobs.tokens``: as ids where the server offers them (vLLM's
``return_tokens_as_token_ids`` writes ``token_id:N``), else as text pieces; or from ``logprobs.content``, ids
(llama-server's). Speculation is a server's setting, not a request's: compare two servers (one drafting, one
not) with ``--against``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from urllib.parse import urlparse

from decoders.engines.base import END, EngineRun, EngineSampling

__all__ = ["OpenAIEngine", "is_url", "request_body", "row_of", "post_json", "in_flight", "retried"]

RETRY_BACKOFF = (0.5, 2.0, 5.0)  # seconds before the 2nd, 3rd and 4th try


def is_url(spec: str) -> bool:
    parsed = urlparse(spec)
    return parsed.scheme in ("http", "https") and bool(parsed.netloc)


def request_body(prompt: str, horizon: int, sampling: EngineSampling, seed: int, model: str | None) -> dict:
    """A /v1/completions body with every sampling parameter explicit (a server's defaults are not neutral:
    llama.cpp's min_p is 0.05), the repetition penalty under both engines' names."""
    body = {
        "prompt": prompt,
        "max_tokens": horizon,
        "n": 1,
        "seed": seed,
        "logprobs": 1,
        "stream": False,
        "return_tokens_as_token_ids": True,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,  # top_k 0 and min_p 0: off in llama.cpp and vLLM
        "repeat_penalty": sampling.repeat_penalty,
        "repetition_penalty": sampling.repeat_penalty,
    }
    return dict(body, model=model) if model else body


def _token(piece: str):
    return int(piece[len("token_id:") :]) if piece.startswith("token_id:") else piece


def _pieces(logprobs: dict) -> list:
    """Each sampled token of a completion's ``logprobs``: the legacy ``tokens`` list (vLLM, llama-cpp-python's
    server), or ``content``, one entry per token with its ``id`` (llama-server's)."""
    if "tokens" in logprobs:
        return [_token(piece) for piece in logprobs["tokens"]]
    return [entry["id"] if isinstance(entry.get("id"), int) else entry["token"] for entry in logprobs["content"]]


def row_of(response: dict, horizon: int) -> tuple:
    """The sampled tokens of a completions response, ``END``-padded to ``horizon``; a ValueError when the
    server gave no per-token logprobs."""
    try:
        pieces = _pieces(response["choices"][0]["logprobs"])
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ValueError(
            "the endpoint returned no per-token logprobs (choices[0].logprobs.tokens or .content): it "
            "cannot be audited token by token"
        ) from None
    tokens = tuple(pieces[:horizon])
    return tokens + (END,) * (horizon - len(tokens))


class OpenAIEngine:
    """The completions endpoint under ``url`` (``http://host:port``, with or without ``/v1``)."""

    def __init__(
        self, url: str, *, model: str | None = None, concurrency: int = 4, timeout: float = 120.0, retries: int = 3
    ) -> None:
        if not is_url(url):
            raise ValueError(f"engine URL must be http(s)://host[:port][/v1], got {url!r}")
        base = url.rstrip("/")
        self.endpoint = (base if base.endswith("/v1") else base + "/v1") + "/completions"
        self.name, self.model = url, model
        self.concurrency, self.timeout, self.retries = concurrency, timeout, min(retries, len(RETRY_BACKOFF))
        self._check_alive()

    def _check_alive(self) -> None:
        """One cheap request, so that a dead or wrong URL is one line before any long work."""
        try:
            self._post({"prompt": "a", "max_tokens": 1, "temperature": 0.0, "logprobs": 1})
        except (OSError, ValueError) as error:
            raise ValueError(f"engine {self.name} does not answer completions at {self.endpoint} ({error})") from None

    def _post(self, body: dict) -> dict:
        return post_json(self.endpoint, body, self.timeout)

    def _sample(self, prompt: str, horizon: int, sampling: EngineSampling, seed: int) -> tuple | None:
        """(row, generated tokens, seconds) of one sample, retried; None when every try failed."""
        body = request_body(prompt, horizon, sampling, seed, self.model)

        def once():
            started = time.perf_counter()
            row = row_of(self._post(body), horizon)
            return row, sum(token != END for token in row), time.perf_counter() - started

        return retried(once, self.retries)

    def generate(
        self,
        prompt: str,
        n: int,
        horizon: int,
        sampling: EngineSampling,
        *,
        speculate: int = 0,
        seed: int = 0,
        progress=None,
    ) -> EngineRun:
        if speculate:
            raise ValueError(
                "an OpenAI-compatible server speculates by its own settings: drop --speculate and "
                "compare a drafting server with a plain one (--against URL)"
            )
        results, seconds = in_flight(
            lambda i: self._sample(prompt, horizon, sampling, seed + i), n, self.concurrency, progress
        )
        kept = [result for result in results if result is not None]
        return EngineRun(
            tuple(row for row, _, _ in kept), seconds, {}, n - len(kept), sum(count for _, count, _ in kept)
        )


def retried(call, retries: int):
    """``call()``, tried up to ``retries`` + 1 times with ``RETRY_BACKOFF`` between; None when every try failed
    (a lost sample, counted by the caller)."""
    for attempt in range(retries + 1):
        try:
            return call()
        except (OSError, urllib.error.URLError, json.JSONDecodeError):
            if attempt < retries:
                time.sleep(RETRY_BACKOFF[attempt])
    return None


def post_json(url: str, body: dict, timeout: float) -> dict:
    """POST ``body`` as JSON to ``url``; the answer's JSON."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read().decode("utf-8"))


def in_flight(sample, n: int, concurrency: int, progress=None) -> tuple[list, float]:
    """([sample(i) for i in range(n)] with ``concurrency`` calls in flight, wall seconds); ``progress(1)`` after
    each."""
    results: dict = {}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(sample, i): i for i in range(n)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if progress:
                progress(1)
    return [results[i] for i in range(n)], time.perf_counter() - started
