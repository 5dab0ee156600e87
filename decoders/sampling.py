"""Logits -> the distribution that is actually sampled: logit bias, penalties, temperature, top-k, top-p,
min-p, argmax (docs/theory.md §1 and docs/theory-sampling.md §14, which gives the order and each engine's).

Target and draft both go through ``adjusted_probs`` with the same ``Sampling``, so that the q used in
the accept test is exactly the q the draft token was drawn from. Temperature 0 is the one-hot argmax
distribution, ties going to the lowest token id. The caller's tensor is never modified.

Penalties, grammars and Mirostat make the law depend on the tokens before a position: ``History``
(``decoders.sampler_state``) holds their state per row, and ``History.along`` extends it along a path of drafted
tokens, one per position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch

from decoders.grammar import Grammar, GrammarSpec
from decoders.mirostat import VERSIONS as MIROSTAT_VERSIONS
from decoders.mirostat import Mirostat
from decoders.sampler_state import History
from plumbing.validation import as_non_negative_int, as_positive_int

__all__ = [
    "Sampling",
    "History",
    "history_of",
    "adjusted_probs",
    "processed_logits",
    "draw",
    "check_probs",
    "proposes",
    "GREEDY",
    "stop_padded",
    "after_stop",
]


def _finite(name: str, value, low: float = -math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise ValueError(f"{name} must be a finite number{f' >= {low:g}' if low > -math.inf else ''}, got {value!r}")


@dataclass(frozen=True)
class Sampling:
    """How logits become a sampling distribution (docs/theory-sampling.md §14), in this order: ``logit_bias`` ((token,
    bias), ... added to the logits), ``repetition_penalty`` > 0 (CTRL's rule: a logit of a token seen in the
    prompt or the output is divided by it when positive, multiplied when negative; 1 = off),
    ``frequency_penalty`` and ``presence_penalty`` (OpenAI's rule: minus frequency x count minus presence x
    [count > 0], counting the output only, or the prompt too when ``penalize_prompt``), ``temperature`` >= 0
    (0 = argmax of the penalised logits), ``top_k`` >= 1 (keep the k largest logits, ties at the k-th kept),
    ``top_p`` in (0, 1] (keep the smallest set of most likely tokens whose mass reaches top_p) and ``min_p``
    in [0, 1] (keep the tokens whose probability is at least min_p times the largest). ``stop``: token ids that end
    a row (vLLM's ``stop_token_ids``): a row that emits one emits nothing more (``stop_padded``). ``grammar``: a
    ``decoders.grammar.Grammar`` ending with the ``stop`` tokens (a ``GrammarSpec`` until ``bound`` to the model's
    vocabulary); the tokens it forbids get logit -inf. ``mirostat`` 1 or 2 (0 = off): llama.cpp's Mirostat last, with
    target surprise ``mirostat_tau`` (bits), learning rate ``mirostat_eta`` and, for version 1, ``mirostat_m``
    tokens (``decoders.mirostat``); its state makes the law depend on the tokens before a position."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalize_prompt: bool = False
    logit_bias: tuple = ()
    stop: tuple = ()
    grammar: object = None
    mirostat: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    mirostat_m: int = 100

    def __post_init__(self) -> None:
        _finite("temperature", self.temperature, 0.0)
        if self.top_k is not None:
            as_positive_int("top_k", self.top_k)
        if self.top_p is not None and (not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}")
        if self.min_p is not None and (not isinstance(self.min_p, (int, float)) or not 0 <= self.min_p <= 1):
            raise ValueError(f"min_p must be in [0, 1] or None, got {self.min_p!r}")
        _finite("repetition_penalty", self.repetition_penalty)
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0 (1 = off), got {self.repetition_penalty!r}")
        _finite("frequency_penalty", self.frequency_penalty)
        _finite("presence_penalty", self.presence_penalty)
        if not isinstance(self.penalize_prompt, bool):
            raise ValueError(f"penalize_prompt must be True or False, got {self.penalize_prompt!r}")
        if not isinstance(self.logit_bias, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in self.logit_bias
        ):
            raise ValueError(f"logit_bias must be a tuple of (token, bias) pairs, got {self.logit_bias!r}")
        for token, bias in self.logit_bias:
            as_non_negative_int("logit_bias token", token)
            _finite(f"logit_bias[{token}]", bias)
        if not isinstance(self.stop, tuple):
            raise ValueError(f"stop must be a tuple of token ids, got {self.stop!r}")
        for token in self.stop:
            as_non_negative_int("stop token", token)
        if isinstance(self.mirostat, bool) or self.mirostat not in MIROSTAT_VERSIONS:
            raise ValueError(f"mirostat must be one of {MIROSTAT_VERSIONS} (0 = off), got {self.mirostat!r}")
        _finite("mirostat_tau", self.mirostat_tau, 0.0)
        _finite("mirostat_eta", self.mirostat_eta, 0.0)
        as_positive_int("mirostat_m", self.mirostat_m)
        if self.grammar is not None:
            if not isinstance(self.grammar, (Grammar, GrammarSpec)):
                raise ValueError(
                    f"grammar must be a decoders.grammar.GrammarSpec or Grammar or None, got "
                    f"{type(self.grammar).__name__}"
                )
            if not self.stop:
                raise ValueError(f"{self.grammar.flag} needs a stop token (--stop) to end a complete output")
            if isinstance(self.grammar, Grammar) and set(self.grammar.stop) != set(self.stop):
                raise ValueError(
                    f"the grammar ends rows with stop tokens {list(self.grammar.stop)}, which must be the "
                    f"sampling's, got stop {list(self.stop)}"
                )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def __str__(self) -> str:
        """The settings that differ from the defaults, e.g. "T = 0.7, top-p 0.9, repetition penalty 1.3"."""
        words = [f"T = {self.temperature:g}"] + [
            f"{name} {value:g}"
            for name, value, off in (
                ("top-k", self.top_k, None),
                ("top-p", self.top_p, None),
                ("min-p", self.min_p, None),
                ("repetition penalty", self.repetition_penalty, 1),
                ("frequency penalty", self.frequency_penalty, 0),
                ("presence penalty", self.presence_penalty, 0),
            )
            if value != off
        ]
        words += ["penalties count the prompt"] if self.penalize_prompt else []
        words += [f"logit bias {dict(self.logit_bias)}"] if self.logit_bias else []
        words += [f"stop at {list(self.stop)}"] if self.stop else []
        words += [str(self.grammar)] if self.grammar is not None else []
        words += (
            [
                f"mirostat {self.mirostat} (tau {self.mirostat_tau:g}, eta {self.mirostat_eta:g}"
                f"{f', m {self.mirostat_m}' if self.mirostat == 1 else ''})"
            ]
            if self.mirostat
            else []
        )
        return ", ".join(words)

    @property
    def uses_history(self) -> bool:
        """Whether the law depends on the tokens before a position (a penalty, a grammar or Mirostat is set)."""
        return (
            self.repetition_penalty != 1
            or self.frequency_penalty != 0
            or self.presence_penalty != 0
            or self.grammar is not None
            or self.mirostat != 0
        )

    @property
    def mirostat_sampler(self) -> Mirostat | None:
        """The Mirostat these settings end with, or None."""
        return Mirostat(self.mirostat, self.mirostat_tau, self.mirostat_eta, self.mirostat_m) if self.mirostat else None

    @property
    def warping(self) -> "Sampling":
        """The settings that apply after ``processed_logits``: temperature and the filters (no bias, no penalty, no
        Mirostat: the law drafts are drawn from)."""
        return Sampling(self.temperature, self.top_k, self.top_p, self.min_p)

    def check_vocabulary(self, vocab_size: int) -> None:
        """Every logit-bias and stop token is an id of a vocabulary of ``vocab_size`` tokens."""
        for name, tokens in (("logit_bias", [token for token, _ in self.logit_bias]), ("stop", self.stop)):
            for token in tokens:
                if token >= vocab_size:
                    raise ValueError(f"{name} token must be below the vocabulary size {vocab_size}, got {token}")
        if isinstance(self.grammar, Grammar) and self.grammar.vocab_size != vocab_size:
            raise ValueError(
                f"the grammar was compiled for {self.grammar.vocab_size} tokens, the model has {vocab_size}"
            )

    @property
    def unconditioned(self) -> "Sampling":
        """These settings without the ones that depend on the tokens before a position (penalties, grammar,
        Mirostat): the law of a draft that does not follow the path (docs/theory-sampling.md §14: q need only be the law
        drafted from)."""
        return replace(
            self, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0, grammar=None, mirostat=0
        )

    def history_flags(self) -> list:
        """The CLI flags of the settings that make the law depend on the history, for refusals."""
        return [
            flag
            for flag, value, off in (
                ("--repetition-penalty", self.repetition_penalty, 1),
                ("--frequency-penalty", self.frequency_penalty, 0),
                ("--presence-penalty", self.presence_penalty, 0),
                ("--mirostat", self.mirostat, 0),
            )
            if value != off
        ] + ([self.grammar.flag] if self.grammar is not None else [])

    def as_dict(self) -> dict:
        """Every setting, JSON-ready: the grammar as its kind and source."""
        grammar = None if self.grammar is None else {"kind": self.grammar.kind, "source": self.grammar.source}
        return {
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "grammar"},
            "grammar": grammar,
            "logit_bias": [list(pair) for pair in self.logit_bias],
            "stop": list(self.stop),
        }

    def bound(self, vocabulary, vocab_size: int) -> "Sampling":
        """These settings with their grammar compiled for ``vocabulary`` (a transformers tokenizer, or None: the texts
        of ``decoders.grammar.token_texts``) of ``vocab_size`` tokens; themselves without a grammar to compile."""
        if not isinstance(self.grammar, GrammarSpec):
            return self
        return replace(self, grammar=self.grammar.compiled(vocabulary, vocab_size, self.stop))


