"""Speculative decoding with a draft of another tokenizer (docs/theory-vocabularies.md §15; Timor et al., ICML 2025):
the draft proposes in its own vocabulary, a cross-vocabulary method turns the proposal into target tokens and verifies
them, and the target's law over its own tokens is kept exactly (the exact audits of
tests/decoders/audit/test_cross_vocabulary.py prove it by enumeration).

* ``slem``, string-level exact match: the draft's text re-tokenized by the target (its last candidate held back
  where a longer target piece begins with it), each candidate accepted while the target's own draw equals it; every
  emitted token is a target draw.
* ``tli``, token-level intersection: the draft's logits restricted to the pieces both vocabularies hold (so its law is
  renormalised there), the drafted pieces read as target tokens of the same string, then token verification and the
  residual over the target's whole vocabulary (``decoders.verification``).
* ``slrs``, string-level rejection sampling, per character: the laws of the next character, each model's summed over
  its tokenizations, verified like tokens (accept min(1, P/Q), residual max(0, P - Q)); the accepted string then
  gets target tokens drawn from the target's law given that string, the last of them possibly running past it (a
  target token split across two iterations). Exponential in the tokenizations of a string: for small vocabularies.

Committed tokens are the target's draws, never the re-tokenized text. The draft follows the committed text: after
each iteration it keeps its tokens up to the last one whose string is still a prefix of the text (rollback by string
position), tokenizes the rest, and each model's state is cut back to the longest common prefix of what it holds and
what it needs (rollback by token). Rows run one at a time through the one loop (``decoders._loop.decode``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from decoders._loop import begin, decode
from decoders.models.protocol import prefill_call
from decoders.randomness import Randomness
from decoders.results import DecodeStats
from decoders.sampling import Sampling, adjusted_probs, draw
from decoders.verification import accept_tokens, draft_ratio, next_token_law
from decoders.vocabulary import Vocabulary, shared_pieces
from plumbing.validation import as_int
from spectheory.vocabularies import METHODS

__all__ = [
    "METHODS",
    "CrossVocabularyConfig",
    "CrossVocabularyStep",
    "REFERENCE_CROSS_STEP",
    "generate_cross_vocabulary",
]

MAX_GAMMA = 64
SLRS_MAX_PIECES = 1024  # its laws over strings loop over the pieces in Python, once per tokenization prefix


@dataclass(frozen=True)
class CrossVocabularyConfig:
    """``method`` of ``METHODS``; ``gamma`` draft tokens per iteration (``slrs``: characters); ``sampling`` of both
    models (a law that depends on the tokens before a position, penalties, grammars or Mirostat, is refused: its
    history would be in two vocabularies)."""

    method: str
    gamma: int
    sampling: Sampling

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        as_int("gamma", self.gamma, low=1, high=MAX_GAMMA)
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must be a decoders.sampling.Sampling, got {type(self.sampling).__name__}")
        if self.sampling.uses_history:
            raise ValueError(
                "cross-vocabulary decoding takes no penalty, grammar or Mirostat: their history is in one vocabulary"
            )


@dataclass(frozen=True)
class Vocabularies:
    """The target's and the draft's vocabularies, with what every iteration reads of them computed once: the draft's
    shared pieces (draft id -> target id) and the alphabet of both."""

    target: Vocabulary
    draft: Vocabulary

    @cached_property
    def shared(self) -> dict:
        return shared_pieces(self.draft, self.target)

    @cached_property
    def alphabet(self) -> list:
        return sorted(self.target.characters | self.draft.characters)


@dataclass
class _Held:
    """A model's state and the tokens it holds."""

    state: object
    tokens: list

    def hold(self, model, wanted: list) -> None:
        """Cut back to the longest common prefix with ``wanted`` (rollback by token), then append the rest of it."""
        common = next(
            (i for i, (a, b) in enumerate(zip(self.tokens, wanted)) if a != b), min(len(self.tokens), len(wanted))
        )
        if common < len(self.tokens):
            model.truncate(self.state, torch.tensor([common], device=model.device))
        if len(wanted) > common:
            prefill_call(model)(torch.tensor([wanted[common:]], device=model.device), self.state)
        self.tokens = list(wanted)

    def logits_of(self, model, tokens: list, last: int = 1) -> torch.Tensor:
        """Logits ``[1, last, V]`` after each of the ``last`` tokens of ``tokens``, which the state then holds."""
        self.hold(model, tokens[:-last])
        logits = model.forward(torch.tensor([tokens[-last:]], device=model.device), self.state)
        self.tokens = list(tokens)
        return logits


