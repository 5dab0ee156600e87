"""Models whose state is just the token history: n-gram, tabular, uniform (random) and copy drafts.

Each computes the next-token logits at a position from the tokens up to it, so "rolling back" after a
rejection is cutting the history. ``HistoryModel`` holds the shared bookkeeping; subclasses implement
``_logits(history, ends)``: logits ``[B, S, V]`` for the prefixes ``history[b, :ends[b, s]]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from decoders.models.base import PendingTree, append_history, check_shape, check_step, check_truncate, extend_tree
from plumbing.validation import as_int, as_positive_int

__all__ = [
    "HistoryState",
    "HistoryModel",
    "NGramModel",
    "SparseNGramModel",
    "TabularModel",
    "UniformModel",
    "CopyDraft",
]

MAX_ORDER = 3  # tokens of context of a table: V^order rows (a trigram table of V = 98 already holds 94M logits)


@dataclass
class HistoryState:
    """``tokens: [B, capacity]`` (valid up to ``lengths[b]``) and ``lengths: [B]``; a pending draft tree
    (``forward_tree``) keeps its nodes' tokens ``tree_tokens: [B, T]`` until ``commit_path``."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    tree: PendingTree | None = None
    tree_tokens: torch.Tensor | None = None

    def clone(self) -> "HistoryState":
        return HistoryState(
            self.tokens.clone(),
            self.lengths.clone(),
            self.tree,
            None if self.tree_tokens is None else self.tree_tokens.clone(),
        )

    def repeat(self, rows: int) -> "HistoryState":
        """A state of ``rows`` copies of this one-row state (a shared prompt, scored once)."""
        return HistoryState(self.tokens.repeat(rows, 1), self.lengths.repeat(rows))


