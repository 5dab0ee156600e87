"""llama.cpp in-process, through llama-cpp-python (docs/engines.md): a GGUF file decoded by llama.cpp's own
quantized kernels, speculating by its prompt-lookup draft (``LlamaPromptLookupDecoding``, num_pred_tokens =
``speculate``). Its Python loop evaluates the drafted tokens in one call, then samples each position from
the target's logits and keeps drafts while they equal the sampled token.

llama-cpp-python reports no speculation counters, so the draft is wrapped: every proposal is recorded with
the length of the text it continued, and the tokens the engine then emitted say how many were accepted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from decoders.engines.base import END, EngineRun, EngineSampling, add_counters, check_speculate
from decoders.engines.build import ensure_llama_cpp_python
from plumbing.timing import time_repeats

__all__ = ["LlamaCppEngine", "default_threads", "import_llama_cpp", "proposal_counters"]

#: The context llama.cpp allocates: the longest shipped prompt (about 600 tokens) and a horizon fit.
N_CTX = 2048


def import_llama_cpp():
    """The ``llama_cpp`` module, built and installed on first use (``decoders.engines.build``: minutes, once, announced
    in one line); a ValueError naming the build's log (one line at the CLI) when it cannot be built."""

    ensure_llama_cpp_python()
    import llama_cpp
    import llama_cpp.llama_speculative  # noqa: F401

    return llama_cpp


def proposal_counters(proposals: list, sequence: list, gamma: int) -> dict:
    """The engine counters of one generation, in vLLM's words (docs/metrics.md): ``proposals`` [(context length,
    draft ids)], ``sequence`` the prompt and the emitted tokens. A proposal's accepted tokens are the longest
    prefix the emitted tokens repeat; one whose verification the horizon cut off is not counted, and an empty
    one (no match to copy) is a round without a draft; ``proposal_length_counts[m]`` counts rounds proposing m
    tokens. Per position i: the drafts that reached it (held i + 1
    tokens, the first i accepted: a Bernoulli trial of alpha) and that accepted it."""
    reached, accepted, lengths_seen = [0] * gamma, [0] * gamma, [0] * (gamma + 1)
    drafts = lengths = empty = 0
    for start, draft in proposals:
        emitted = sequence[start : start + len(draft)]
        hits = 0
        while hits < len(emitted) and emitted[hits] == draft[hits]:
            hits += 1
        if hits == len(emitted) < len(draft):  # the horizon ended before a rejection or the end of the draft
            continue
        lengths_seen[len(draft)] += 1
        if not draft:
            empty += 1
            continue
        drafts, lengths = drafts + 1, lengths + len(draft)
        for i in range(min(hits + 1, len(draft))):
            reached[i] += 1
            accepted[i] += int(i < hits)
    return {
        "num_drafts": drafts,
        "num_draft_tokens": lengths,
        "num_accepted_tokens": sum(accepted),
        "rounds_without_draft": empty,
        "rounds": drafts + empty,
        "reached_per_position": reached,
        "accepted_per_position": accepted,
        "proposal_length_counts": lengths_seen,
    }


class _Recorded:
    """A llama-cpp-python draft model that records (context length, proposal) of every call."""

    def __init__(self, draft, proposals: list) -> None:
        self.draft, self.proposals = draft, proposals

    def __call__(self, input_ids, /, **kwargs):
        proposal = self.draft(input_ids, **kwargs)
        self.proposals.append((len(input_ids), [int(token) for token in proposal]))
        return proposal


