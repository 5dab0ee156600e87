"""What every decoder shares (docs/theory.md §10, docs/theory-trees.md §12): the one decode loop (``decode``), its
prologue and epilogue (``begin``, ``Run.generation``), prompt checks and the start, the one way a draft is fed its
pending tokens, the one first call (the prompt, then the new positions: a chain's causal ones or a tree's nodes), the
one rollback (``keep_nodes``: truncate where the kept nodes are contiguous, ``commit_path`` where they are a tree's
path), output bookkeeping, phase timing."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from decoders.models.protocol import check_model, model_calls, prefill_call, synchronize, tighten
from decoders.results import Generation
from decoders.sampling import History, Sampling, check_probs, history_of
from plumbing.validation import as_int, as_positive_int
from spectheory.vocabularies import METHODS as CROSS_METHODS

__all__ = [
    "decode",
    "Run",
    "begin",
    "as_prompts",
    "Unfed",
    "unfed",
    "new_state",
    "prefill",
    "Committed",
    "start",
    "feed_draft",
    "forward_after",
    "prompt_nodes",
    "keep_nodes",
    "park",
    "park_committed",
    "Output",
    "PhaseTimer",
    "check_models",
    "check_room",
    "room_for",
    "host_read",
]


def as_prompts(prompts, vocab_size: int, eos: int | None = None, stop: tuple = ()) -> list[list[int]]:
    """Prompts as lists of token ids: an integer ``[B, L]`` tensor or a list of non-empty sequences of
    integers (a float id is refused, never truncated); ``eos`` and the ``stop`` tokens must be token ids too."""
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() != 2 or prompts.is_floating_point() or prompts.dtype == torch.bool:
            raise ValueError(
                f"a prompt tensor must be integer with shape (batch, length), got "
                f"{prompts.dtype} {tuple(prompts.shape)}"
            )
        prompts = prompts.tolist()
    prompts = [prompt.tolist() if isinstance(prompt, torch.Tensor) else list(prompt) for prompt in prompts]
    if not prompts or any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("prompts must be a non-empty batch of non-empty token sequences")
    if any(
        isinstance(token, bool) or not isinstance(token, (int, np.integer)) or not 0 <= token < vocab_size
        for prompt in prompts
        for token in prompt
    ):
        raise ValueError(f"prompt tokens must be integers in [0, {vocab_size})")
    if eos is not None:
        as_int("eos", eos, low=0, high=vocab_size - 1)
    for token in stop:
        as_int("stop token", token, low=0, high=vocab_size - 1)
    return [[int(token) for token in prompt] for prompt in prompts]


def check_models(target, draft=None) -> None:
    """Both models keep the protocol (``decoders.models.protocol``) and share a vocabulary."""
    check_model(target, "target")
    if draft is not None:
        check_model(draft, "draft")
    if draft is not None and draft.vocab_size != target.vocab_size:
        raise ValueError(
            f"draft and target vocabularies differ: draft has {draft.vocab_size} tokens, target {target.vocab_size}; "
            f"a draft with another tokenizer is verified by one of {CROSS_METHODS} "
            "(decoders.cross_vocabulary, docs/theory-vocabularies.md §15)"
        )


def check_room(model, prompts: list[list[int]], extra: int, what: str) -> None:
    """A clear error when a prompt plus the tokens to come cannot fit the model's context."""
    if model.max_context is None:
        return
    longest = max(len(prompt) for prompt in prompts)
    if longest + extra > model.max_context:
        raise ValueError(
            f"prompt length {longest} plus {what} ({extra}) exceeds the model's context of {model.max_context} tokens"
        )


@dataclass(frozen=True)
class Unfed:
    """Prompt tokens a model holds no state of yet, which its next call carries before its new positions (one
    call where a prefill and a step would be two, as transformers' first call does: docs/theory.md §10).
    ``tokens: [B, P]``, each row's first ``counts[b]`` real and the rest padding; ``shortest`` = min(counts),
    known on the host."""

    tokens: torch.Tensor
    counts: torch.Tensor
    shortest: int


