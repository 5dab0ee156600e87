"""The model protocol, declared once (docs/decoders.md, "Your own model"; docs/theory.md §7).

A model is what the decoders call. ``CausalModel`` is required of every model: ``forward(tokens [B, S], state,
counts [B], keep)`` runs the first ``counts[b]`` tokens of each row (the rest is padding), appends them to the
row's state and returns logits ``[B, S, V]`` (the last ``keep`` positions only when ``keep`` > 0);
``truncate(state, lengths [B])`` cuts each row back to ``lengths[b]`` tokens. Both give ``state.lengths`` a new
tensor and never change the old one in place: decoders keep it to roll back to. ``TreeModel`` adds tree
attention, which only the tree decoders need: ``forward_tree(tokens [B, n], state, parents [B, n], keep)`` scores
n draft-tree nodes held beyond the committed prefix, and ``commit_path(state, path [B, M], counts [B])`` keeps a
root-to-node path and drops the other nodes (``decoders.models.base`` has the helpers).

The optional capabilities (``OPTIONAL``) speed a decoder up and each has a fallback: a model without them gives
the same tokens and laws, only slower. ``check_model`` runs where a decoder receives its models and names, in one
line, what a model lacks; no other module asks a model what it has (``hasattr``): they call the functions here.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = [
    "synchronize",
    "ModelState",
    "CausalModel",
    "TreeModel",
    "OPTIONAL",
    "REQUIRED",
    "check_model",
    "has_tree",
    "prefill_call",
    "repeated",
    "model_calls",
    "compiled_model",
    "tighten",
    "fixed_widths",
    "decode_path",
]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class ModelState(Protocol):
    lengths: torch.Tensor  # [B] int64, tokens held per row

    def clone(self) -> "ModelState":
        """An independent copy (the exact audit forks states along its branches)."""


class CausalModel(Protocol):
    vocab_size: int
    max_context: int | None  # None: unbounded
    device: torch.device

    def new_state(self, batch_size: int, capacity: int | None = None) -> ModelState:
        """An empty state for ``batch_size`` rows of at most ``capacity`` tokens (None: the model's context)."""

    def forward(
        self, tokens: torch.Tensor, state: ModelState, counts: torch.Tensor | None = None, keep: int = 0
    ) -> torch.Tensor:
        """Logits ``[B, S, V]`` for the new tokens ``[B, S]`` (``[B, keep, V]``, the last ones, when ``keep`` > 0);
        appends ``counts`` (default: all S) per row."""

    def truncate(self, state: ModelState, lengths: torch.Tensor) -> None:
        """Cut each row back to ``lengths[b]`` tokens (never longer than it holds)."""


class TreeModel(CausalModel, Protocol):
    def forward_tree(
        self, tokens: torch.Tensor, state: ModelState, parents: torch.Tensor, keep: int = 0
    ) -> torch.Tensor:
        """Logits ``[B, n, V]`` of n new tree nodes ``[B, n]`` whose ``parents`` index the nodes held so far
        and the new ones before them (-1: a root on the committed prefix)."""

    def commit_path(self, state: ModelState, path: torch.Tensor, counts: torch.Tensor) -> None:
        """Keep each row's first ``counts[b]`` nodes of ``path`` as the prefix's continuation; drop the rest."""


#: Optional capabilities: (where, name) -> what it does, and what happens without it.
OPTIONAL = {
    ("model", "append"): "append(tokens, state, counts): forward without the logits, for prefills; "
    "without it, forward (the LM head runs and its logits are dropped)",
    ("state", "repeat"): "state.repeat(rows): rows copies of a one-row state, so the statistical audit scores a "
    "shared prompt once; without it, the prompt is scored again with every row",
    ("model", "head_logits"): "head_logits(...): the LM head alone, timed as a model call by the profiles; "
    "without it, nothing (the head is inside forward)",
    ("state", "bound"): "bound: a host-side upper bound on lengths.max(), which spares the model a host read; the "
    "decoders set it exactly from their one read per iteration (tighten); without it, nothing",
    ("model", "fixed_widths"): "fixed_widths = True: a chain's verify always takes gamma + 1 tokens (no host read of "
    "the proposals, one compiled shape a gamma); without it, the longest row's proposals "
    "plus one (cheaper where a draft often proposes nothing, eagerly)",
    ("model", "compiled"): "compiled(backend, mode): the same model on a static cache with one compiled step per call "
    "shape (docs/gpu.md), whose decode_path names it; without it, the eager model, and one "
    "line says so",
}


#: The attributes each protocol requires (typing.Protocol lists them only from Python 3.12).
REQUIRED = {CausalModel: ("vocab_size", "max_context", "device", "new_state", "forward", "truncate")}
REQUIRED[TreeModel] = REQUIRED[CausalModel] + ("forward_tree", "commit_path")


def _lacks(model, protocol) -> list:
    """The attributes ``protocol`` requires that ``model`` does not have."""
    return [name for name in REQUIRED[protocol] if not hasattr(model, name)]


def check_model(model, role: str = "model", *, tree: bool = False) -> None:
    """A ``ValueError`` naming what ``model`` (the decoder's ``role``: target or draft) lacks of ``CausalModel``,
    or of ``TreeModel`` when ``tree``."""
    lacking = _lacks(model, TreeModel if tree else CausalModel)
    if lacking:
        need = (
            "tree attention (decoders.models.protocol.TreeModel)"
            if tree
            else "the model protocol (decoders.models.protocol.CausalModel)"
        )
        raise ValueError(f"the {role} {type(model).__name__} lacks {', '.join(lacking)}: a decoder needs {need}")


def has_tree(model) -> bool:
    """Whether ``model`` has tree attention (``TreeModel``)."""
    return not _lacks(model, TreeModel)


def prefill_call(model):
    """``model.append`` (no logits), or ``model.forward`` where it has none."""
    return getattr(model, "append", model.forward)


def repeated(model, state, rows: int, body: torch.Tensor, capacity: int):
    """``rows`` copies of the one-row ``state``, which holds ``body: [1, P]``: ``state.repeat`` where the state has
    it, else a new state of ``rows`` rows and ``capacity`` tokens with ``body`` run again."""
    if hasattr(state, "repeat"):
        return state.repeat(rows)
    fresh = model.new_state(rows, capacity)
    if body.shape[1]:
        prefill_call(model)(body.expand(rows, -1), fresh)
    return fresh


def model_calls(model, names: tuple) -> list:
    """Which of the method ``names`` ``model`` has (a timer wraps those it finds)."""
    return [name for name in names if hasattr(model, name)]


def compiled_model(model, role: str = "model", *, backend: str = "inductor", mode: str | None = None) -> tuple:
    """(``model`` on its compiled path, None), or (``model`` itself, the one line saying that the ``role`` runs
    eagerly) where it has none."""
    if hasattr(model, "compiled"):
        return model.compiled(backend=backend, mode=mode), None
    return model, f"the {role} ({type(model).__name__}) has no compiled path: it runs eagerly"


def tighten(state, longest: int) -> None:
    """Tell ``state`` its longest row's length, read by the decoder (its ``bound``, where it keeps one)."""
    if hasattr(state, "bound"):
        state.bound = longest


def fixed_widths(model) -> bool:
    """Whether ``model`` takes every chain verify at gamma + 1 tokens (``OPTIONAL``)."""
    return bool(getattr(model, "fixed_widths", False))


def decode_path(model) -> str:
    """How ``model`` runs, for results: its ``decode_path`` where it is compiled, else "eager"."""
    return getattr(model, "decode_path", "eager")
