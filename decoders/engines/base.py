"""The one interface every serving engine is driven through (docs/engines.md).

An engine continues one prompt n times under given sampling parameters, with speculation on (``speculate``
draft tokens per step) or off, and reports what it drew, its own counters where it has them, and its
timings. Every sampling parameter is passed explicitly, since engines' defaults are not neutral
(llama.cpp's: top_k 40, top_p 0.95, min_p 0.05, temperature 0.8).

Samples are token ids where the engine gives them; an engine that returns only text pieces (an
OpenAI-compatible server without token ids) gives each generated token as its text, which the two-sample
audit compares just as well. A row that ended early (end of sequence) is padded with ``END``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from plumbing.validation import as_int, as_real

__all__ = [
    "END",
    "EngineSampling",
    "EngineRun",
    "Engine",
    "CAPABILITIES",
    "DEFAULT_CONTEXT",
    "capability",
    "recorded",
    "add_counters",
    "check_speculate",
]

#: What a row holds after the engine stopped it (end of sequence) before the horizon.
END = "<end>"


@dataclass(frozen=True)
class EngineSampling:
    """Sampling parameters in the engines' common words; the neutral value switches each one off."""

    temperature: float = 1.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    min_p: float = 0.0  # 0: off
    repeat_penalty: float = 1.0  # 1: off (llama.cpp's repeat_penalty, transformers' repetition_penalty)

    def __post_init__(self) -> None:
        as_real("temperature", self.temperature, low=0.0)
        as_int("top_k", self.top_k, low=0)
        as_real("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        as_real("min_p", self.min_p, low=0.0, high=1.0)
        as_real("repeat_penalty", self.repeat_penalty, low=0.0, low_open=True)

    def describe(self) -> str:
        words = [f"T = {self.temperature:g}"]
        words += [
            f"{name} {value:g}"
            for name, value, neutral in (
                ("top-k", self.top_k, 0),
                ("top-p", self.top_p, 1.0),
                ("min-p", self.min_p, 0.0),
                ("repeat penalty", self.repeat_penalty, 1.0),
            )
            if value != neutral
        ]
        return ", ".join(words)


@dataclass(frozen=True)
class EngineRun:
    """What one batch of requests gave: ``rows`` (n continuations of ``horizon`` tokens, ids or text pieces,
    ``END``-padded), the engine's counters (drafted / accepted tokens, per draft position; empty where the
    engine reports none), wall seconds, and how many requested samples were lost (never silently)."""

    rows: tuple
    seconds: float
    counters: dict = field(default_factory=dict)
    lost: int = 0
    generated_tokens: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else 0.0


class Engine(Protocol):
    """An engine: ``name`` for the output, and ``generate``."""

    name: str

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
        """n continuations of ``prompt`` (text, read as the engine reads a completion prompt) of ``horizon``
        tokens each; sample i drawn with seed ``seed + i``; ``speculate`` > 0 drafts that many tokens per
        step, 0 decodes plainly. ``progress`` is called with the number of samples finished."""


#: What an engine may offer beyond ``Engine``, each optional, with what the toolkit does without it (docs/extending.md,
#: "An engine"). Code outside ``decoders/engines/`` asks ``capability(engine, NAME)``, never the engine's class.
CAPABILITIES = {
    "version": "version() -> str, recorded in results (without: not recorded)",
    "tokenize": "tokenize(prompt) -> ids, as the engine reads a completion prompt (without: no bench, no diagnosis)",
    "model_path": "model_path: the GGUF file it serves (without: no bench, no --against model)",
    "context": "context: tokens one sequence may hold, prompt and output together (without: DEFAULT_CONTEXT)",
    "settings": "settings() -> dict: threads, slots, speculation options, for the record (without: not recorded)",
    "generate_ids": "generate_ids(ids, horizon, sampling, speculate=, seed=) -> (tokens, counters, seconds to the "
    "first token, seconds after it) of one continuation (without: no bench)",
    "call_costs": "call_costs(ids, max_tokens) -> {t_verify: [k = 1..max_tokens], t_sample, t_round, t_draft, "
    "optionally t_draft_batch: [k = 1..max_tokens], first_draft_in_batch} in seconds "
    "(first_draft_in_batch: 1 where the draft's evaluation of the verify batch drafts the first token; "
    "docs/engines.md, Bench; without: no bench)",
    "token_logprobs": "token_logprobs(ids, horizon, sampling, speculate=, seed=, top=) -> [(id, logprob, top ids and "
    "logprobs)] the engine reports per emitted token (without: reported probabilities are not "
    "audited)",
    "logits_after": "logits_after(chunks, row) -> logits [V] after evaluating chunks of ids, one call each "
    "(without: greedy differences are not diagnosed, and --against model needs all_logits)",
    "all_logits": "all_logits(chunks) -> logits [sum of lengths, V] after evaluating chunks of ids, one call each "
    "(without: --against model reads logits_after a position at a time, or is refused; no batch-shape "
    "numerics)",
    "check_sampling": "check_sampling(sampling, speculate): a ValueError naming what it refuses to sample under "
    "speculation, before any request (without: nothing is refused ahead; a conformance row it refuses fails)",
    "known_deviations": "known_deviations() -> [lines]: deviations found in this engine under its settings, with the "
    "sample size an audit needs to see them, printed beside a verdict (without: none printed)",
    "remembers_outputs": "remembers_outputs() -> bool: whether its drafts learn from its answers to earlier requests "
    "(vLLM's suffix decoding), so that a prompt sent again drafts better; the bench's forecast then counts a second "
    "pass over its prompts (without: False)",
    "load_run": "load_run(prompts, horizon, speculate, concurrency) -> decoders.engines.load.LoadRun: greedy "
    "continuations of every prompt (ids), streamed, concurrency of them in flight (without: no bench under load, "
    "--concurrency is refused)",
    "round_cost_along_runs": "round_cost_along_runs() -> bool: whether call_costs' t_round is a residual of runs (what "
    "a round takes beyond the calls the cost model prices: vLLM's proposer and bookkeeping), so that the bench's "
    "forecast measures it along its own runs (without: False, call_costs' t_round as measured)",
}


#: The context the Spec-Bench table assumes of an engine that does not say its own (llama.cpp's default here).
DEFAULT_CONTEXT = 2048


def capability(engine, name: str):
    """``engine``'s optional capability ``name`` (a ``CAPABILITIES`` key), or None where it lacks it."""
    if name not in CAPABILITIES:
        raise KeyError(f"unknown engine capability {name!r}; they are {', '.join(CAPABILITIES)}")
    return getattr(engine, name, None)


def recorded(engine) -> tuple[dict, str | None]:
    """``engine``'s settings and version for a document's record (its capabilities ``settings`` and ``version``; {}
    and None where it lacks them)."""
    settings, version = capability(engine, "settings"), capability(engine, "version")
    return settings() if settings else {}, version() if version else None


def add_counters(total: dict, one: dict) -> dict:
    """Two runs' speculation counters summed key by key (lists element by element); {} is the empty sum."""
    if not total:
        return one
    return {
        key: [a + b for a, b in zip(total[key], one[key])] if isinstance(one[key], list) else total[key] + one[key]
        for key in one
    }


def check_speculate(speculate: int) -> int:
    """Draft tokens per step: 0 (off) to 64."""
    return as_int("speculate", speculate, low=0, high=64)