def unfed(prompts: list[list[int]], device: torch.device, held: int = 1) -> Unfed:
    """Each prompt but its last ``held`` tokens (at most the whole prompt but one), left-aligned."""
    counts = [max(len(prompt) - held, 0) for prompt in prompts]
    tokens = np.zeros((len(prompts), max(counts)), dtype=np.int64)  # numpy: a row costs ~0.7 us, torch.tensor ~12
    for b, (prompt, count) in enumerate(zip(prompts, counts)):
        tokens[b, :count] = prompt[:count]
    return Unfed(torch.from_numpy(tokens).to(device), torch.tensor(counts, device=device), min(counts))


def new_state(model, prompts: list[list[int]], room: int | None = None):
    """An empty state with space for ``room`` tokens after the longest prompt (None: the model's whole context)."""
    return model.new_state(len(prompts), None if room is None else max(len(prompt) for prompt in prompts) + room)


def prefill(model, prompts: list[list[int]], held: int = 1, room: int | None = None):
    """A new state holding each prompt but its last ``held`` tokens (``unfed``), with space for ``room`` more
    tokens after the longest prompt (None: the model's whole context)."""
    state, body = new_state(model, prompts, room), unfed(prompts, model.device, held)
    if body.tokens.shape[1] > 0:
        prefill_call(model)(body.tokens, state, body.counts)  # no logits are read: skip the head where it can
    return state


@dataclass
class Committed:
    """Decoding state between iterations, chain or tree (docs/theory.md §10): both models' states, the last two
    committed tokens of each row (``tail: [B, 2]``, the earlier one only meaningful where ``draft_pending`` is 2), the
    prompt tokens the target's first call carries (``target_unfed``, None afterwards), a draft-length policy's per-row
    state (made at the first iteration) and, where the sampling needs them, the committed tokens' counts and grammar
    (``history``, docs/theory-sampling.md §14). The target holds the committed sequence S but its last token; the draft
    holds S but its last ``draft_pending`` (1 or 2) tokens -- 2 after an iteration that accepted a token the draft
    drafted but was never fed (a chain's last draft, a tree's deepest node)."""

    target_state: object
    draft_state: object
    tail: torch.Tensor
    draft_pending: torch.Tensor
    target_unfed: Unfed | None = None
    policy_state: dict | None = None
    history: History | None = None

    @property
    def last(self) -> torch.Tensor:
        """The last committed token of each row. # [B]"""
        return self.tail[:, 1]


def start(
    target, draft, prompts: list[list[int]], room: int | None = None, history: History | None = None
) -> Committed:
    """Prefill the draft, which holds each prompt but its last token; the target holds nothing yet and its first
    call carries that much of the prompt. Both have space for ``room`` more tokens (None: each model's
    context). ``history``: the prompts' (``decoders.sampling.history_of``), where the sampling needs one."""
    tail = torch.tensor(
        [[prompt[-2] if len(prompt) > 1 else 0, prompt[-1]] for prompt in prompts], device=target.device
    )
    return Committed(
        new_state(target, prompts, room),
        prefill(draft, prompts, room=room),
        tail,
        torch.ones(len(prompts), dtype=torch.int64, device=target.device),
        unfed(prompts, target.device),
        history=history,
    )


def room_for(max_new_tokens: int, nodes: int) -> int:
    """Tokens each state must hold beyond its prompt: the new ones and one iteration's ``nodes`` beyond them."""
    return max_new_tokens + nodes + 1


def feed_draft(draft, committed: Committed) -> torch.Tensor:
    """Feed the draft its pending tokens (the last one or two of ``committed.tail``) in one causal call: its logits
    after the last committed token ``[B, V]``; the draft then holds the whole committed sequence."""
    two = (committed.draft_pending == 2)[:, None]  # [B, 1]: feed both tail tokens, else only the last
    feed = torch.where(two, committed.tail, committed.tail.flip(1))  # [B, 2], padding second
    logits = draft.forward(feed, committed.draft_state, committed.draft_pending)  # [B, 2, V]
    return torch.where(two, logits[:, 1], logits[:, 0])


