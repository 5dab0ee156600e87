"""Samples drawn by any engine, read for the statistical audit (``spectheory audit --samples``, docs/theory.md §8).

A samples file is JSON Lines: one object per line, ``{"prompt": [ids], "tokens": [ids]}``, every line
continuing the same prompt with the same number of tokens (blank lines are skipped). What an engine
drew there is audited against the target's exact conditionals as ``audit_sampler`` audits our decoders.
Every defect is one ``ValueError`` naming the file and the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from decoders.audit.statistical import MAX_SAMPLES
from plumbing.outputs import strict_loads, write_text

__all__ = ["EngineSamples", "read_samples", "read_rows", "check_continues", "write_rows"]


@dataclass(frozen=True)
class EngineSamples:
    """The shared prompt and the sampled continuations ``tokens: [n, horizon]``."""

    prompt: tuple
    tokens: torch.Tensor

    def sampler(self):
        """``audit_sampler``'s ``sample(n, generator)``: the file's rows (the generator draws nothing)."""

        def sample(n: int, generator: torch.Generator) -> torch.Tensor:
            return self.tokens[:n]

        return sample


def _ids(value, key: str, vocab_size: int, where: str) -> tuple:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: {key!r} must be a non-empty list of token ids")
    for token in value:
        if isinstance(token, bool) or not isinstance(token, int):
            raise ValueError(f"{where}: {key!r} holds {token!r}, not an integer token id")
        if not 0 <= token < vocab_size:
            raise ValueError(f"{where}: {key!r} holds id {token}, outside the target's vocabulary [0, {vocab_size})")
    return tuple(value)


def _pieces(value, key: str, where: str) -> tuple | str:
    """An engine file's prompt (text, or ids) or tokens (ids or text pieces, ``END`` after the end)."""
    if key == "prompt" and isinstance(value, str):
        return value
    if (
        not isinstance(value, list)
        or not value
        or not all(
            isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool) and token >= 0)
            for token in value
        )
    ):
        raise ValueError(f"{where}: {key!r} must be a non-empty list of token ids or text pieces")
    return tuple(value)


def check_continues(path, file_prompt, prompt: str | None, tokenize=None) -> None:
    """A one-line error unless samples file ``path``'s prompt (``read_rows``' first value: text, or ids compared
    with ``tokenize(prompt)`` where a tokenizer is given) is ``prompt``, which the other side continues (None:
    nothing to check)."""
    if prompt is None:
        return
    if isinstance(file_prompt, str) and file_prompt != prompt:
        raise ValueError(
            f"samples file '{path}' continues the prompt {file_prompt[:60]!r}, not --prompt-text "
            f"{prompt[:60]!r}: both sides must continue the same prompt"
        )
    if not isinstance(file_prompt, str) and tokenize is not None and list(file_prompt) != list(tokenize(prompt)):
        raise ValueError(
            f"samples file '{path}' continues the prompt ids {list(file_prompt)[:12]}, not those of "
            f"--prompt-text {prompt[:60]!r}: both sides must continue the same prompt"
        )


def read_rows(path, tokens_of=_pieces, stop: tuple = ()) -> tuple:
    """(prompt, rows) of JSON Lines file ``path`` (module docstring); ``tokens_of(value, key, where)`` checks
    and converts a line's "prompt" and "tokens" (default: ids or text pieces, as engines return them). A line that
    ends with one of the ``stop`` tokens may be shorter than the longest: it is padded with that token, as the
    audits write a row that stopped (``decoders.sampling.stop_padded``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"samples file '{path}' cannot be read ({type(error).__name__}: {error})") from None
    prompt, rows = None, []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"samples file '{path}', line {number}"
        try:
            entry = strict_loads(line)
        except ValueError as error:
            raise ValueError(f"{where}: not a JSON object ({error})") from None
        if not isinstance(entry, dict) or set(entry) != {"prompt", "tokens"}:
            raise ValueError(f'{where}: each line must be an object with exactly "prompt" and "tokens"')
        line_prompt = tokens_of(entry["prompt"], "prompt", where)
        tokens = tokens_of(entry["tokens"], "tokens", where)
        if prompt is None:
            prompt = line_prompt
        elif line_prompt != prompt:
            raise ValueError(f"{where}: its prompt differs from the first line's (all lines must share one prompt)")
        rows.append((tokens, where))
        if len(rows) > MAX_SAMPLES:
            raise ValueError(f"{where}: more than {MAX_SAMPLES:,} samples")
    if len(rows) < 2:
        raise ValueError(f"samples file '{path}' holds {len(rows)} sample lines: the audit needs at least 2")
    horizon = max(len(tokens) for tokens, _ in rows)
    for tokens, where in rows:
        if len(tokens) < horizon and tokens[-1] not in stop:
            raise ValueError(
                f"{where}: {len(tokens)} tokens where the longest line has {horizon} (all lines must have "
                f"the same number, or end with a --stop token)"
            )
    return prompt, [tokens + tokens[-1:] * (horizon - len(tokens)) for tokens, _ in rows]


def read_samples(path, vocab_size: int, stop: tuple = ()) -> EngineSamples:
    """The samples of JSON Lines file ``path`` for a target of ``vocab_size`` tokens (module docstring), lines that
    end at one of the ``stop`` tokens padded with it."""
    prompt, rows = read_rows(path, lambda value, key, where: _ids(value, key, vocab_size, where), stop)
    return EngineSamples(prompt, torch.tensor(rows, dtype=torch.int64))


def write_rows(path, prompt, rows) -> None:
    """Samples as a JSON Lines file ``read_rows`` reads back, written atomically: ``prompt`` (text or ids) and
    each row (ids or text pieces)."""
    lines = "".join(json.dumps({"prompt": prompt, "tokens": list(row)}, allow_nan=False) + "\n" for row in rows)
    write_text(path, lines)
