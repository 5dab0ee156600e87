"""`spectheory bench` as one call per kind of run (docs/measuring.md; docs/engines.md §4): our decoders' sweep, trees
against chains or draft-length policies (``decoder_bench``); Spec-Bench's table (``spec_bench``); a serving engine's
own speculation against its own plain decoding, in-process, llama-server or two servers by URL (``engine_bench``).
Each returns the document and the lines to print, and writes the document to ``out`` (probed before any work)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import MAX_PROMPTS
from decoders.bench.bench import BenchSettings
from decoders.bench.bench_lines import bench_lines, cross_vocabulary_lines
from decoders.bench.cross_bench import cross_vocabulary_document
from decoders.bench.inputs import load_inputs, load_text_inputs
from decoders.bench.policy_bench import policy_lines
from decoders.bench.prompts import benchmark_prompts, draw_prompts
from decoders.bench.runs import BenchRun, bench_document, policy_document, tree_document
from decoders.bench.spec_bench.questions import is_spec_bench, mixed_prompts
from decoders.bench.spec_bench.run import SpecBenchRun
from decoders.bench.spec_bench.table import spec_bench_lines, table_lines
from decoders.bench.tree_bench import tree_lines
from decoders.engines import EngineSampling, open_engine, speculation_fixed
from decoders.engines.base import DEFAULT_CONTEXT, capability
from decoders.engines.bench import check_benchable, engine_bench_lines, server_bench
from decoders.engines.bench import engine_bench as measure_engine
from decoders.engines.load_bench import check_loadable, load_bench, load_lines
from decoders.jobs.spec_bench import engine_table, measure_table
from decoders.models.corpus import character_tokenizer
from decoders.models.gguf import gguf_tokenizer
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from plumbing.outputs import check_writable, write_json
from plumbing.validation import as_int

__all__ = [
    "decoder_bench",
    "spec_bench",
    "EngineBenchRun",
    "engine_bench",
    "CROSS_FORECAST_PROMPTS",
    "ENGINE_PROMPT_LENGTH",
    "LOAD_REQUESTS",
]

#: The engine bench's prompt length: room for code after the rewrite task's framing (53 SmolLM2 tokens).
ENGINE_PROMPT_LENGTH = 192
#: Under load: requests at each concurrency, and the longest prompt (a longer question is cut from its front).
LOAD_REQUESTS = 16
LOAD_PROMPT_TOKENS = 512


def _written(document: dict, lines: list, out: str | None, command: str | None) -> tuple:
    if out:
        write_json(out, document, command=command)
    return document, lines


#: Other prompts the cross-vocabulary forecast reads when --forecast-prompts is not given.
CROSS_FORECAST_PROMPTS = 4


def decoder_bench(run: BenchRun, *, out=None, command=None) -> tuple:
    """Our decoders as ``run`` says (``decoders.bench.runs.BenchRun``): a draft of another tokenizer under the
    cross-vocabulary methods, the draft-length policies against fixed gammas, trees against chains, or the gamma sweep
    (with its forecast first, and Hugging Face's loops beside with ``run.hf``); with ``out`` (probed first) the
    document written there, ``command`` recorded."""
    if out:
        check_writable(out)
    if run.cross_vocabulary is not None:
        document = cross_vocabulary_document(run)
        return _written(document.as_dict(), cross_vocabulary_lines(document), out, command)
    if run.policies is not None:
        document = policy_document(run)
        return _written(document.as_dict(), policy_lines(document), out, command)
    if run.tree:
        document = tree_document(run)
        return _written(document.as_dict(), tree_lines(document), out, command)
    document = bench_document(run)
    return _written(document.as_dict(), bench_lines(document), out, command)


def spec_bench(run: SpecBenchRun, *, out=None, command=None) -> tuple:
    """Spec-Bench's table as ``run`` says (``ALL``: every draft, the dynamic tree and llama.cpp's rows), forecast first
    from ``run.forecast_questions`` other questions per category (0: none)."""
    if out:
        check_writable(out)
    table = measure_table(run)
    lines = spec_bench_lines(table)
    if table.engine_skipped:
        lines.append(f"no engine rows: {table.engine_skipped}")
    return _written(table.as_dict(), lines, out, command)


def _ours_tokens_per_second(target, prompts, tokens: int) -> float:
    """Our reference autoregressive decoder's greedy tokens per second on the same prompts (one run each)."""
    started = time.perf_counter()
    for row in prompts:
        generate_autoregressive(target, [row], max_new_tokens=tokens, sampling=GREEDY, randomness=seeded(0))
    return len(prompts) * tokens / (time.perf_counter() - started)