def forward_after(
    model,
    tokens: torch.Tensor,
    state,
    pending: Unfed | None,
    parents: torch.Tensor | None = None,
    tree_call: Callable | None = None,
) -> torch.Tensor:
    """The one first call and every later one: logits ``[B, W, V]`` of ``tokens [B, W]``, after each row's ``pending``
    prompt tokens (None: none), whose logits are never computed where the model can skip them (``keep``). Without
    ``parents`` the tokens follow each other (a chain: ``model.forward``); with ``parents [B, W]`` they are a tree's
    nodes (``model.forward_tree``, or ``tree_call`` with its signature), after the prompt as a chain of nodes."""
    if parents is not None:
        if pending is not None and pending.tokens.shape[1] > 0:
            tokens, parents = prompt_nodes(pending, tokens, parents)
        return (tree_call or model.forward_tree)(
            tokens, state, parents, keep=parents.shape[1] - (0 if pending is None else pending.tokens.shape[1])
        )
    if pending is None or pending.tokens.shape[1] == 0:
        return model.forward(tokens, state)
    width, longest = tokens.shape[1], pending.tokens.shape[1]
    if pending.shortest == longest:  # rows of one length: the new tokens follow every row's prompt
        return model.forward(torch.cat([pending.tokens, tokens], dim=1), state, None, width)
    at = pending.counts[:, None] + torch.arange(width, device=tokens.device)  # [B, W], each row's new positions
    feed = torch.cat([pending.tokens, torch.zeros_like(tokens)], dim=1).scatter_(1, at, tokens)  # [B, P + W]
    keep = width + longest - pending.shortest  # from the shortest row's first new position on
    logits = model.forward(feed, state, pending.counts + width, keep)  # [B, keep, V]
    return logits.gather(1, (at - (longest + width - keep))[..., None].expand(-1, -1, logits.shape[-1]))


def _prompt_start(pending: Unfed) -> tuple:
    """(node index ``[P]``, each row's first prompt node ``[B, 1]``) of the prompt's chain of nodes."""
    index = torch.arange(pending.tokens.shape[1], device=pending.tokens.device)
    return index, pending.tokens.shape[1] - pending.counts[:, None]


def prompt_nodes(pending: Unfed, tokens: torch.Tensor, parents: torch.Tensor) -> tuple:
    """A tree's nodes ``tokens, parents: [B, N]`` after the prompt tokens ``pending`` (P = its width), as one tree:
    (tokens, parents ``[B, P + N]``). Row b's prompt is a chain in nodes P - counts[b] .. P - 1 (each under the one
    before, the first a root), the tree follows at P + its indices with its root under the chain's last node; nodes
    before the chain are roots of their own that nothing sees and nothing keeps."""
    width = pending.tokens.shape[1]
    index, first = _prompt_start(pending)
    chain_tokens = pending.tokens.gather(1, (index[None, :] - first).clamp(min=0).clamp(max=width - 1))
    chain_parents = torch.where(index[None, :] > first, index[None, :] - 1, -1)
    root = torch.where(pending.counts > 0, width - 1, -1)[:, None]  # [B, 1], the tree root's parent
    return (
        torch.cat([chain_tokens, tokens], dim=1),
        torch.cat([chain_parents, torch.where(parents < 0, root, parents + width)], dim=1),
    )