def history_of(sampling: Sampling, prompts: list, model, generated: list | None = None) -> History | None:
    """``History.of`` the ``prompts`` for ``model`` (its vocabulary and device) with ``sampling``'s grammar, where
    ``sampling`` needs the tokens before a position; else None."""
    if not sampling.uses_history:
        return None
    history = History.of(prompts, model.vocab_size, model.device, generated, sampling.grammar)
    mirostat = sampling.mirostat_sampler
    if mirostat is None:
        return history
    start = torch.full((len(prompts),), mirostat.initial, dtype=torch.float64, device=model.device)
    return replace(history, mirostat=mirostat, mu=_mirostat_after(sampling, prompts, model, generated, start))


@torch.no_grad()
def _mirostat_after(sampling: Sampling, prompts: list, model, generated: list | None, mu: torch.Tensor) -> torch.Tensor:
    """Mirostat's state ``[B]`` after each row's last ``generated[b]`` tokens, from ``mu`` before them: the target's
    laws at those tokens from one forward pass over the rows of each (length, generated) pair."""
    groups = {}
    for b, (ids, count) in enumerate(zip(prompts, generated or [0] * len(prompts))):
        if count:
            groups.setdefault((len(ids), count), []).append(b)
    for (length, count), rows in groups.items():
        tokens = torch.tensor([prompts[b] for b in rows], device=model.device)  # [G, L]
        cut = length - count
        logits = model.forward(tokens, model.new_state(len(rows), length))[:, cut - 1 : length - 1]  # [G, count, V]
        before = replace(history_of(sampling, [prompts[b][:cut] for b in rows], model), mu=mu[rows])
        laws = adjusted_probs(logits, sampling, history=before.along(tokens[:, cut : length - 1]))  # [G, count, V]
        mu = mu.index_copy(0, torch.tensor(rows, device=mu.device), before.plus(tokens[:, cut:], laws=laws).mu)
    return mu