def window(tokens: list, model, gamma: int) -> list:
    """The draft's context: the tail of ``tokens`` that leaves room for ``gamma`` more in its context (all of them
    where it has none), its start moved in jumps of half the room, so that its state is refilled only at a jump."""
    if model.max_context is None or len(tokens) + gamma <= model.max_context:
        return tokens
    room = model.max_context - gamma
    jump = max(room // 2, 1)
    start = -(-(len(tokens) - room) // jump) * jump  # the least multiple of jump that fits
    return tokens[start:]


@dataclass
class _Row:
    """One prompt's decoding: the target's committed tokens (prompt included) and the draft's tokens of their text."""

    committed: list
    drafted: list
    target: _Held
    draft: _Held


@dataclass(frozen=True)
class _Outcome:
    emitted: list  # target tokens
    accepted: int  # candidates accepted (slrs: characters)
    proposed: int  # candidates verified (slrs: characters)
    draft_tokens: list  # what the draft drew this iteration, in its vocabulary
    draft_calls: int


class CrossVocabularyStep:
    """One iteration of each method on one row; the mutants (``decoders.audit.cross_vocabulary_mutants``) override
    one phase each."""

    def __call__(
        self, target, draft, vocabularies: Vocabularies, row: _Row, config, randomness: Randomness
    ) -> _Outcome:
        return getattr(self, config.method)(target, draft, vocabularies, row, config, randomness)

    # --- string-level exact match -------------------------------------------------------------------------------
    def slem(self, target, draft, vocabularies, row, config, randomness) -> _Outcome:
        drafted, calls = self.draft_tokens(draft, row, config, randomness)
        candidates = self.candidates(vocabularies.target, vocabularies.draft.decode(drafted))
        logits = row.target.logits_of(target, row.committed + candidates, len(candidates) + 1)  # [1, k + 1, Vt]
        probs = adjusted_probs(logits, config.sampling)
        emitted = []
        for i in range(len(candidates) + 1):  # the target's draw at each position, up to the first mismatch
            emitted.append(int(draw(probs[:, i], config.sampling, randomness)))
            if i == len(candidates) or emitted[-1] != candidates[i]:
                break
        return _Outcome(emitted, len(emitted) - 1, len(candidates), drafted, calls)

    def draft_tokens(self, draft, row, config, randomness) -> tuple:
        """``gamma`` tokens drawn from the draft's law after its tokens (its own vocabulary) and the calls made."""
        context = window(row.drafted, draft, config.gamma)
        drafted, logits = [], row.draft.logits_of(draft, context)[:, -1]
        for i in range(config.gamma):
            drafted.append(int(draw(adjusted_probs(logits, config.sampling), config.sampling, randomness)))
            if i < config.gamma - 1:
                logits = row.draft.logits_of(draft, context + drafted)[:, -1]
        return drafted, config.gamma

    @staticmethod
    def candidates(target_vocabulary: Vocabulary, text: str) -> list:
        """The target's tokens of the drafted text, the last held back where a longer target piece begins with its
        string (more drafted text could merge it; docs/theory-vocabularies.md §15)."""
        candidates = list(target_vocabulary.encode(text))
        if candidates and target_vocabulary.extends(target_vocabulary.pieces[candidates[-1]]):
            candidates.pop()
        return candidates

    # --- token-level intersection ------------------------------------------------------------------------------
    def tli(self, target, draft, vocabularies, row, config, randomness) -> _Outcome:
        shared = vocabularies.shared
        context = window(row.drafted, draft, config.gamma)
        logits = row.draft.logits_of(draft, context)[:, -1]  # [1, Vd]
        drafted, laws, calls = [], [], 1
        for i in range(config.gamma):
            q = self.intersection_law(logits, shared, config.sampling)  # [1, Vd], None: nothing shared to propose
            if q is None:
                break
            drafted.append(int(draw(q, config.sampling, randomness)))
            laws.append(self.in_target_vocabulary(q, shared, logits, vocabularies.target.size, config.sampling))
            if i < config.gamma - 1:
                logits = row.draft.logits_of(draft, context + drafted)[:, -1]
                calls += 1
        candidates = [self.target_id(x, shared) for x in drafted]
        logits = row.target.logits_of(target, row.committed + candidates, len(candidates) + 1)  # [1, k + 1, Vt]
        p = adjusted_probs(logits, config.sampling)
        if not candidates:
            return _Outcome([int(draw(p[:, 0], config.sampling, randomness))], 0, 0, drafted, calls)
        q = torch.stack(laws, dim=1)  # [1, k, Vt]
        tokens = torch.tensor([candidates], device=p.device)
        proposed = torch.ones_like(tokens, dtype=torch.bool)
        accepted = accept_tokens(draft_ratio(p, q, tokens, proposed), proposed, 1.0, config.gamma, randomness)
        law = self.residual(p, q, accepted, proposed, shared)
        n = int(accepted[0])
        return _Outcome(
            candidates[:n] + [int(draw(law, config.sampling, randomness))], n, len(candidates), drafted, calls
        )

    @staticmethod
    def intersection_law(logits: torch.Tensor, shared: dict, sampling: Sampling) -> torch.Tensor | None:
        """The draft's law over its shared pieces: its logits elsewhere set to -inf, then adjusted (at T = 1 the law
        restricted and renormalised). ``logits: [1, Vd]`` -> ``[1, Vd]``; None where no shared piece is finite."""
        mask = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        mask[list(shared)] = True
        restricted = logits.masked_fill(~mask, float("-inf"))
        return None if bool(torch.isneginf(restricted).all()) else adjusted_probs(restricted, sampling)

    @staticmethod
    def in_target_vocabulary(q, shared: dict, logits, target_size: int, sampling: Sampling) -> torch.Tensor:
        """``q: [1, Vd]`` on the draft's shared pieces -> the same law over the target's ids ``[1, Vt]``."""
        law = torch.zeros(q.shape[:-1] + (target_size,), dtype=q.dtype, device=q.device)
        law[:, list(shared.values())] = q[:, list(shared)]
        return law

    @staticmethod
    def target_id(draft_token: int, shared: dict) -> int:
        """The target's token of the draft token's string."""
        return shared[draft_token]

    @staticmethod
    def residual(p, q, accepted, proposed, shared: dict) -> torch.Tensor:
        """The next token's law (unnormalised) over the target's whole vocabulary: ``next_token_law``."""
        return next_token_law(p, q, accepted, proposed)

    # --- string-level rejection sampling, per character --------------------------------------------------------
    def slrs(self, target, draft, vocabularies, row, config, randomness) -> _Outcome:
        draft_vocabulary, alphabet = vocabularies.draft, vocabularies.alphabet
        target_strings = StringLaw(target, vocabularies.target, row.committed, config.sampling)
        draft_strings = StringLaw(draft, draft_vocabulary, window(row.drafted, draft, config.gamma), config.sampling)
        drafted, text = [], ""
        while len(text) < config.gamma:  # the draft's tokens until its text covers gamma characters
            law = draft_strings.next_law(tuple(drafted))
            drafted.append(int(draw(law[None], config.sampling, randomness)))
            text += draft_vocabulary.pieces[drafted[-1]]
        accepted = ""
        for c in text[: config.gamma]:
            p = self.character_law(target_strings, accepted, alphabet)  # [A]
            q = draft_strings.character_law(accepted, alphabet)
            i = alphabet.index(c)
            if bool(randomness.bernoulli((p[i] / q[i]).clamp(max=1.0).reshape(1))[0]):
                accepted += c
                continue
            return self._covered(target_strings, accepted, torch.clamp(p - q, min=0.0), alphabet, randomness, drafted)
        p = self.character_law(target_strings, accepted, alphabet)
        return self._covered(target_strings, accepted, p, alphabet, randomness, drafted)

    def character_law(self, strings: "StringLaw", prefix: str, alphabet: list) -> torch.Tensor:
        """The target's law of the character after ``prefix`` (the accepted string), over every tokenization."""
        return strings.character_law(prefix, alphabet)

    def _covered(self, strings, accepted: str, law, alphabet, randomness, drafted) -> _Outcome:
        """The last character drawn from ``law`` (residual or bonus), then target tokens drawn from the target's law
        given the string."""
        text = accepted + alphabet[int(randomness.categorical(law[None])[0])]
        return _Outcome(self.cover(strings, text, randomness), len(accepted), len(text) - 1, drafted, len(drafted))

    def cover(self, strings: "StringLaw", text: str, randomness: Randomness) -> list:
        """Target tokens drawn from the target's law given that its text begins with ``text``."""
        return strings.cover(text, randomness)

    # --- after each iteration ----------------------------------------------------------------------------------
    def commit(self, target_vocabulary: Vocabulary, committed: list, emitted: list) -> list:
        """The target's tokens after an iteration: its draws, as drawn (never the text re-tokenized)."""
        return committed + emitted


class StringLaw:
    """A model's laws over strings after ``context`` (its tokens): the probability that its text continues with a
    string, summed over every tokenization, each law from a fresh forward pass over the whole context (memoised)."""

    def __init__(self, model, vocabulary: Vocabulary, context: list, sampling: Sampling) -> None:
        self.model, self.vocabulary, self.context, self.sampling, self._laws = model, vocabulary, context, sampling, {}

    def next_law(self, tokens: tuple) -> torch.Tensor:
        """The adjusted law ``[V]`` of the token after context + ``tokens``."""
        if tokens not in self._laws:
            sequence = torch.tensor([self.context + list(tokens)], device=self.model.device)
            logits = self.model.forward(sequence, self.model.new_state(1, sequence.shape[1]))[:, -1]
            self._laws[tokens] = adjusted_probs(logits.to(torch.float64), self.sampling)[0]
        return self._laws[tokens]

    def prefix_probability(self, text: str, tokens: tuple = ()) -> torch.Tensor:
        """P(the text after context + ``tokens`` begins with ``text``)."""
        if not text:
            return torch.ones((), dtype=torch.float64)
        law, total = self.next_law(tokens), torch.zeros((), dtype=torch.float64)
        for token, piece in enumerate(self.vocabulary.pieces):
            if law[token] == 0:
                continue
            if piece.startswith(text):
                total = total + law[token]
            elif text.startswith(piece):
                total = total + law[token] * self.prefix_probability(text[len(piece) :], tokens + (token,))
        return total

    def character_law(self, prefix: str, alphabet: list) -> torch.Tensor:
        """P(next character | the text begins with ``prefix``) over ``alphabet`` ``[A]``."""
        joint = torch.stack([self.prefix_probability(prefix + c) for c in alphabet])
        return joint / self.prefix_probability(prefix)

    def cover(self, text: str, randomness: Randomness) -> list:
        """Tokens drawn from the law given that the text begins with ``text``: each token weighted by its probability
        times that of the rest of ``text`` after it; the last may run past ``text``."""
        tokens = ()
        while text:
            law, weights = self.next_law(tokens), torch.zeros(self.vocabulary.size, dtype=torch.float64)
            for token, piece in enumerate(self.vocabulary.pieces):
                if piece.startswith(text):
                    weights[token] = law[token]
                elif text.startswith(piece):
                    weights[token] = law[token] * self.prefix_probability(text[len(piece) :], tokens + (token,))
            token = int(randomness.categorical(weights[None])[0])
            piece, tokens = self.vocabulary.pieces[token], tokens + (token,)
            text = text[len(piece) :] if text.startswith(piece) else ""
        return list(tokens)


REFERENCE_CROSS_STEP = CrossVocabularyStep()


def follow_text(vocabulary: Vocabulary, tokens: list, text: str) -> list:
    """The draft's tokens of ``text``: ``tokens`` up to the last whose string is still a prefix of ``text`` (rollback
    by string position), then the rest of ``text`` tokenized."""
    at, kept = 0, 0
    for token in tokens:
        piece = vocabulary.pieces[token]
        if not text.startswith(piece, at):
            break
        at, kept = at + len(piece), kept + 1
    return list(tokens[:kept]) + list(vocabulary.encode(text[at:]))


def _check(target, draft, target_vocabulary: Vocabulary, draft_vocabulary: Vocabulary, method: str) -> None:
    for name, model, vocabulary in (("target", target, target_vocabulary), ("draft", draft, draft_vocabulary)):
        if model.vocab_size != vocabulary.size:
            raise ValueError(
                f"the {name}'s vocabulary holds {vocabulary.size} pieces but the {name} model {model.vocab_size} tokens"
            )
    if not draft_vocabulary.spells(target_vocabulary.characters):
        missing = sorted(target_vocabulary.characters - set(draft_vocabulary.pieces))
        raise ValueError(f"the draft's vocabulary cannot spell the target's characters {missing!r}")
    largest = max(target_vocabulary.size, draft_vocabulary.size)
    if method == "slrs" and largest > SLRS_MAX_PIECES:
        raise ValueError(
            f"slrs sums over every tokenization of a string: vocabularies of at most {SLRS_MAX_PIECES} pieces, got "
            f"{largest}; use slem or tli"
        )


@torch.inference_mode()
def generate_cross_vocabulary(
    target,
    draft,
    prompts,
    *,
    target_vocabulary: Vocabulary,
    draft_vocabulary: Vocabulary,
    max_new_tokens: int,
    config: CrossVocabularyConfig,
    randomness: Randomness,
    eos: int | None = None,
    step: CrossVocabularyStep = REFERENCE_CROSS_STEP,
):
    """Up to ``max_new_tokens`` target tokens per prompt (target token ids), each row verified by ``config.method``
    against a draft of another vocabulary; a ``decoders.results.Generation`` whose stats count candidates (``slrs``:
    characters) as proposed and accepted."""
    _check(target, draft, target_vocabulary, draft_vocabulary, config.method)
    vocabularies, room = Vocabularies(target_vocabulary, draft_vocabulary), max_new_tokens + config.gamma + 1
    run = begin(
        (target,),
        prompts,
        max_new_tokens=max_new_tokens,
        room=room,
        needed="max_new_tokens + gamma + 1",
        sampling=config.sampling,
        eos=eos,
        profile=False,
    )
    rows = []
    for prompt in run.prompts:
        drafted = list(draft_vocabulary.encode(target_vocabulary.decode(prompt)))
        # each state sized for what it will hold (a model's whole context would be allocated otherwise): the target
        # its prompt and room; the draft at most its text spelled a character a token, within its window
        draft_room = len(drafted) + room * target_vocabulary.longest
        if draft.max_context is not None:
            draft_room = min(draft_room, draft.max_context)
        held = _Held(target.new_state(1, len(prompt) + room), []), _Held(draft.new_state(1, draft_room), [])
        rows.append(_Row(list(prompt), drafted, *held))
    accepted, proposed, calls = [], [], {"target": 0, "draft": 0}

    def iterate(active: list) -> list:
        emitted = [[] for _ in rows]
        outcomes = []
        for b in active:
            row = rows[b]
            outcome = step(target, draft, vocabularies, row, config, randomness)
            emitted[b], row.committed = outcome.emitted, step.commit(target_vocabulary, row.committed, outcome.emitted)
            row.drafted = follow_text(
                draft_vocabulary, row.drafted + outcome.draft_tokens, target_vocabulary.decode(row.committed)
            )
            calls["target"], calls["draft"] = calls["target"] + 1, calls["draft"] + outcome.draft_calls
            outcomes.append(outcome)
        accepted.append(tuple(o.accepted for o in outcomes))
        proposed.append(tuple(o.proposed for o in outcomes))
        return emitted

    decode(run.output, iterate)
    stats = DecodeStats(
        iterations=len(accepted),
        target_calls=calls["target"],
        draft_calls=calls["draft"],
        accepted_per_iteration=tuple(accepted),
        proposed_per_iteration=tuple(proposed),
        betas=(),
        seconds=run.timer.finish(),
    )
    return run.generation(stats)
