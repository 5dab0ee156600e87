"""Result values of every decoder run: the tokens and their statistics (docs/theory.md §7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

__all__ = ["DecodeStats", "Generation", "ResultRow", "by_temperature"]


@dataclass(frozen=True, kw_only=True)
class DecodeStats:  # built by keyword: eight fields, most of them tuples
    """Statistics of one run.

    ``target_calls``, ``draft_calls``: each model's forward passes after the prefill (a chain's draft makes gamma
    per iteration, a tree's depth + 1).
    ``accepted_per_iteration``: per iteration, the accepted draft tokens of each row still generating
    (rows that had finished are left out); tokens per iteration add the correction/bonus token.
    ``proposed_per_iteration``: the same for the draft tokens proposed (gamma, or fewer for a draft that
    proposes fewer, like copy); empty for decoders without a draft.
    ``betas``: beta = sum min(p, q) at every verified draft position, whose mean estimates alpha.
    ``seconds``: wall time per phase (prefill, draft, verify, accept, correct, or decode), each measured
    between CUDA synchronisations when ``profile`` was on, with ``model``, the seconds inside the models'
    calls (over ``total``: the efficiency, ``decoders.bench.profile.efficiency``); ``total`` always.
    """

    iterations: int
    target_calls: int
    draft_calls: int
    accepted_per_iteration: tuple
    betas: tuple
    seconds: dict
    proposed_per_iteration: tuple = ()
    accepted_ranks: tuple = ()  # tree decoding: per iteration and row, the child ranks along the accepted path

    @property
    def mean_accepted_tokens_per_iteration(self) -> float:
        """Mean accepted draft tokens per iteration and row, without the correction/bonus token."""
        counts = [n for row in self.accepted_per_iteration for n in row]
        return sum(counts) / len(counts) if counts else 0.0

    @property
    def mean_tokens_per_iteration(self) -> float:
        """Mean tokens emitted per iteration and row, with the correction/bonus token."""
        counts = [n for row in self.accepted_per_iteration for n in row]
        return 1 + self.mean_accepted_tokens_per_iteration if counts else 0.0

    @property
    def alpha_estimate(self) -> float | None:
        """Mean beta over the verified positions (Leviathan et al.'s alpha estimate); None if none."""
        return sum(self.betas) / len(self.betas) if self.betas else None

    def as_dict(self) -> dict:
        return dict(
            asdict(self),
            mean_accepted_tokens_per_iteration=self.mean_accepted_tokens_per_iteration,
            mean_tokens_per_iteration=self.mean_tokens_per_iteration,
            alpha_estimate=self.alpha_estimate,
        )


@dataclass(frozen=True)
class Generation:
    """The new tokens of each row (prompt excluded, up to and including end-of-sequence) and the stats."""

    tokens: tuple
    stats: DecodeStats

    def as_dict(self) -> dict:
        return {"tokens": [list(row) for row in self.tokens], "stats": self.stats.as_dict()}


class ResultRow:
    """The base of a measurement's typed rows (``decoders.bench.rows``, ``decoders.engine_results.EngineBenchRow``): a
    frozen keyword-only dataclass becomes its document's dict only at the JSON edge (``as_dict``; the fields named in
    ``OPTIONAL`` are left out where None, as documents written before them never held them) and is read back from one
    (``from_dict``: a committed file's keys; a missing key with a default takes it, an unknown one is a TypeError)."""

    OPTIONAL: ClassVar[tuple] = ()

    def as_dict(self) -> dict:
        row = {field.name: getattr(self, field.name) for field in fields(self)}
        return {key: value for key, value in row.items() if key not in self.OPTIONAL or value is not None}

    @classmethod
    def from_dict(cls, row: dict):
        return cls(**row)


def by_temperature(mapping: dict) -> dict:
    """An object keyed by temperature as {float: value}: a saved document's string keys, or a document's own."""
    return {float(key): value for key, value in mapping.items()}