def keep_nodes(
    model,
    state,
    held: torch.Tensor,
    counts: torch.Tensor,
    path: torch.Tensor | None = None,
    pending: Unfed | None = None,
) -> None:
    """The one rollback. After a call that fed a row's nodes beyond ``held[b]`` tokens, keep ``counts[b]`` of them
    and drop the rest. Without ``path`` the nodes follow each other (a causal call): ``truncate`` to held + counts,
    nothing moves. With ``path [B, M]`` (node indices, a root-to-node path) they are a tree's: ``commit_path``
    keeps its first counts[b] nodes, after the prompt chain (``prompt_nodes``) where the call carried ``pending``."""
    if path is None:
        model.truncate(state, held + counts)
    elif pending is None or pending.tokens.shape[1] == 0:
        model.commit_path(state, path, counts)
    else:  # the prompt's chain, then the path
        index, first = _prompt_start(pending)
        chain = torch.where(index[None, :] < pending.counts[:, None], index[None, :] + first, 0)  # [B, P]
        chain = torch.cat([chain, torch.zeros_like(path)], dim=1)  # [B, P + M]
        after = pending.counts[:, None] + torch.arange(path.shape[1], device=path.device)  # [B, M]
        model.commit_path(state, chain.scatter_(1, after, path + pending.tokens.shape[1]), pending.counts + counts)


def host_read(columns: list, probs: tuple = (), models: dict | None = None, states: tuple = ()) -> list:
    """The decoders' one host read per iteration (docs/gpu.md, "Host synchronisations"): each integer tensor of
    ``columns`` (``[B, k]``) as a list of rows (lists of k values), and in the same read ``check_probs`` of ``probs``
    and each of ``states``' longest row, which tightens its host bound (``tighten``)."""
    batch, widths = len(columns[0]), [column.shape[1] for column in columns]
    extras = [state.lengths.max().reshape(1) for state in states]
    if probs:
        extras.append(torch.isnan(sum(p.sum() for p in probs)).to(torch.int64).reshape(1))
    parts = [column.to(torch.int64) for column in columns] + ([torch.cat(extras).expand(batch, -1)] if extras else [])
    rows = torch.cat(parts, dim=1).tolist()  # [B, sum(widths) + extras]: the one read
    tail = rows[0][sum(widths) :]
    if probs and tail[-1]:
        check_probs(*probs, models=models)  # raises, naming the model whose logits hold NaN
    for state, longest in zip(states, tail):
        tighten(state, longest)
    starts = [sum(widths[:i]) for i in range(len(widths))]
    return [[row[at : at + width] for row in rows] for at, width in zip(starts, widths)]


def park(model, state, done: torch.Tensor) -> None:
    """Cut rows that have finished (``done: [B]`` bool) back to empty before a step: their work is discarded,
    so they never outgrow the room their state was made with."""
    model.truncate(state, torch.where(done, 0, state.lengths))


def decode(output: "Output", iterate: Callable, park_rows: Callable | None = None) -> None:
    """The decoders' one loop: until every row has finished, run one iteration and extend each active row by
    the tokens it emitted. ``iterate(active)`` runs the decoder's step and returns every row's new tokens
    (a list indexed by row; only the active rows' are read); ``park_rows(done)`` (``done: [B]`` bool) cuts
    finished rows' states back, called only once some row has finished."""
    while not output.finished:
        active = [b for b, done in enumerate(output.done) if not done]
        if park_rows is not None and len(active) < len(output.done):
            park_rows(output.done)
        emitted = iterate(active)
        for b in active:
            output.extend(b, emitted[b])


def park_committed(target, draft, committed: "Committed", done: list) -> None:
    """``park`` both models' states of ``committed`` at the rows ``done`` (a list of bools): a chain's or a
    tree's ``park_rows`` for ``decode``."""
    mask = torch.tensor(done, device=target.device)
    park(target, committed.target_state, mask), park(draft, committed.draft_state, mask)


class Output:
    """Per-row generated tokens with end-of-sequence, the sampling's stop tokens and ``max_new_tokens``."""

    def __init__(self, batch: int, max_new_tokens: int, eos: int | None, stop: tuple = ()) -> None:
        as_positive_int("max_new_tokens", max_new_tokens)
        self.rows = [[] for _ in range(batch)]
        self.done = [False] * batch
        self.max_new_tokens, self.stops = max_new_tokens, set(stop) | ({eos} if eos is not None else set())

    def extend(self, b: int, tokens: list[int]) -> None:
        """Append row b's new tokens, stopping after end-of-sequence or a stop token, or at max_new_tokens."""
        if self.done[b]:
            return
        for token in tokens:
            self.rows[b].append(token)
            if token in self.stops or len(self.rows[b]) >= self.max_new_tokens:
                self.done[b] = True
                return

    @property
    def finished(self) -> bool:
        return all(self.done)