def default_threads() -> int:
    """Threads of the in-process engine: ``OMP_NUM_THREADS`` where set (the CPU math libraries' own setting, which
    the test suite sets to 1 a worker: llama.cpp's threads spin-wait, and beside another busy process two of them
    made a test 4-10x slower), else every core."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else os.cpu_count() or 1


class LlamaCppEngine:
    """``llama_cpp.Llama`` on ``model_path`` with ``threads`` threads (default: ``default_threads``): one instance as a
    user decodes plainly (``logits_all=False``, llama-cpp-python's default), one for speculation, whose loop
    reads the logits of every drafted position (``logits_all=True``; with False its first generation fails
    inside ``Llama.eval`` with a broadcast error), both loaded on first use."""

    name = "llama-cpp"
    context = N_CTX

    def __init__(self, model_path, *, threads: int | None = None) -> None:
        self._llama_cpp = import_llama_cpp()
        path = Path(model_path)
        if not path.is_file():
            raise ValueError(f"model_path must be a GGUF file, got '{path}'")
        self.model_path, self.threads = path, threads or default_threads()
        self._instances: dict = {}

    def llama(self, speculating: bool):
        """The ``Llama`` instance for plain decoding or for speculation."""
        if speculating not in self._instances:
            self._instances[speculating] = self._llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=N_CTX,
                n_threads=self.threads,
                logits_all=speculating,
                seed=0,
                verbose=False,
            )
        return self._instances[speculating]

    def tokenize(self, prompt: str) -> list:
        """The prompt's ids as a completion request reads them (special tokens parsed, BOS where the model
        adds one)."""
        return self.llama(False).tokenize(prompt.encode("utf-8"), add_bos=True, special=True)

    def logits_after(self, chunks: list, row: int = -1) -> np.ndarray:
        """llama.cpp's logits ``[V]`` at position ``row`` (from the end) after evaluating ``chunks`` (lists of
        ids) in turn, one ``Llama.eval`` each: a chunk per token is the plain path, a chunk of several a verify
        call."""
        llama = self.llama(True)
        llama.reset()
        for chunk in chunks:
            llama.eval(list(chunk))
        return np.array(llama.scores[llama.n_tokens + row], dtype=np.float64)

    def all_logits(self, chunks: list) -> np.ndarray:
        """llama.cpp's logits ``[N, V]`` at every position of ``chunks`` (lists of ids, N in all), evaluated in
        turn, one ``Llama.eval`` each."""
        self.logits_after(chunks)
        llama = self.llama(True)
        return np.array(llama.scores[: llama.n_tokens], dtype=np.float64)

    def settings(self) -> dict:
        return {"threads": self.threads, "context": N_CTX, "draft": "prompt lookup (LlamaPromptLookupDecoding)"}

    def version(self) -> str:
        return f"llama-cpp-python {self._llama_cpp.__version__}"

    def call_costs(self, prompt_ids: list, max_tokens: int) -> dict:
        """t_verify(k) for k = 1..``max_tokens`` (one ``Llama.eval`` of k tokens on the speculating instance, as its
        loop verifies), t_sample (one ``Llama.sample``, paid once per emitted token), t_round (one prompt-lookup
        call) and t_draft 0 (lookup costs the same at any length), in seconds after ``prompt_ids``: medians of 7
        calls (21 for the sampler and the lookup); docs/engines.md, Bench."""
        llama = self.llama(True)
        llama.reset()
        llama.eval(list(prompt_ids))
        base = llama.n_tokens
        extra = list(prompt_ids[-max_tokens:])  # tokens to evaluate: any ids of the text serve

        def verify(k):
            llama.n_tokens = base
            llama.eval(extra[:k])

        verify(1)  # warm
        t_verify = [time_repeats(lambda k=k: verify(k), repeats=7, warmup=0).median for k in range(1, max_tokens + 1)]
        llama.n_tokens = base
        llama.eval(extra[:1])
        sampler_args = dict(top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, temp=0.0, repeat_penalty=1.0)
        t_sample = time_repeats(
            lambda: llama.sample(idx=llama.n_tokens - 1, **sampler_args), repeats=21, warmup=0
        ).median
        lookup = self._draft(max_tokens - 1, [])
        history = np.asarray(list(prompt_ids) + extra, dtype=np.intc)
        t_round = time_repeats(lambda: lookup(history), repeats=21, warmup=0).median
        return {"t_verify": t_verify, "t_sample": t_sample, "t_round": t_round, "t_draft": 0.0, "context": base}

    def _draft(self, speculate: int, proposals: list):
        """A prompt-lookup draft of ``speculate`` tokens that records each proposal in ``proposals``."""
        lookup = self._llama_cpp.llama_speculative.LlamaPromptLookupDecoding
        return _Recorded(lookup(num_pred_tokens=speculate), proposals) if speculate else None

    def generate_ids(
        self, prompt_ids: list, horizon: int, sampling: EngineSampling, *, speculate: int = 0, seed: int = 0
    ) -> tuple[list, dict, float, float]:
        """One continuation of ``prompt_ids``: (token ids, stopped at end of sequence or the horizon; counters;
        seconds to the first token; seconds after it)."""
        proposals: list = []
        llama = self.llama(bool(check_speculate(speculate)))
        llama.draft_model = self._draft(speculate, proposals)
        llama.set_seed(seed)
        eos = llama.token_eos()
        tokens, started = [], time.perf_counter()
        first = started
        for token in llama.generate(
            prompt_ids,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            typical_p=1.0,
            temp=sampling.temperature,
            repeat_penalty=sampling.repeat_penalty,
            frequency_penalty=0.0,
            presence_penalty=0.0,
            reset=True,
        ):
            if not tokens:
                first = time.perf_counter()
            tokens.append(int(token))
            if len(tokens) == horizon or token == eos:
                break
        ended = time.perf_counter()
        counters = proposal_counters(proposals, list(prompt_ids) + tokens, speculate) if speculate else {}
        return tokens, counters, first - started, ended - first

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
        ids = self.tokenize(prompt)
        rows, counters, seconds, generated = [], {}, 0.0, 0
        for i in range(n):
            tokens, one, to_first, after = self.generate_ids(ids, horizon, sampling, speculate=speculate, seed=seed + i)
            rows.append(tuple(tokens) + (END,) * (horizon - len(tokens)))
            counters = add_counters(counters, one) if one else counters
            seconds, generated = seconds + to_first + after, generated + len(tokens)
            if progress:
                progress(1)
        return EngineRun(tuple(rows), seconds, counters, 0, generated)


def as_array(rows) -> np.ndarray:
    """Rows of ids (``END`` as -1) as an int64 array ``[n, horizon]``."""
    return np.array([[-1 if token == END else int(token) for token in row] for row in rows], dtype=np.int64)
