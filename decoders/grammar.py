"""Grammar-constrained decoding through xgrammar (docs/theory-sampling.md §14): a regex, a JSON schema or an EBNF
grammar, compiled for a vocabulary, allows at each position the tokens that keep the output a prefix of its language;
once the output is complete, only the stop tokens. Forbidden tokens get logit -inf (``processed_logits``).

``Grammar.allowed(outputs)`` is the mask after a row's output tokens. One matcher walks from the last prefix
asked to the next by rolling back to their common part (xgrammar's ``rollback``), so the masks along a path
cost one step each; the latest masks are kept, packed (4 bytes per 32 tokens). After a token the grammar
rejects (which only a wrong decoder emits) nothing is forbidden: the law is already zero there.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from decoders.models.corpus import OTHER, VOCAB_SIZE, VOCABULARY

__all__ = ["GrammarSpec", "Grammar", "KINDS", "token_texts"]

KINDS = ("regex", "json-schema", "ebnf")
CACHED_MASKS = 4096  # SmolLM2's vocabulary: 6 KiB a mask, 24 MiB in all
AUDIT_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def token_texts(vocab_size: int) -> list:
    """The texts of a vocabulary without a tokenizer: the corpus's characters for the shipped pair's vocabulary,
    letters ("a" for id 0, "b" for id 1, ...) for the exact audit's vocabularies of at most 26 tokens."""

    if vocab_size == VOCAB_SIZE:
        return list(VOCABULARY) + ["\ufffd"] * (VOCAB_SIZE - OTHER)
    if vocab_size <= len(AUDIT_LETTERS):
        return list(AUDIT_LETTERS[:vocab_size])
    raise ValueError(
        f"a grammar needs the texts of the tokens: a tokenizer, or a vocabulary of at most "
        f"{len(AUDIT_LETTERS)} tokens (letters) or of the shipped pair's {VOCAB_SIZE}, got {vocab_size}"
    )


def _import_xgrammar():
    try:
        import xgrammar
    except ImportError as error:
        raise ValueError("grammars need xgrammar (pip install xgrammar; .ci/install installs it)") from error
    return xgrammar


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar before it meets a vocabulary: ``kind`` (one of ``KINDS``) and its ``source`` text."""

    kind: str
    source: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"grammar kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"the {self.kind} must be a non-empty string, got {self.source!r}")

    def __str__(self) -> str:
        """E.g. "regex '(ab)+'", long sources cut to their first 40 characters on one line."""
        shown = " ".join(self.source.split())
        return f"{self.kind} {shown if len(shown) <= 40 else shown[:37] + '...'!r}"

    @property
    def flag(self) -> str:
        """The CLI flag that gives it."""
        return "--grammar" if self.kind == "ebnf" else f"--{self.kind}"

    def compiled(self, vocabulary, vocab_size: int, stop) -> "Grammar":
        """This grammar for ``vocabulary`` (a transformers tokenizer, or None: ``token_texts``)."""
        return Grammar(
            self.kind, self.source, token_texts(vocab_size) if vocabulary is None else vocabulary, vocab_size, stop
        )


class Grammar:
    """``kind`` (one of ``KINDS``) ``source`` compiled for ``vocabulary`` (a transformers tokenizer, or the texts of
    the token ids in order) of ``vocab_size`` tokens, ending with one of ``stop`` (token ids, at least one)."""

    def __init__(self, kind: str, source: str, vocabulary, vocab_size: int, stop) -> None:
        self.spec, self.stop = GrammarSpec(kind, source), tuple(stop)
        if not self.stop:
            raise ValueError(f"a {kind} grammar needs a stop token (--stop) to end a complete output")
        xgrammar = _import_xgrammar()
        if isinstance(vocabulary, (list, tuple)):
            info = xgrammar.TokenizerInfo(list(vocabulary), vocab_size=vocab_size, stop_token_ids=list(self.stop))
        else:
            info = xgrammar.TokenizerInfo.from_huggingface(
                vocabulary, vocab_size=vocab_size, stop_token_ids=list(self.stop)
            )
        compiler = xgrammar.GrammarCompiler(info, max_threads=1)
        compile_kind = {
            "regex": compiler.compile_regex,
            "json-schema": compiler.compile_json_schema,
            "ebnf": compiler.compile_grammar,
        }[kind]
        try:
            compiled = compile_kind(source)
        except (RuntimeError, ValueError) as error:  # xgrammar's message after its time stamp and source line
            message = re.sub(r"^.*?[.]cc:[0-9]+: ", "", str(error).splitlines()[0])
            raise ValueError(f"the {kind} does not compile: {message}") from None
        self.kind, self.source, self.flag, self.vocab_size = kind, source, self.spec.flag, vocab_size
        self._matcher = xgrammar.GrammarMatcher(compiled)
        self._bitmask = xgrammar.allocate_token_bitmask(1, vocab_size)  # [1, ceil(V / 32)] int32
        self._at: tuple = ()  # the tokens the matcher has accepted
        self._masks: OrderedDict = OrderedDict()  # outputs -> packed mask, most recent last
        stops = torch.zeros(vocab_size, dtype=torch.bool)
        stops[list(self.stop)] = True
        self._stops = stops

    def __str__(self) -> str:
        return str(self.spec)

    def __repr__(self) -> str:
        return f"Grammar({self.spec})"

    def allowed(self, outputs: tuple) -> torch.Tensor:
        """The tokens allowed after the output tokens ``outputs`` -> ``[V]`` bool (on the CPU)."""
        packed = self._masks.get(outputs)
        if packed is not None:
            self._masks.move_to_end(outputs)
            return _unpacked(packed, self.vocab_size)
        packed = self._walk(outputs)
        allowed = _unpacked(packed, self.vocab_size)
        if not bool(allowed.any()):
            raise ValueError(
                f"the {self.kind} allows no token after the output {list(outputs)}: a dead end of this "
                f"vocabulary (the next characters it needs are in no token)"
            )
        self._masks[outputs] = packed
        if len(self._masks) > CACHED_MASKS:
            self._masks.popitem(last=False)
        return allowed

    def masks(self, rows: list) -> torch.Tensor:
        """``allowed`` of each of ``rows`` (token tuples) -> ``[len(rows), V]`` bool."""
        return torch.stack([self.allowed(tuple(row)) for row in rows])

    def _walk(self, outputs: tuple) -> torch.Tensor:
        """Moves the matcher to ``outputs``; the packed mask there (a bool mask when it is not packed: stop
        tokens only after a complete output, everything after a rejected token)."""
        common = 0
        while common < min(len(self._at), len(outputs)) and self._at[common] == outputs[common]:
            common += 1
        if len(self._at) > common:
            self._matcher.rollback(len(self._at) - common)
            self._at = self._at[:common]
        for token in outputs[common:]:
            if self._matcher.is_terminated():
                return self._stops
            if not self._matcher.accept_token(int(token)):
                return torch.ones(self.vocab_size, dtype=torch.bool)
            self._at += (int(token),)
        if self._matcher.is_terminated():
            return self._stops
        self._matcher.fill_next_token_bitmask(self._bitmask)
        return self._bitmask[0].clone()


def _unpacked(packed: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """xgrammar's bitmask ``[ceil(V / 32)]`` int32 (bit j of word i: token 32 i + j) -> ``[V]`` bool; a bool mask
    as it is."""
    if packed.dtype == torch.bool:
        return packed
    little = packed.numpy().astype("<i4", copy=False).view(np.uint8)  # byte 4 i + k holds tokens 32 i + 8 k ..
    return torch.from_numpy(np.unpackbits(little, bitorder="little")[:vocab_size].astype(bool))