def processed_logits(logits: torch.Tensor, sampling: Sampling, history: History | None = None) -> torch.Tensor:
    """``logits: [..., V]`` after the logit bias, the penalties and the grammar (docs/theory-sampling.md §14);
    ``history``'s counts and mask broadcast against them. The same tensor when none is set."""
    if sampling.logit_bias:
        sampling.check_vocabulary(logits.shape[-1])
        tokens, values = zip(*sampling.logit_bias)
        bias = torch.zeros(logits.shape[-1], dtype=logits.dtype).index_add_(
            0, torch.tensor(tokens), torch.tensor(values, dtype=logits.dtype)
        )
        logits = logits + bias.to(logits.device)
    if not sampling.uses_history:
        return logits
    if history is None:
        raise ValueError(f"{', '.join(sampling.history_flags())} need the tokens before each position (a History)")
    if sampling.repetition_penalty != 1:
        # Counts are >= 0, and a logit 0 is 0 divided or multiplied: the fewest tensor ops, for the draft loop.
        seen, penalty = (history.prompt + history.output).bool(), sampling.repetition_penalty
        logits = torch.where(seen, torch.where(logits.signbit(), logits * penalty, logits / penalty), logits)
    if sampling.frequency_penalty or sampling.presence_penalty:
        counts = history.output + history.prompt if sampling.penalize_prompt else history.output
        logits = (
            logits - sampling.frequency_penalty * counts - sampling.presence_penalty * (counts > 0).to(logits.dtype)
        )
    if sampling.grammar is not None:  # -inf stays -inf through the steps above: the order does not matter
        if history.allowed is None:
            raise ValueError("a grammar needs the output before each position (a History built with the grammar)")
        logits = logits.masked_fill(~history.allowed, float("-inf"))
    return logits