#: The methods of a model that run it (a forward pass): what ``PhaseTimer.watch`` times.
MODEL_CALLS = ("forward", "append", "head_logits", "forward_tree")


class _Watched:
    """A model whose calls (``MODEL_CALLS``) add their seconds to a ``PhaseTimer``'s "model" entry; every other
    attribute is the model's own."""

    def __init__(self, model, timer: "PhaseTimer") -> None:
        self._model = model
        for name in model_calls(model, MODEL_CALLS):  # bound once: a call costs the timing alone
            setattr(self, name, timer.timed(getattr(model, name)))

    def __getattr__(self, name: str):
        return getattr(self._model, name)


#: The clock every phase and model call is read from; a test injects a fake one to check the attribution.
clock = time.perf_counter


class PhaseTimer:
    """Wall time per phase; with ``profile`` each phase is bracketed by CUDA synchronisations, and the models
    handed to ``watch`` record the seconds inside their calls as "model" (docs/theory.md §9, efficiency)."""

    def __init__(self, device: torch.device, profile: bool) -> None:
        self.cuda = device.type == "cuda"
        self.profile = profile
        self.seconds: dict[str, float] = {}
        self._start = clock()

    def _sync(self) -> None:
        if self.cuda:
            synchronize(torch.device("cuda"))

    @contextmanager
    def phase(self, name: str):
        if not self.profile:
            yield
            return
        self._sync()
        start = clock()
        yield
        self._sync()
        self.seconds[name] = self.seconds.get(name, 0.0) + clock() - start

    def watch(self, model):
        """The model, timed call by call when profiling (the model itself otherwise: no cost)."""
        return _Watched(model, self) if self.profile else model

    def timed(self, call):
        """``call`` with its seconds, between synchronisations, added to the "model" entry."""

        def run(*args, **kwargs):
            self._sync()
            start = clock()
            result = call(*args, **kwargs)
            self._sync()
            self.seconds["model"] += clock() - start
            return result

        self.seconds.setdefault("model", 0.0)
        return run

    def finish(self) -> dict:
        self._sync()
        return dict(self.seconds, total=clock() - self._start)


@dataclass
class Run:
    """What every generate function starts from and ends with: the checked prompts, the output rows, the phase timer
    and the models it watches (in the order given to ``begin``), and the sampler's history of the prompts (None
    where the sampling needs none)."""

    prompts: list
    output: Output
    timer: PhaseTimer
    models: tuple
    history: History | None

    def generation(self, stats) -> Generation:
        """The run's result: each row's new tokens and ``stats`` (a ``decoders.results.DecodeStats``)."""
        return Generation(tuple(tuple(row) for row in self.output.rows), stats)


def begin(
    models: tuple, prompts, *, max_new_tokens: int, room: int, needed: str, sampling: Sampling, eos, profile: bool
) -> Run:
    """The generate functions' one prologue: the prompts checked against the first model's vocabulary, the output
    rows, each model's room for ``room`` tokens beyond its prompt (``needed`` says what they are, for the error), a
    timer watching every model, and the prompts' history for ``sampling``."""
    prompts = as_prompts(prompts, models[0].vocab_size, eos, sampling.stop)
    output = Output(len(prompts), max_new_tokens, eos, sampling.stop)
    for model in models:
        check_room(model, prompts, room, needed)
    timer = PhaseTimer(models[0].device, profile)
    watched = tuple(timer.watch(model) for model in models)
    return Run(prompts, output, timer, watched, history_of(sampling, prompts, models[0]))
