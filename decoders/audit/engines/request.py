"""Auditing an engine's speculative sampler (docs/engines.md): the request `spectheory audit --engine` makes, checked
before any work, its run (``run_engine_audit``) and the command's one call (``audit_engine``, with its progress bar,
written where asked). The run: at temperature 0 the greedy audit (``decoders.audit.engines.greedy``), above it the
two-sample audit (``decoders.audit.engines.sampled``) or the one-sample audit against our model of the engine's GGUF
file (``decoders.audit.engines.model``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from decoders.audit.engines.greedy import greedy_audit, greedy_lines
from decoders.audit.engines.model import against_model, check_model_law, model_lines
from decoders.audit.engines.sampled import SECOND_SIDE_SEED, engine_side, samples_side, two_sample_document
from decoders.engines import open_engine
from decoders.engines.base import Engine, EngineRun, EngineSampling, capability
from decoders.engines.registry import is_samples_file, speculation_fixed
from decoders.progress import progress_bar
from plumbing.outputs import check_writable, write_json
from plumbing.validation import as_int

__all__ = [
    "ENGINE_PROMPT",
    "EngineAuditRequest",
    "run_engine_audit",
    "audit_engine",
]


#: The default prompt: a ChatML rewrite request (SmolLM2's template), where prompt lookup has text to copy.
ENGINE_PROMPT = (
    "<|im_start|>user\nAdd type hints to this Python code. Repeat all of the code:\n```python\n"
    "def scale(values, factor):\n    total = 0\n    for value in values:\n"
    "        total += value * factor\n    return total\n```<|im_end|>\n<|im_start|>assistant\n```python\n"
)


@dataclass(frozen=True)
class EngineAuditRequest:
    """What `spectheory audit --engine` audits (docs/engines.md §3), checked before any work: ``engine`` (or
    ``samples``, a file) with speculation ``speculate`` against ``against`` (plain, model, a URL or a file);
    at temperature 0 the greedy audit over ``gammas``. ``speculate`` None: 4 draft tokens in-process; a server
    speculates by its own settings, so a URL takes no ``speculate`` and runs in-process audits only above
    temperature 0."""

    engine: str | None
    samples: str | None = None
    against: str | None = None
    sampling: EngineSampling = field(default_factory=EngineSampling)
    speculate: int | None = None
    gammas: tuple = tuple(range(1, 9))
    n: int = 5000
    horizon: int = 4
    level: float = 0.01
    seed: int = 0
    prompt: str = ENGINE_PROMPT
    gguf: str | None = None
    concurrency: int = 4

    def __post_init__(self) -> None:
        if self.engine is None and self.samples is None:
            raise ValueError(
                "--against compares an engine (--engine) or a samples file (--samples) with a second sample"
            )
        if self.samples is not None and self.against is None:
            raise ValueError("--samples with --engine flags needs --against B.jsonl (or drop --engine flags)")
        if self.speculate is not None:
            as_int("speculate", self.speculate, low=1, high=64)
        if self._fixed_speculation and self.speculate is not None:
            raise ValueError(
                f"--speculate {self.speculate}: an OpenAI-compatible server speculates by its own "
                "settings; compare a drafting server with a plain one (--engine URL --against URL2)"
            )
        if self._fixed_speculation and self.greedy:
            raise ValueError(
                "--temperature 0 audits greedy equality by setting the engine's speculation per "
                "--gammas, which a server fixes at its start: use --engine llama-cpp, or a temperature "
                "above 0 with --against URL2"
            )
        as_int("concurrency", self.concurrency, low=1, high=256)
        for gamma in self.gammas:
            as_int("gammas", gamma, low=1, high=64)
        as_int("horizon", self.horizon, low=1, high=1024)
        as_int("n", self.n, low=2, high=1_000_000)
        if self.against == "model":
            check_model_law(self.sampling)

    @property
    def _fixed_speculation(self) -> bool:  # a server that speculates by its own settings (registry.SERVER_START)
        return self.engine is not None and speculation_fixed(self.engine)

    @property
    def draft_tokens(self) -> int:
        """The engine side's speculation: ``speculate``, 4 by default in-process, 0 (its own settings) for a URL."""
        return 0 if self._fixed_speculation else (self.speculate or 4)

    @property
    def greedy(self) -> bool:
        return self.sampling.temperature == 0 and self.samples is None

    def open(self, spec: str) -> Engine:

        return open_engine(spec, gguf=self.gguf, concurrency=self.concurrency)

    def side(self, spec: str, *, speculate: int, seed: int, engine=None) -> tuple[str, EngineRun]:
        """(description, run) of one side: a samples file, or an engine (opened here unless given)."""
        if is_samples_file(spec):
            return samples_side(spec, None if self.engine is None else self.prompt, capability(engine, "tokenize"))
        return engine_side(
            engine or self.open(spec),
            self.prompt,
            self.sampling,
            self.n,
            self.horizon,
            speculate=speculate,
            seed=seed,
            fixed=speculation_fixed(spec),
        )


def run_engine_audit(request: EngineAuditRequest, progress=None) -> tuple:
    """(verdict document, printed lines) of ``request``: an ``EngineGreedyAudit`` at temperature 0, else an
    ``EngineModelAudit`` or an ``EngineTwoSampleAudit`` holding the samples drawn (``decoders.engine_results``)."""
    if request.greedy:
        document = greedy_audit(request.open(request.engine), request.prompt, request.horizon, request.gammas, progress)
        return document, greedy_lines(document)
    against = request.against or "plain"
    file_b = is_samples_file(against)  # read, its prompt checked, before a is drawn
    other = None if file_b or against in ("plain", "model") else request.open(against)  # asked first: a dead URL
    engine = None if request.engine is None else request.open(request.engine)  # fails before a server starts
    b_text, b = request.side(against, speculate=0, seed=0, engine=engine) if file_b else (None, None)
    a_text, a = request.side(
        request.samples or request.engine, speculate=request.draft_tokens, seed=request.seed, engine=engine
    )
    if against == "model":
        found = against_model(engine, request.prompt, a, request.sampling, level=request.level, seed=request.seed)
        return (
            replace(found, engine=a_text, sampling=request.sampling.describe(), rows=list(a.rows)),
            model_lines(found, a_text, engine.model_path.name, request.sampling),
        )
    if not file_b:
        b_text, b = request.side(
            request.engine if against == "plain" else against,
            speculate=0,
            seed=request.seed + SECOND_SIDE_SEED,
            engine=engine if against == "plain" else other,
        )
    document, lines = two_sample_document(a_text, a, b_text, b, request.sampling, request.level)
    version, known = capability(engine, "version"), capability(engine, "known_deviations")
    return (
        replace(document, engine_version=version()) if version else document,
        lines + (known() if known else []),
    )


def audit_engine(request: EngineAuditRequest, *, out: str | None = None, command: str | None = None) -> tuple:
    """``run_engine_audit``'s document and printed lines; with ``out`` (probed first) the document and the samples
    written there as JSON, ``command`` recorded."""
    if out:
        check_writable(out)
    with progress_bar(None if request.greedy else False, total=len(request.gammas), desc="greedy", unit="gamma") as bar:
        document, lines = run_engine_audit(request, bar.update)
    if out:
        write_json(out, document.as_dict(), command=command)
    return document, lines