GREEDY = Sampling(temperature=0.0)


def stop_padded(tokens, horizon: int, stop) -> tuple:
    """``tokens`` cut after the first of the ``stop`` ids and padded with it to ``horizon``: how the audits write a
    row that stopped, so that every row has ``horizon`` tokens and the law after a stop is that token for sure."""
    tokens = tuple(tokens)
    for i, token in enumerate(tokens[:horizon]):
        if token in stop:
            return tokens[: i + 1] + (token,) * (horizon - i - 1)
    return tokens[:horizon]


def after_stop(probs: torch.Tensor, tokens: torch.Tensor, stop) -> torch.Tensor:
    """``probs: [n, T, V]``, the laws before each of ``tokens: [n, T]``, with the positions after a stop token set to
    that token for sure (``stop_padded``'s convention). The same tensor when ``stop`` is empty."""
    if not stop:
        return probs
    stopped = torch.isin(tokens, torch.tensor(stop, device=tokens.device))  # [n, T]
    after = stopped.cumsum(dim=1)[:, :-1] > 0  # [n, T - 1], a stop before position t + 1
    first = torch.nn.functional.one_hot(tokens[:, :-1], probs.shape[-1]).to(probs.dtype)  # the previous token
    return torch.cat([probs[:, :1], torch.where(after[..., None], first, probs[:, 1:])], dim=1)


