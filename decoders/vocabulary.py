"""A tokenizer as the cross-vocabulary decoders see it (docs/theory-vocabularies.md §15): a token id is a string
piece; text is tokenized canonically by ordered merges (BPE) or by the longest piece, and every tokenization of a
string can be listed (string-level verification sums over them). Small enough to write by hand for exact audits;
a real tokenizer's pieces fit the same interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from decoders.models.corpus import VOCABULARY

__all__ = ["Vocabulary", "TokenizerVocabulary", "shared_pieces", "vocabulary_of"]


@dataclass(frozen=True)
class Vocabulary:
    """``pieces[i]`` is token i's string (distinct, non-empty); every character of a text must be a piece.
    ``merges``: BPE's ordered merges ((left, right), ...), applied to the characters of a text, the lowest rank
    first; without merges the canonical tokenization takes the longest piece at each position. ``fallback``: the
    piece that reads every character with no piece of its own (a draft that cannot spell all of a target's text)."""

    pieces: tuple
    merges: tuple = ()
    fallback: str | None = None

    def __post_init__(self) -> None:
        if not self.pieces or any(not isinstance(piece, str) or not piece for piece in self.pieces):
            raise ValueError(f"pieces must be non-empty strings, got {self.pieces!r}")
        if len(set(self.pieces)) != len(self.pieces):
            raise ValueError(f"pieces must be distinct, got {self.pieces!r}")
        if self.fallback is not None and self.fallback not in self.ids:
            raise ValueError(f"fallback {self.fallback!r} is not a piece")
        for left, right in self.merges:
            if left + right not in self.ids:
                raise ValueError(f"merge ({left!r}, {right!r}) makes {left + right!r}, which is not a piece")

    @cached_property
    def ids(self) -> dict:
        return {piece: i for i, piece in enumerate(self.pieces)}

    @property
    def size(self) -> int:
        return len(self.pieces)

    @cached_property
    def characters(self) -> frozenset:
        """Every character of every piece."""
        return frozenset(c for piece in self.pieces for c in piece)

    @cached_property
    def longest(self) -> int:
        """The longest piece's length."""
        return max(map(len, self.pieces))

    @cached_property
    def _proper_prefixes(self) -> frozenset:
        return frozenset(piece[:n] for piece in self.pieces for n in range(1, len(piece)))

    def extends(self, piece: str) -> bool:
        """Whether a longer piece begins with ``piece``."""
        return piece in self._proper_prefixes

    def spells(self, characters) -> bool:
        """Whether every character has a piece (or the fallback reads it)."""
        return self.fallback is not None or set(characters) <= set(self.ids)

    def decode(self, tokens) -> str:
        return "".join(self.pieces[int(token)] for token in tokens)

    def encode(self, text: str) -> tuple:
        """The canonical tokenization of ``text``."""
        missing = sorted(set(text) - set(self.ids))
        if missing and self.fallback is not None:
            text = "".join(c if c in self.ids else self.fallback for c in text)
        elif missing:
            raise ValueError(f"text holds characters that are not pieces of this vocabulary: {missing!r}")
        return tuple(self.ids[piece] for piece in (self._merged(text) if self.merges else self._longest(text)))

    @cached_property
    def _ranks(self) -> dict:
        return {pair: rank for rank, pair in enumerate(self.merges)}

    def _merged(self, text: str) -> list:
        parts, rank = list(text), self._ranks
        while len(parts) > 1:
            pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best, i = min(pairs)
            if best == len(rank):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def _longest(self, text: str) -> list:
        parts, at, longest = [], 0, self.longest
        while at < len(text):
            piece = next(
                text[at : at + n] for n in range(min(longest, len(text) - at), 0, -1) if text[at : at + n] in self.ids
            )
            parts.append(piece)
            at += len(piece)
        return parts

    def tokenizations(self, text: str) -> list:
        """Every sequence of token ids whose string is ``text`` (exponential in its length: for tiny audits)."""
        if not text:
            return [()]
        return [
            (self.ids[text[:n]],) + rest
            for n in range(1, len(text) + 1)
            if text[:n] in self.ids
            for rest in self.tokenizations(text[n:])
        ]


def shared_pieces(draft: Vocabulary, target: Vocabulary) -> dict:
    """Draft token id -> the target's token id of the same string, for the pieces both vocabularies hold (token-level
    intersection's support)."""
    return {i: target.ids[piece] for i, piece in enumerate(draft.pieces) if piece in target.ids}


@dataclass(frozen=True)
class TokenizerVocabulary(Vocabulary):
    """A Hugging Face tokenizer's vocabulary: its pieces as the tokenizer writes them (byte-level BPE's characters,
    one per byte, so that every piece is a distinct string), tokenized canonically by the tokenizer itself."""

    tokenizer: object = field(default=None, compare=False, repr=False)

    def encode(self, text: str) -> tuple:
        return tuple(
            self.tokenizer.encode(self.tokenizer.convert_tokens_to_string(list(text)), add_special_tokens=False)
        )


def _byte_characters() -> dict:
    """Byte-level BPE's character of each byte (GPT-2's table): a printable Latin-1 byte is its own character, every
    other byte in order is 256, 257, ..."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


_BYTE_CHARACTERS = _byte_characters()


def _byte_level(text: str) -> str:
    """``text`` in byte-level BPE's characters: one character per UTF-8 byte."""
    return "".join(_BYTE_CHARACTERS[b] for b in text.encode("utf-8"))


def vocabulary_of(tokenizer, *, byte_level: bool = False) -> Vocabulary:
    """The vocabulary a cross-vocabulary decoder reads: a Hugging Face tokenizer's (``TokenizerVocabulary``), or, for
    None, the shipped corpus's characters (``decoders.models.corpus``; its "other" token reads every character it
    lacks), written in byte-level characters where ``byte_level`` (to meet a byte-level BPE target)."""
    if tokenizer is not None:
        pieces = tuple(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))
        return TokenizerVocabulary(pieces, tokenizer=tokenizer)

    spell = _byte_level if byte_level else (lambda c: c)
    other = spell("\x00")  # a character the corpus never holds: the "other" token's piece
    return Vocabulary(tuple(spell(c) for c in VOCABULARY) + (other,), fallback=other)
