"""Logits -> the distribution that is actually sampled: logit bias, penalties, temperature, top-k, top-p,
min-p, argmax (docs/theory.md §1 and §14, which gives the order and each engine's).

Target and draft both go through ``adjusted_probs`` with the same ``Sampling``, so that the q used in
the accept test is exactly the q the draft token was drawn from. Temperature 0 is the one-hot argmax
distribution, ties going to the lowest token id. The caller's tensor is never modified.

Penalties and grammars make the law depend on the tokens before a position: ``History`` holds their counts per
row (and a grammar's mask), and ``History.along`` extends them along a path of drafted tokens, one per position.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields, replace

import torch
from decoders.grammar import Grammar, GrammarSpec
from spectheory.validation import as_non_negative_int, as_positive_int

__all__ = ["Sampling", "History", "history_of", "adjusted_probs", "processed_logits", "draw", "check_probs", "proposes", "GREEDY",
           "stop_padded", "after_stop"]


def _finite(name: str, value, low: float = -math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise ValueError(f"{name} must be a finite number{f' >= {low:g}' if low > -math.inf else ''}, got {value!r}")


@dataclass(frozen=True)
class Sampling:
    """How logits become a sampling distribution (docs/theory.md §14), in this order: ``logit_bias`` ((token,
    bias), ... added to the logits), ``repetition_penalty`` > 0 (CTRL's rule: a logit of a token seen in the
    prompt or the output is divided by it when positive, multiplied when negative; 1 = off),
    ``frequency_penalty`` and ``presence_penalty`` (OpenAI's rule: minus frequency x count minus presence x
    [count > 0], counting the output only, or the prompt too when ``penalize_prompt``), ``temperature`` >= 0
    (0 = argmax of the penalised logits), ``top_k`` >= 1 (keep the k largest logits, ties at the k-th kept),
    ``top_p`` in (0, 1] (keep the smallest set of most likely tokens whose mass reaches top_p) and ``min_p``
    in [0, 1] (keep the tokens whose probability is at least min_p times the largest). ``stop``: token ids that end
    a row (vLLM's ``stop_token_ids``): a row that emits one emits nothing more (``stop_padded``). ``grammar``: a
    ``decoders.grammar.Grammar`` ending with the ``stop`` tokens (a ``GrammarSpec`` until ``bound`` to the model's
    vocabulary); the tokens it forbids get logit -inf."""

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
                isinstance(pair, tuple) and len(pair) == 2 for pair in self.logit_bias):
            raise ValueError(f"logit_bias must be a tuple of (token, bias) pairs, got {self.logit_bias!r}")
        for token, bias in self.logit_bias:
            as_non_negative_int("logit_bias token", token)
            _finite(f"logit_bias[{token}]", bias)
        if not isinstance(self.stop, tuple):
            raise ValueError(f"stop must be a tuple of token ids, got {self.stop!r}")
        for token in self.stop:
            as_non_negative_int("stop token", token)
        if self.grammar is not None:
            if not isinstance(self.grammar, (Grammar, GrammarSpec)):
                raise ValueError(f"grammar must be a decoders.grammar.GrammarSpec or Grammar or None, got "
                                 f"{type(self.grammar).__name__}")
            if not self.stop:
                raise ValueError(f"{self.grammar.flag} needs a stop token (--stop) to end a complete output")
            if isinstance(self.grammar, Grammar) and set(self.grammar.stop) != set(self.stop):
                raise ValueError(f"the grammar ends rows with stop tokens {list(self.grammar.stop)}, which must be the "
                                 f"sampling's, got stop {list(self.stop)}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def __str__(self) -> str:
        """The settings that differ from the defaults, e.g. "T = 0.7, top-p 0.9, repetition penalty 1.3"."""
        words = [f"T = {self.temperature:g}"] + [f"{name} {value:g}" for name, value, off in (
            ("top-k", self.top_k, None), ("top-p", self.top_p, None), ("min-p", self.min_p, None),
            ("repetition penalty", self.repetition_penalty, 1), ("frequency penalty", self.frequency_penalty, 0),
            ("presence penalty", self.presence_penalty, 0)) if value != off]
        words += ["penalties count the prompt"] if self.penalize_prompt else []
        words += [f"logit bias {dict(self.logit_bias)}"] if self.logit_bias else []
        words += [f"stop at {list(self.stop)}"] if self.stop else []
        words += [str(self.grammar)] if self.grammar is not None else []
        return ", ".join(words)

    @property
    def uses_history(self) -> bool:
        """Whether the law depends on the tokens before a position (a penalty or a grammar is set)."""
        return (self.repetition_penalty != 1 or self.frequency_penalty != 0 or self.presence_penalty != 0
                or self.grammar is not None)

    @property
    def warping(self) -> "Sampling":
        """The settings that apply after ``processed_logits``: temperature and the filters (no bias, no penalty)."""
        return Sampling(self.temperature, self.top_k, self.top_p, self.min_p)

    def check_vocabulary(self, vocab_size: int) -> None:
        """Every logit-bias and stop token is an id of a vocabulary of ``vocab_size`` tokens."""
        for name, tokens in (("logit_bias", [token for token, _ in self.logit_bias]), ("stop", self.stop)):
            for token in tokens:
                if token >= vocab_size:
                    raise ValueError(f"{name} token must be below the vocabulary size {vocab_size}, got {token}")
        if isinstance(self.grammar, Grammar) and self.grammar.vocab_size != vocab_size:
            raise ValueError(f"the grammar was compiled for {self.grammar.vocab_size} tokens, the model has {vocab_size}")

    @property
    def unconditioned(self) -> "Sampling":
        """These settings without the ones that depend on the tokens before a position (penalties, grammar): the law
        of a draft that does not follow the path (docs/theory.md §14: q need only be the law drafted from)."""
        return replace(self, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0, grammar=None)

    def history_flags(self) -> list:
        """The CLI flags of the settings that make the law depend on the history, for refusals."""
        return [flag for flag, value, off in (("--repetition-penalty", self.repetition_penalty, 1),
                                              ("--frequency-penalty", self.frequency_penalty, 0),
                                              ("--presence-penalty", self.presence_penalty, 0)) if value != off] + (
            [self.grammar.flag] if self.grammar is not None else [])

    def as_dict(self) -> dict:
        """Every setting, JSON-ready: the grammar as its kind and source."""
        grammar = None if self.grammar is None else {"kind": self.grammar.kind, "source": self.grammar.source}
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "grammar"}, "grammar": grammar,
                "logit_bias": [list(pair) for pair in self.logit_bias], "stop": list(self.stop)}

    def bound(self, vocabulary, vocab_size: int) -> "Sampling":
        """These settings with their grammar compiled for ``vocabulary`` (a transformers tokenizer, or None: the texts
        of ``decoders.grammar.token_texts``) of ``vocab_size`` tokens; themselves without a grammar to compile."""
        if not isinstance(self.grammar, GrammarSpec):
            return self
        return replace(self, grammar=self.grammar.compiled(vocabulary, vocab_size, self.stop))


@dataclass(frozen=True)
class History:
    """Counts of the tokens before a position, per row: ``prompt`` and ``output`` ``[..., V]`` (float, so that they
    broadcast against logits); with a ``grammar``, each row's ``outputs`` (token tuples) and the grammar's mask
    there, ``allowed`` ``[..., V]`` bool. ``of`` counts prompts; ``plus`` adds tokens to the output; ``along`` the
    counts before each position of a path."""

    prompt: torch.Tensor
    output: torch.Tensor
    grammar: Grammar | None = None
    outputs: tuple = ()
    allowed: torch.Tensor | None = None

    @staticmethod
    def of(prompts: list, vocab_size: int, device, generated: list | None = None,
           grammar: Grammar | None = None) -> "History":
        """The counts of ``prompts`` (lists of ids) ``[B, V]``, whose last ``generated[b]`` tokens are output."""
        generated = generated or [0] * len(prompts)
        prompt, output = (torch.zeros(len(prompts), vocab_size, dtype=torch.float32, device=device) for _ in range(2))
        outputs = tuple(tuple(ids[len(ids) - n:]) if n else () for ids, n in zip(prompts, generated))
        for b, (ids, n) in enumerate(zip(prompts, generated)):
            cut = len(ids) - n
            for counts, part in ((prompt, ids[:cut]), (output, ids[cut:])):
                if part:
                    counts[b].index_add_(0, torch.tensor(part, device=device), torch.ones(len(part), device=device))
        return History(prompt, output).with_grammar(grammar, outputs)

    def with_grammar(self, grammar: Grammar | None, outputs: tuple) -> "History":
        """This history with ``grammar``'s masks after each row's ``outputs`` (itself without a grammar)."""
        if grammar is None:
            return self
        if not isinstance(grammar, Grammar):
            raise ValueError(f"the {grammar.kind} must be compiled for the model's vocabulary first (Sampling.bound)")
        return History(self.prompt, self.output, grammar, outputs, grammar.masks(outputs).to(self.output.device))

    def plus(self, tokens: torch.Tensor, keep: torch.Tensor | None = None) -> "History":
        """The history after the output tokens ``tokens: [B, S]`` (only where ``keep: [B, S]`` is True)."""
        ones = torch.ones(tokens.shape, dtype=self.output.dtype, device=tokens.device)
        ones = ones if keep is None else ones * keep
        counted = History(self.prompt, self.output.scatter_add(-1, tokens, ones))
        if self.grammar is None:
            return counted
        kept = tokens.tolist() if keep is None else [[t for t, k in zip(row, mask) if k]
                                                     for row, mask in zip(tokens.tolist(), keep.tolist())]
        return counted.with_grammar(self.grammar, tuple(row + tuple(new) for row, new in zip(self.outputs, kept)))

    def along(self, path: torch.Tensor) -> "History":
        """Counts ``[B, S + 1, V]`` before each position of ``path: [B, S]`` (position 0: before its first token);
        a history of one row serves every row of ``path``."""
        batch, length = path.shape
        steps = torch.zeros(batch, length + 1, self.output.shape[-1], dtype=self.output.dtype, device=path.device)
        steps[:, 1:].scatter_(2, path[..., None], 1.0)
        output = steps.cumsum_(dim=1).add_(self.output[:, None])
        allowed = None
        if self.grammar is not None:
            rows = [self.outputs[b if len(self.outputs) > 1 else 0] + tuple(tokens) for b, tokens in enumerate(path.tolist())]
            allowed = torch.stack([self.grammar.masks([row[:len(row) - length + s] for s in range(length + 1)])
                                   for row in rows]).to(path.device)  # [B, S + 1, V]
        return History(self.prompt[:, None].expand_as(output), output, self.grammar, (), allowed)

    def along_tree(self, tokens: torch.Tensor, parents: torch.Tensor) -> "History":
        """The history after each node of a draft tree ``tokens, parents: [B, N]`` (-1: a root, the last committed
        token, already counted): its ancestors below the root and itself, in order -> ``[B, N, V]``."""
        batch, size = tokens.shape
        parents_of = parents.tolist()
        paths = [[[] for _ in range(size)] for _ in range(batch)]  # node indices below the root, root side first
        for b, n in itertools.product(range(batch), range(size)):
            node = n
            while parents_of[b][node] >= 0:
                paths[b][n].insert(0, node)
                node = parents_of[b][node]
        steps = torch.zeros(batch, size, size, dtype=self.output.dtype, device=tokens.device)  # [B, N, N]: on the path
        for b, n in itertools.product(range(batch), range(size)):
            steps[b, n, paths[b][n]] = 1.0
        one_hot = torch.nn.functional.one_hot(tokens, self.output.shape[-1]).to(self.output.dtype)  # [B, N, V]
        output = torch.bmm(steps, one_hot).add_(self.output[:, None])
        allowed = None
        if self.grammar is not None:
            rows = tokens.tolist()
            allowed = torch.stack([self.grammar.masks([self.outputs[b] + tuple(rows[b][m] for m in paths[b][n])
                                                       for n in range(size)]) for b in range(batch)]).to(tokens.device)
        return History(self.prompt[:, None].expand_as(output), output, self.grammar, (), allowed)

    def at(self, index) -> "History":
        """The counts at ``index`` of the path dimension (``along``'s), e.g. one position or a slice."""
        return History(self.prompt[:, index], self.output[:, index], self.grammar, (),
                       None if self.allowed is None else self.allowed[:, index])


def history_of(sampling: Sampling, prompts: list, model, generated: list | None = None) -> History | None:
    """``History.of`` the ``prompts`` for ``model`` (its vocabulary and device) with ``sampling``'s grammar, where
    ``sampling`` needs the tokens before a position; else None."""
    if not sampling.uses_history:
        return None
    return History.of(prompts, model.vocab_size, model.device, generated, sampling.grammar)


def processed_logits(logits: torch.Tensor, sampling: Sampling, history: History | None = None) -> torch.Tensor:
    """``logits: [..., V]`` after the logit bias, the penalties and the grammar (docs/theory.md §14); ``history``'s
    counts and mask broadcast against them. The same tensor when none is set."""
    if sampling.logit_bias:
        sampling.check_vocabulary(logits.shape[-1])
        tokens, values = zip(*sampling.logit_bias)
        bias = torch.zeros(logits.shape[-1], dtype=logits.dtype).index_add_(
            0, torch.tensor(tokens), torch.tensor(values, dtype=logits.dtype))
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
        logits = logits - sampling.frequency_penalty * counts - sampling.presence_penalty * (counts > 0).to(logits.dtype)
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
            return tokens[:i + 1] + (token,) * (horizon - i - 1)
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


def adjusted_probs(logits: torch.Tensor, sampling: Sampling, *, validate: bool = True,
                   history: History | None = None) -> torch.Tensor:
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
    return probs


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
        raise ValueError(f"{'the ' + culprit + chr(39) + 's ' if culprit else ''}logits must not contain NaN and each "
                         f"row needs a finite entry")