def _peers(engine, target) -> dict[str, Callable]:
    """llama.cpp in-process on the same GGUF file beside any other engine, where it is built (docs/engines.md, Bench):
    name -> a call of (prompts, tokens) giving its plain greedy tokens per second after the first token."""
    import importlib.util

    if (
        engine.name.startswith("llama-cpp")
        or importlib.util.find_spec("llama_cpp") is None
        or not str(engine.model_path).endswith(".gguf")
    ):
        return {}
    peer = open_engine("llama-cpp", gguf=target)

    def rate(prompts: list, tokens: int) -> float:
        decode = made = 0
        for ids in prompts:
            row, _, _, after = peer.generate_ids(ids, tokens, EngineSampling(0.0))
            decode, made = decode + after, made + len(row) - 1
        return made / decode

    return {"llama.cpp (llama-cpp-python)": rate}


def _two_servers(spec: str, against: str, texts: list, runs: dict) -> tuple:
    """Two servers by URL, end to end (``decoders.engines.bench.server_bench``)."""
    with progress_bar(None, total=2 * (runs["repeats"] + runs["warmup"]), desc="server bench", unit="run") as bar:
        document = server_bench(open_engine(spec), open_engine(against), texts, progress=bar.update, **runs)
    low, _, high = document.speedup_spread
    return document, [
        f"{document.engine} against {document.against}: {document.speedup:.3f}x "
        f"({low:.3f}-{high:.3f}) end to end per token; greedy text equal: {document.greedy_equal}"
    ]


@dataclass(frozen=True)
class EngineBenchRun:
    """One run of `spectheory bench --engine` (docs/engines.md §4), made once by the command from its flags, checked
    here before any work and passed down whole: the engine ``spec`` (a kind, a GGUF file or a server's URL; a URL's
    speculation is fixed at its start, so it goes with ``against``, the plain server's URL, and only it) on ``task``'s
    prompts (``prompts`` of ``prompt_length`` tokens, ``seed``) at ``gammas`` and ``temperature``, ``max_new_tokens``
    each, ``repeats`` timed after ``warmup``; with ``forecast_prompts``, the forecast from that many other prompts
    first. ``target``: the model whose GGUF file or tokenizer the engine and our decoder read."""

    spec: str
    gammas: tuple
    prompts: int
    max_new_tokens: int
    repeats: int
    warmup: int
    against: str | None = None
    target: str | None = None
    task: str | None = None  # None: the rewrite task
    prompt_length: int | None = None  # None: ENGINE_PROMPT_LENGTH
    seed: int = 0
    temperature: float = 0.0
    forecast_prompts: int = 0
    concurrency: tuple = ()  # under load: the concurrencies, requests of Spec-Bench's questions (docs/engines.md)
    requests: int = LOAD_REQUESTS

    def __post_init__(self) -> None:
        if self.concurrency:
            self._check_load()
        object.__setattr__(self, "task", self.task or "rewrite")
        object.__setattr__(self, "prompt_length", self.prompt_length or ENGINE_PROMPT_LENGTH)
        if speculation_fixed(self.spec) != (self.against is not None):
            raise ValueError(
                "--against URL (the plain server) goes with an --engine whose speculation is fixed at its "
                "start (a server's URL), and only"
            )
        as_int("forecast_prompts", self.forecast_prompts, low=0, high=MAX_PROMPTS)
        if is_spec_bench(self.task):
            self.table()  # its settings checked before an engine opens

    def _check_load(self) -> None:
        """Under load: one gamma, greedy, an engine the toolkit starts, Spec-Bench's mixed questions."""
        for c in self.concurrency:
            as_int("concurrency", c, low=1, high=256)
        as_int("requests", self.requests, low=1, high=240)
        if len(self.gammas) != 1:
            raise ValueError(f"--concurrency benches one gamma, got --gammas {' '.join(map(str, self.gammas))}")
        if 1 not in self.concurrency:
            raise ValueError(
                f"--concurrency {' '.join(map(str, self.concurrency))} must include 1: the forecast times a prefill's "
                "cost one request at a time"
            )
        if self.temperature != 0 or self.against is not None or self.task not in (None, "spec-bench"):
            raise ValueError(
                "--concurrency runs greedy requests of Spec-Bench's mixed questions on an engine the toolkit starts: "
                "drop --temperatures, --against and --task"
            )

    def table(self) -> SpecBenchRun:
        """Spec-Bench's categories of ``task`` on the engine, in the table's terms."""
        settings = BenchSettings(
            temperatures=(0.0,),
            prompts=self.prompts,
            max_new_tokens=self.max_new_tokens,
            repeats=self.repeats,
            warmup=self.warmup,
            seed=self.seed,
            batch_sizes=(),
        )
        return SpecBenchRun(settings, self.task, gammas=tuple(self.gammas), forecast_questions=self.forecast_prompts)