def adjusted_probs(
    logits: torch.Tensor, sampling: Sampling, *, validate: bool = True, history: History | None = None
) -> torch.Tensor:
    """``logits: [..., V]`` -> probabilities ``[..., V]`` (float32 or wider) under ``sampling``; ``history`` holds the
    counts before each row's position where a penalty is set (``processed_logits``).

    With ``validate`` raises ``ValueError`` on NaN logits or a row of all -inf (one host synchronisation);
    decoders pass ``validate=False`` in their inner loops and call ``check_probs`` once per iteration.
    Limits are taken exactly: +inf logits give the uniform law over the +inf tokens (they count as the
    largest float), and a temperature so small that logits / T overflows gives the uniform law over the
    largest logits (greedy's argmax set). A row of all -inf, like NaN, has no law: NaN probabilities.
    """
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a decoders.sampling.Sampling, got {type(sampling).__name__}")
    wide = torch.promote_types(logits.dtype, torch.float32)
    scores = logits if logits.dtype == wide else logits.to(wide)  # a copy when the dtype changes
    scores = processed_logits(scores, sampling, history)
    if validate and bool((torch.isnan(scores).any(dim=-1) | torch.isneginf(scores).all(dim=-1)).any()):
        raise ValueError("logits must not contain NaN and each row needs a finite entry")
    if sampling.greedy:
        best, at = scores.max(dim=-1, keepdim=True)  # the first maximum (lowest id wins ties); NaN counts as largest
        # A row with NaN or only -inf has no argmax: NaN probabilities, which check_probs reports as in sampling.
        fill = torch.where(best > float("-inf"), 1.0, float("nan")).to(scores.dtype)
        return torch.zeros_like(scores).scatter_(-1, at, fill)
    # +inf logits count as the largest float: softmax (which subtracts the maximum) shares the law among them.
    scores = scores.clamp(max=torch.finfo(scores.dtype).max)
    if sampling.temperature != 1:
        # Shifted before dividing, so that a tiny temperature tends to the argmax set instead of overflowing.
        scores = (scores - scores.amax(dim=-1, keepdim=True)) / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if sampling.top_p is not None and sampling.top_p < 1:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(ordered, dim=-1) - ordered  # [..., V], mass of the more likely tokens
        drop_sorted = mass_before >= sampling.top_p  # never drops the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if sampling.min_p:  # relative to the largest probability, which every filter before keeps
        probs = probs.masked_fill(probs < sampling.min_p * probs.amax(dim=-1, keepdim=True), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs if not sampling.mirostat else _mirostat_truncated(probs, history)


def _mirostat_truncated(probs: torch.Tensor, history: History | None) -> torch.Tensor:
    """``probs: [B, ..., V]`` truncated by Mirostat at ``history``'s state: one position per row, or the nodes of its
    walk (``along``, ``along_tree``: each at the state after the tokens before it)."""
    if history is None or history.mu is None:
        raise ValueError(
            "--mirostat needs its state before each position (a History from history_of, moved by the "
            "laws of the tokens emitted)"
        )
    if history.walk:
        return history.mirostat.walked(probs, history.mu, *history.walk)
    return history.mirostat.truncated(probs, history.mu.reshape(history.mu.shape + (1,) * (probs.dim() - 2)))


def draw(probs: torch.Tensor, sampling: Sampling, randomness) -> torch.Tensor:
    """One token per row of ``probs: [..., V]``, the output of ``adjusted_probs`` under ``sampling`` -> ``[...]``.
    Greedy laws are one-hot: their token is read off, with no draw from ``randomness`` (nothing to draw)."""
    return probs.argmax(dim=-1) if sampling.greedy else randomness.categorical(probs)


def proposes(logits: torch.Tensor) -> torch.Tensor:
    """Where a draft's logits ``[..., V]`` propose a token: not all -inf (all -inf is a draft's "no proposal";
    a NaN row does propose, so that ``adjusted_probs`` reports it rather than it passing as no proposal)."""
    return ~torch.isneginf(logits).all(dim=-1)


def check_probs(*probs: torch.Tensor, models: dict | None = None) -> None:
    """The deferred form of ``adjusted_probs``' validation: NaN anywhere (NaN or all -inf logits) raises.
    Probabilities (and sums of them) are finite or NaN, so one sum each finds a NaN (one host
    synchronisation in all). ``models`` (name -> that model's probabilities) names the culprit in the error."""
    if math.isnan(float(sum(p.sum() for p in probs))):
        culprit = next((name for name, p in (models or {}).items() if math.isnan(float(p.sum()))), None)
        raise ValueError(
            f"{'the ' + culprit + chr(39) + 's ' if culprit else ''}logits must not contain NaN and each "
            f"row needs a finite entry"
        )
