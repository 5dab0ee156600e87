"""Where an engine's greedy output leaves ours, and whether float numerics explain it (docs/metrics.md,
"Greedy output differs").

At the first differing position both continuations share the prefix before it; the target's logits there
decide. A margin (our token's logit minus the engine's) within float noise means the two argmaxes are a
near-tie that any change of summation order flips: numerics. A margin of several logits means the engine
picked a token the target does not rank first by far: a bug (a sampling, masking, position or cache error).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = ["NUMERICS_MARGIN", "BUG_MARGIN", "Divergence", "read_tokens", "first_divergence", "diagnose"]

#: float32 logits of magnitude ~10 carry rounding of ~1e-6 per operation; near-ties below this are numerics.
NUMERICS_MARGIN = 1e-4
#: above this many logits the engine's token is far from the target's argmax: no precision explains it.
BUG_MARGIN = 1.0


@dataclass(frozen=True)
class Divergence:
    """The first position (0-based, in the new tokens) where two greedy outputs differ, None if they agree over
    ``compared`` tokens; the target's view there: the logit margin of ``ours`` over ``theirs``, the top-two
    margin, the engine token's rank and probability, and the verdict."""

    compared: int
    position: int | None
    ours: int | None = None
    theirs: int | None = None
    margin: float | None = None
    top_two_margin: float | None = None
    their_rank: int | None = None
    their_probability: float | None = None
    verdict: str = "identical"

    def as_dict(self) -> dict:
        return asdict(self)


def read_tokens(path) -> list[int]:
    """Token ids from a file: a JSON list, a JSON object with ``tokens`` (or ``token_ids``, ``output_ids``), or
    integers separated by whitespace or commas."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--tokens {str(path)!r} does not exist")
    text = file.read_text(encoding="utf-8").strip()
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = text.replace(",", " ").split()
    if isinstance(document, dict):
        document = next((document[key] for key in ("tokens", "token_ids", "output_ids") if key in document), None)
    try:
        tokens = [int(token) for token in document]
    except (TypeError, ValueError):
        raise ValueError(
            f"--tokens {str(path)!r} holds no list of token ids (a JSON list, an object with 'tokens', "
            f"or integers separated by spaces)"
        ) from None
    if not tokens:
        raise ValueError(f"--tokens {str(path)!r} is empty")
    return tokens


def first_divergence(ours, theirs) -> int | None:
    """The first index where the sequences differ over their common length; None where they agree."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)


def verdict(margin: float) -> str:
    if margin <= NUMERICS_MARGIN:
        return (
            f"numerics: a near-tie (margin {margin:.2e} <= {NUMERICS_MARGIN:g}); any change of summation order "
            f"may flip it"
        )
    if margin >= BUG_MARGIN:
        return (
            f"bug: the engine's token trails the target's argmax by {margin:.3f} logits (>= {BUG_MARGIN:g}); "
            f"no float precision explains that; check sampling, masks, positions and the cache"
        )
    return (
        f"inconclusive: margin {margin:.3g} is beyond float32 noise but small; reduced precision (float16, "
        f"bfloat16, quantised kernels) can move logits this much"
    )


def _at_eos(ours: int, theirs: int, eos: int | None) -> str | None:
    """The verdict where one side's token is end-of-sequence: a rule about stopping, not the logits."""
    if eos is None or eos not in (ours, theirs):
        return None
    side = "the first" if ours == eos else "the second"
    return (
        f"end of sequence: {side} output emits it here and the other does not; an engine that suppresses it "
        f"(min_new_tokens, ignore_eos, a stop rule) parts from greedy decoding at this point, neither "
        f"numerics nor a sampling bug"
    )


@torch.inference_mode()
def diagnose(target, prompt: list[int], ours: list[int], theirs: list[int], eos: int | None = None) -> Divergence:
    """The divergence of ``theirs`` from ``ours`` (both continuations of ``prompt``) under ``target``; ``eos``, the
    end-of-sequence id, names a divergence at it as a stopping rule."""
    compared = min(len(ours), len(theirs))
    position = first_divergence(ours, theirs)
    if position is None:
        return Divergence(compared, None)
    prefix = torch.tensor([prompt + list(ours[:position])], device=target.device)
    logits = target.forward(prefix, target.new_state(1, prefix.shape[1]))[0, -1].double()  # [V]
    top = torch.topk(logits, 2).values
    a, b = ours[position], theirs[position]
    margin = float(logits[a] - logits[b])
    return Divergence(
        compared,
        position,
        a,
        b,
        margin,
        float(top[0] - top[1]),
        int((logits > logits[b]).sum()) + 1,
        float(torch.softmax(logits, 0)[b]),
        _at_eos(a, b, eos) or verdict(abs(margin)),
    )
