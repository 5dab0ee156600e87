"""The state a sampler's law depends on, per row (docs/theory-sampling.md §14): the counts of the tokens before a
position (penalties), a grammar's mask there, and Mirostat's mu (``decoders.mirostat``). ``History`` carries it through
the decoders; ``along`` and ``along_tree`` give it at each position of a drafted path or tree, and ``plus`` after the
tokens an iteration emits, so that nothing uncommitted ever enters it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import torch

from decoders.grammar import Grammar
from decoders.mirostat import Mirostat

__all__ = ["History"]


@dataclass(frozen=True)
class History:
    """Counts of the tokens before a position, per row: ``prompt`` and ``output`` ``[..., V]`` (float, so that they
    broadcast against logits); with a ``grammar``, each row's ``outputs`` (token tuples) and the grammar's mask
    there, ``allowed`` ``[..., V]`` bool; with ``mirostat`` (a ``decoders.mirostat.Mirostat``), its state ``mu``
    ``[B]`` at each row's next position (None where unknown: after ``plus`` without the laws) and, after ``along``
    or ``along_tree``, the ``walk`` ``(tokens, parents)`` ``[B, N]`` each, along which ``adjusted_probs`` moves it
    from the laws it computes. ``of`` counts prompts; ``plus`` adds tokens to the output; ``along`` the counts
    before each position of a path."""

    prompt: torch.Tensor
    output: torch.Tensor
    grammar: Grammar | None = None
    outputs: tuple = ()
    allowed: torch.Tensor | None = None
    mirostat: Mirostat | None = None
    mu: torch.Tensor | None = None
    walk: tuple = ()

    @staticmethod
    def of(
        prompts: list, vocab_size: int, device, generated: list | None = None, grammar: Grammar | None = None
    ) -> "History":
        """The counts of ``prompts`` (lists of ids) ``[B, V]``, whose last ``generated[b]`` tokens are output."""
        generated = generated or [0] * len(prompts)
        prompt, output = (torch.zeros(len(prompts), vocab_size, dtype=torch.float32, device=device) for _ in range(2))
        outputs = tuple(tuple(ids[len(ids) - n :]) if n else () for ids, n in zip(prompts, generated))
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
        return replace(self, grammar=grammar, outputs=outputs, allowed=grammar.masks(outputs).to(self.output.device))

    def plus(
        self, tokens: torch.Tensor, keep: torch.Tensor | None = None, laws: torch.Tensor | None = None
    ) -> "History":
        """The history after the output tokens ``tokens: [B, S]`` (only where ``keep: [B, S]`` is True); Mirostat's
        state moves by each kept token under ``laws: [B, S, V]``, the target's law it was emitted at (without them
        the state after is unknown, None: a draft's counts along its own path)."""
        ones = torch.ones(tokens.shape, dtype=self.output.dtype, device=tokens.device)
        ones = ones if keep is None else ones * keep
        counted = History(
            self.prompt,
            self.output.scatter_add(-1, tokens, ones),
            mirostat=self.mirostat,
            mu=self._moved(tokens, keep, laws),
        )
        if self.grammar is None:
            return counted
        kept = (
            tokens.tolist()
            if keep is None
            else [[t for t, k in zip(row, mask) if k] for row, mask in zip(tokens.tolist(), keep.tolist())]
        )
        return counted.with_grammar(self.grammar, tuple(row + tuple(new) for row, new in zip(self.outputs, kept)))

    def _moved(self, tokens: torch.Tensor, keep: torch.Tensor | None, laws: torch.Tensor | None):
        """Mirostat's state after ``plus``' kept tokens -> ``[B]``, or None (no Mirostat, or no laws to move it by)."""
        if self.mirostat is None or self.mu is None or laws is None:
            return None
        mu = self.mu.expand(len(tokens))
        for s in range(tokens.shape[1]):
            after = self.mirostat.moved(mu, laws[:, s], tokens[:, s])
            mu = after if keep is None else torch.where(keep[:, s], after, mu)
        return mu

    def along(self, path: torch.Tensor) -> "History":
        """Counts ``[B, S + 1, V]`` before each position of ``path: [B, S]`` (position 0: before its first token);
        a history of one row serves every row of ``path``."""
        batch, length = path.shape
        steps = torch.zeros(batch, length + 1, self.output.shape[-1], dtype=self.output.dtype, device=path.device)
        steps[:, 1:].scatter_(2, path[..., None], 1.0)
        output = steps.cumsum_(dim=1).add_(self.output[:, None])
        allowed = None
        if self.grammar is not None:
            rows = [
                self.outputs[b if len(self.outputs) > 1 else 0] + tuple(tokens)
                for b, tokens in enumerate(path.tolist())
            ]
            allowed = torch.stack(
                [self.grammar.masks([row[: len(row) - length + s] for s in range(length + 1)]) for row in rows]
            ).to(path.device)  # [B, S + 1, V]
        walk = (
            ()
            if self.mirostat is None
            else (  # position s + 1 follows path[:, s] -> [B, S + 1] each
                torch.nn.functional.pad(path, (1, 0)),
                torch.arange(-1, length, device=path.device).expand(batch, -1),
            )
        )
        return History(
            self.prompt[:, None].expand_as(output), output, self.grammar, (), allowed, self.mirostat, self.mu, walk
        )

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
            allowed = torch.stack(
                [
                    self.grammar.masks([self.outputs[b] + tuple(rows[b][m] for m in paths[b][n]) for n in range(size)])
                    for b in range(batch)
                ]
            ).to(tokens.device)
        return History(
            self.prompt[:, None].expand_as(output),
            output,
            self.grammar,
            (),
            allowed,
            self.mirostat,
            self.mu,
            () if self.mirostat is None else (tokens, parents),
        )
