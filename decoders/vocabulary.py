"""A tokenizer as the cross-vocabulary decoders see it (docs/theory-vocabularies.md §15): a token id is a string
piece; text is tokenized canonically by ordered merges (BPE) or by the longest piece, and every tokenization of a
string can be listed (string-level verification sums over them). Small enough to write by hand for exact audits;
a real tokenizer's pieces fit the same interface."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

__all__ = ["Vocabulary", "shared_pieces"]


@dataclass(frozen=True)
class Vocabulary:
    """``pieces[i]`` is token i's string (distinct, non-empty); every character of a text must be a piece.
    ``merges``: BPE's ordered merges ((left, right), ...), applied to the characters of a text, the lowest rank
    first; without merges the canonical tokenization takes the longest piece at each position."""

    pieces: tuple
    merges: tuple = ()

    def __post_init__(self) -> None:
        if not self.pieces or any(not isinstance(piece, str) or not piece for piece in self.pieces):
            raise ValueError(f"pieces must be non-empty strings, got {self.pieces!r}")
        if len(set(self.pieces)) != len(self.pieces):
            raise ValueError(f"pieces must be distinct, got {self.pieces!r}")
        for left, right in self.merges:
            if left + right not in self.ids:
                raise ValueError(f"merge ({left!r}, {right!r}) makes {left + right!r}, which is not a piece")

    @cached_property
    def ids(self) -> dict:
        return {piece: i for i, piece in enumerate(self.pieces)}

    @property
    def size(self) -> int:
        return len(self.pieces)

    def decode(self, tokens) -> str:
        return "".join(self.pieces[int(token)] for token in tokens)

    def encode(self, text: str) -> tuple:
        """The canonical tokenization of ``text``."""
        missing = sorted(set(text) - set(self.ids))
        if missing:
            raise ValueError(f"text holds characters that are not pieces of this vocabulary: {missing!r}")
        return tuple(self.ids[piece] for piece in (self._merged(text) if self.merges else self._longest(text)))

    def _merged(self, text: str) -> list:
        parts, rank = list(text), {pair: r for r, pair in enumerate(self.merges)}
        while len(parts) > 1:
            pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best, i = min(pairs)
            if best == len(rank):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def _longest(self, text: str) -> list:
        parts, at, longest = [], 0, max(map(len, self.pieces))
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