def _engine_table(engine, run: SpecBenchRun) -> tuple:
    """Spec-Bench's categories on the engine (``decoders.jobs.spec_bench.engine_table``); only its tokenizer is read
    here."""
    table = engine_table(engine, gguf_tokenizer(engine.model_path), run)
    return table.as_dict(), [
        f"Spec-Bench, {engine.name} ({engine.model_path.name}), T = 0, batch 1, speedup over the "
        f"engine's own plain decoding at the best of gammas {', '.join(map(str, run.gammas))}",
        *table_lines(list(table.table)),
    ]


def _under_load(engine, run: EngineBenchRun) -> tuple:
    """The engine under load (``decoders.engines.load_bench``): ``run.requests`` of Spec-Bench's questions across its
    categories, the forecast's as many others, the prompts cut to leave room for the tokens."""
    check_loadable(engine)
    room = min(
        LOAD_PROMPT_TOKENS, (capability(engine, "context") or DEFAULT_CONTEXT) - run.max_new_tokens - run.gammas[0] - 1
    )
    bench, other = mixed_prompts(gguf_tokenizer(engine.model_path), run.requests, run.seed, room)
    total = len(run.concurrency) * (1 + run.repeats)  # the forecast one run a concurrency, then the repeats
    with progress_bar(None, total=total, desc="load bench", unit="run") as bar:
        document = load_bench(
            engine,
            [list(p.tokens) for p in bench],
            forecast_prompts=[list(p.tokens) for p in other],
            concurrency=list(run.concurrency),
            gamma=run.gammas[0],
            max_new_tokens=run.max_new_tokens,
            repeats=run.repeats,
            progress=bar.update,
        )
    return document.as_dict(), load_lines(document)


def engine_bench(run: EngineBenchRun, *, out=None, command=None) -> tuple:
    """The engine's speed with and without its speculation on the task's prompts as ``run`` says (docs/engines.md
    §4): two servers by URL (``run.against``), Spec-Bench's categories, or the engine bench with its cost model and our
    reference decoder's speed beside (with ``run.forecast_prompts``, its forecast from that many other prompts)."""
    if out:
        check_writable(out)
    task, length, prompts, seed, target = run.task, run.prompt_length, run.prompts, run.seed, run.target
    runs = dict(max_new_tokens=run.max_new_tokens, repeats=run.repeats, warmup=run.warmup)
    if run.against is not None:  # two servers: the speculating one against the plain one
        inputs = load_text_inputs(target or "smollm2")  # prompts only: the tokenizer, never the model's weights
        tokenizer = inputs.tokenizer or character_tokenizer()
        texts = [tokenizer.decode(row.tolist()) for row in benchmark_prompts(inputs, task, prompts, length, seed)]
        document, lines = _two_servers(run.spec, run.against, texts, runs)
        return _written(replace(document, task=task).as_dict(), lines, out, command)
    engine = open_engine(run.spec, gguf=target)
    if run.concurrency:
        return _written(*_under_load(engine, run), out, command)
    check_benchable(engine)  # before any run: what the bench reads of an engine
    if is_spec_bench(task):
        return _written(*_engine_table(engine, run.table()), out, command)
    inputs = load_inputs(str(engine.model_path), [])
    drawn = draw_prompts(inputs, task, (prompts, length), seed=seed, forecast=run.forecast_prompts)
    rows, other = drawn.sweep.tolist(), None if drawn.forecast is None else drawn.forecast.tolist()
    total = (len(run.gammas) + 1) * (run.repeats + run.warmup)
    with progress_bar(None, total=total, desc="engine bench", unit="run") as bar:
        document = measure_engine(
            engine,
            rows,
            gammas=list(run.gammas),
            temperature=run.temperature,
            progress=bar.update,
            forecast_prompts=other,
            peers=_peers(engine, target),
            **runs,
        )
    document = replace(
        document,
        task=task,
        cpu=document.environment["host"]["cpu"],
        ours_tokens_per_second=_ours_tokens_per_second(inputs.target, rows, run.max_new_tokens),
    )
    return _written(document.as_dict(), engine_bench_lines(document), out, command)