class HistoryModel:
    """Bookkeeping shared by the history models; ``max_context`` is None (unbounded)."""

    max_context = None

    def __init__(self, vocab_size: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        as_positive_int("vocab_size", vocab_size)
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        self.dtype = dtype  # of the logits (float64 for the exact audits)

    def new_state(self, batch_size: int, capacity: int | None = None) -> HistoryState:
        """The history buffer starts at ``capacity`` tokens (default 64) and grows when needed."""
        return HistoryState(
            torch.zeros(batch_size, capacity or 64, dtype=torch.int64, device=self.device),
            torch.zeros(batch_size, dtype=torch.int64, device=self.device),
        )

    def forward(
        self, tokens: torch.Tensor, state: HistoryState, counts: torch.Tensor | None = None, keep: int = 0
    ) -> torch.Tensor:
        """Logits ``[B, S, V]`` of the new tokens (``keep`` > 0: of the last ``keep`` positions only)."""
        ends = self._append(tokens, state, counts) + 1  # [B, S], each new position sees the history through itself
        return self._logits(state.tokens, ends[:, -keep:] if keep else ends)

    __call__ = forward

    def append(self, tokens: torch.Tensor, state: HistoryState, counts: torch.Tensor | None = None) -> None:
        """``forward`` without the logits (a prefill): nothing is looked up."""
        self._append(tokens, state, counts)

    def _append(self, tokens: torch.Tensor, state: HistoryState, counts: torch.Tensor | None) -> torch.Tensor:
        """Writes ``tokens: [B, S]`` after each row's history; returns their positions ``[B, S]``."""
        counts = check_step(self, tokens, state, counts)
        self._check_tokens(tokens)
        state.tokens, positions = append_history(state.tokens, state.lengths, tokens)
        state.lengths = state.lengths + counts
        return positions

    def truncate(self, state: HistoryState, lengths: torch.Tensor) -> None:
        state.lengths = check_truncate(state, lengths)
        state.tree = state.tree_tokens = None

    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if bool(((tokens < 0) | (tokens >= self.vocab_size)).any()):
            raise ValueError(f"tokens must be in [0, {self.vocab_size})")

    def forward_tree(
        self,
        tokens: torch.Tensor,
        state: HistoryState,
        parents: torch.Tensor,
        positions: torch.Tensor | None = None,
        keep: int = 0,
    ) -> torch.Tensor:
        """Logits ``[B, n, V]`` of n new draft-tree nodes ``[B, n]`` whose ``parents: [B, n]`` index the pending
        nodes (-1: a root after the history): each node's logits are those of the history followed by its
        root-to-node path (``decoders.models.base``; ``keep`` > 0: of the last ``keep`` nodes only). A history has
        no positions: ``positions`` must be None."""
        check_shape(tokens, state)
        self._check_tokens(tokens)
        if positions is not None:
            raise ValueError(f"{type(self).__name__} has no positions to override")
        parents = torch.as_tensor(parents, dtype=torch.int64, device=self.device).expand(tokens.shape)
        tree = extend_tree(state.tree, parents)
        held = tokens if state.tree_tokens is None else torch.cat([state.tree_tokens, tokens], dim=1)  # [B, T]
        batch, new = tokens.shape
        nodes = range(tree.size - new, tree.size)
        width = int(state.lengths.max()) + tree.size
        history = state.tokens[:, :width]
        if history.shape[1] < width:
            history = torch.cat([history, history.new_zeros(batch, width - history.shape[1])], dim=1)
        paths = history[:, None, :].repeat(1, new, 1)  # [B, n, width]: each node's history, then its path
        slots = state.lengths[:, None, None] + tree.depths[:, None, :]  # [B, 1, T]: an ancestor's slot
        ancestors = tree.ancestors[:, nodes]  # [B, n, T]
        slots = torch.where(ancestors, slots, width)  # non-ancestors go to a spare column, dropped below
        paths = torch.cat([paths, paths.new_zeros(batch, new, 1)], dim=2)
        paths.scatter_(2, slots, held[:, None, :].expand(-1, new, -1))
        ends = state.lengths[:, None] + tree.depths[:, nodes] + 1  # [B, n]
        logits = self._logits(paths[..., :width].flatten(0, 1), ends.flatten()[:, None])  # [B n, 1, V]
        state.tree, state.tree_tokens = tree, held
        return logits.view(batch, new, -1)[:, -keep:] if keep else logits.view(batch, new, -1)

    def commit_path(self, state: HistoryState, path: torch.Tensor, counts: torch.Tensor) -> None:
        """Append each row's first ``counts[b]`` nodes of ``path: [B, M]`` to its history; drop the pending tree."""
        path = torch.as_tensor(path, device=self.device)
        kept = state.tree_tokens.gather(1, path)  # [B, M]
        state.tokens, _ = append_history(state.tokens, state.lengths, kept)
        state.lengths = state.lengths + torch.as_tensor(counts, device=self.device)
        state.tree = state.tree_tokens = None

    def _logits(self, history: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def _last_tokens(history: torch.Tensor, ends: torch.Tensor, n: int, pad: int = 0) -> torch.Tensor:
    """The ``n`` tokens before each end, left-padded with ``pad``: ``[B, S] -> [B, S, n]``."""
    if n == 0:
        return history.new_zeros(ends.shape + (0,))
    index = ends[..., None] - n + torch.arange(n, device=history.device)  # [B, S, n]
    gathered = torch.gather(history, 1, index.clamp(min=0).flatten(1)).view(index.shape)
    return torch.where(index >= 0, gathered, pad)


def _context_index(context: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Tokens ``[..., n]`` -> a row index into a table of V^n contexts (most recent token last)."""
    weights = vocab_size ** torch.arange(context.shape[-1] - 1, -1, -1, device=context.device)
    return (context * weights).sum(dim=-1)


class TabularModel(HistoryModel):
    """Next-token logits looked up by the last ``order`` tokens: ``table: [V^order, V]`` (tiny exact tests).

    Shorter prefixes are left-padded with token 0. ``TabularModel.random`` draws a table.
    """

    def __init__(self, table: torch.Tensor, order: int, device: torch.device | str = "cpu") -> None:
        as_int("order", order, low=0, high=MAX_ORDER)
        if not isinstance(table, torch.Tensor) or not table.is_floating_point() or table.ndim != 2:
            raise ValueError(
                f"table must be a 2-D floating-point tensor of logits, got "
                f"{getattr(table, 'dtype', type(table).__name__)} of shape {tuple(getattr(table, 'shape', ()))}"
            )
        if bool(torch.isnan(table).any()):  # infinite logits are limits: -inf rules a token out, +inf makes it certain
            raise ValueError("table must not contain NaN logits")
        vocab_size = table.shape[-1]
        if table.shape != (vocab_size**order, vocab_size):
            raise ValueError(
                f"table must have shape (V^order, V) = ({vocab_size**order}, {vocab_size}), got {tuple(table.shape)}"
            )
        super().__init__(vocab_size, device, table.dtype)
        self.order = order
        self.table = table.to(self.device)

    @classmethod
    def random(
        cls, generator: torch.Generator, vocab_size: int, order: int, *, sharpness: float = 2.0, dtype=torch.float64
    ) -> "TabularModel":
        """A table of Gaussian logits with standard deviation ``sharpness``."""
        table = sharpness * torch.randn(vocab_size**order, vocab_size, generator=generator, dtype=dtype)
        return cls(table, order)

    def _logits(self, history, ends):
        return self.table[_context_index(_last_tokens(history, ends, self.order), self.vocab_size)]


class NGramModel(TabularModel):
    """An n-gram model (order n - 1 tokens of context) with add-k smoothing, fitted on token sequences."""

    @classmethod
    def fit(cls, sequences, vocab_size: int, n: int, *, smoothing: float = 0.1) -> "NGramModel":
        """Counts of (n - 1 previous tokens, next token) over ``sequences`` (iterables of ints)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 3:
            raise ValueError(f"n must be 1 (unigram), 2 (bigram) or 3 (trigram), got {n!r}")
        if not smoothing > 0:
            raise ValueError(f"smoothing must be > 0, got {smoothing!r}")
        counts = torch.zeros(vocab_size ** (n - 1) * vocab_size, dtype=torch.float64)
        for sequence in sequences:
            tokens = torch.as_tensor(
                sequence if isinstance(sequence, (torch.Tensor, np.ndarray)) else list(sequence), dtype=torch.int64
            )
            if len(tokens) == 0:
                continue
            if bool(((tokens < 0) | (tokens >= vocab_size)).any()):
                raise ValueError(f"sequence tokens must be in [0, {vocab_size})")
            padded = torch.cat([torch.zeros(n - 1, dtype=torch.int64), tokens])
            windows = padded.unfold(0, n, 1)  # [len, n], context then next token
            index = _context_index(windows[:, :-1], vocab_size) * vocab_size + windows[:, -1]
            counts += torch.bincount(index, minlength=counts.numel()).to(torch.float64)
        table = (counts.view(-1, vocab_size) + smoothing).log()
        return cls(table - table.logsumexp(dim=-1, keepdim=True), n - 1)


class SparseNGramModel(HistoryModel):
    """An n-gram model for large vocabularies: counts only of the contexts seen, never a V^(n-1) x V table.

    Witten-Bell interpolation (docs/theory.md §11): a context h of k tokens seen c(h) times with d(h) distinct
    next tokens gives P(w | h) = (c(h, w) + d(h) P(w | h')) / (c(h) + d(h)), h' the context one token shorter,
    down to the unigram, itself add-``smoothing`` over the vocabulary. Unseen contexts fall back unchanged.
    """

    def __init__(
        self,
        unigram: torch.Tensor,
        contexts: list,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(unigram.shape[-1], device, dtype)
        self.unigram = unigram.to(device=self.device, dtype=torch.float64)  # [V] probabilities
        self.contexts = contexts  # contexts[k - 1]: {k tokens: (next ids [m] int64, counts [m] float64)}
        self.order = len(contexts)

    @classmethod
    def fit(
        cls, tokens, vocab_size: int, n: int = 3, *, smoothing: float = 0.1, device="cpu", dtype=torch.float32
    ) -> "SparseNGramModel":
        """Counts of every (context of up to n - 1 tokens, next token) in the id sequence ``tokens``."""
        as_int("n", n, low=1, high=8)
        if not smoothing > 0:
            raise ValueError(f"smoothing must be > 0, got {smoothing!r}")
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
            raise ValueError(f"tokens must be in [0, {vocab_size})")
        unigram = torch.from_numpy(np.bincount(ids, minlength=vocab_size).astype(np.float64)) + smoothing
        contexts = []
        for k in range(1, n):
            if ids.size <= k:
                contexts.append({})
                continue
            windows = np.lib.stride_tricks.sliding_window_view(ids, k + 1)  # [N - k, k + 1]
            keys, counts = np.unique(windows, axis=0, return_counts=True)  # sorted: a context's rows are adjacent
            table, starts = {}, np.flatnonzero(np.r_[True, (keys[1:, :k] != keys[:-1, :k]).any(axis=1)])
            for start, end in zip(starts, np.r_[starts[1:], len(keys)]):
                table[tuple(keys[start, :k].tolist())] = (
                    torch.from_numpy(keys[start:end, k].copy()),
                    torch.from_numpy(counts[start:end].astype(np.float64)),
                )
            contexts.append(table)
        return cls(unigram / unigram.sum(), contexts, device=device, dtype=dtype)

    def _distribution(self, context: list) -> torch.Tensor:
        probs = self.unigram.clone()
        for k in range(1, min(self.order, len(context)) + 1):
            seen = self.contexts[k - 1].get(tuple(context[-k:]))
            if seen is None:
                break  # a longer context containing an unseen one is unseen too
            ids, counts = seen
            distinct, total = float(len(ids)), float(counts.sum())
            probs = (probs * distinct).index_add_(0, ids.to(probs.device), counts.to(probs.device)) / (total + distinct)
        return probs

    def _logits(self, history, ends):
        rows, ends_list = history.tolist(), ends.tolist()
        return torch.stack(
            [
                torch.stack([self._distribution(row[:end]).log().to(self.dtype) for end in row_ends])
                for row, row_ends in zip(rows, ends_list)
            ]
        )


class UniformModel(HistoryModel):
    """The random draft: uniform over the vocabulary whatever the context."""

    def _logits(self, history, ends):
        return torch.zeros(ends.shape + (self.vocab_size,), device=self.device, dtype=self.dtype)


#: Which earlier occurrence of the matched suffix a copy draft follows: ours by default, or transformers' rule.
OCCURRENCES = ("latest", "earliest")


class CopyDraft(HistoryModel):
    """Prompt lookup: find the longest earlier occurrence of the context's suffix (at most ``max_match``
    tokens, at least ``min_match``) and propose the token that followed it: its latest occurrence, or with
    ``occurrence="earliest"`` its first, which is transformers' prompt lookup (docs/theory.md §11).
    Deterministic: q is one-hot. Where nothing matches the logits are all -inf, which the speculative decoder
    reads as "no proposal".
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        min_match: int = 1,
        max_match: int = 8,
        occurrence: str = "latest",
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(vocab_size, device, dtype)
        if not 1 <= min_match <= max_match:
            raise ValueError(f"need 1 <= min_match <= max_match, got {min_match} and {max_match}")
        if occurrence not in OCCURRENCES:
            raise ValueError(f"occurrence must be one of {OCCURRENCES}, got {occurrence!r}")
        self.min_match, self.max_match, self.earliest = min_match, max_match, occurrence == "earliest"

    def _logits(self, history, ends):
        logits = torch.full(ends.shape + (self.vocab_size,), -math.inf, device=self.device, dtype=self.dtype)
        rows, ends_list = history.tolist(), ends.tolist()
        for b, row in enumerate(rows):
            for s, end in enumerate(ends_list[b]):
                following = self._lookup(row[:end])
                if following is not None:
                    logits[b, s, following] = 0.0
        return logits

    def _lookup(self, context: list) -> int | None:
        """The token after the latest (or earliest) earlier occurrence of the longest matching suffix, or None:
        one pass over the positions holding the context's last token, each match extended backwards."""
        last, longest, found = len(context) - 1, 0, None
        for end in range(last) if self.earliest else range(last - 1, -1, -1):
            if context[end] != context[last]:
                continue
            size = 1
            while size < self.max_match and size <= end and context[end - size] == context[last - size]:
                size += 1
            if size > longest:
                longest, found = size, context[end + 1]
        return found if longest >= self.min_match else None
