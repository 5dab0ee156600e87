"""What a measuring command runs on: the models named on its command line and the held-out text it draws
windows and prompts from (docs/theory.md §9).

A name is a shipped model, a file in the zoo's format or a local Hugging Face model directory (read with
``local_files_only``, never downloaded). Shipped models, zoo files and directories whose tokenizer is the
corpus's characters read the corpus's ids, and their held-out text is the shipped corpus's held-out split
unless a text file is given. A directory with its own tokenizer reads that tokenizer's ids: every model of
the run must share it (the first difference is named), and the held-out text is the same held-out split read
by that tokenizer, or a file. Drafts built from the target (``decoders.drafts``) take its tokenizer.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from decoders import zoo
from decoders.drafts import SHIPPED, draft_names, open_draft, own_tokenizer_drafts
from decoders.models.corpus import character_tokenizer, encode_text, load_corpus, split_text
from decoders.models.gguf import REAL_MODELS, gguf_tokenizer, is_gguf_file, real_model_path
from decoders.models.hf import check_same_tokenizer, is_model_directory
from decoders.models.protocol import compiled_model
from spectheory.vocabularies import METHODS

__all__ = [
    "Pair",
    "Inputs",
    "load_inputs",
    "load_text_inputs",
    "target_tokenizer",
    "encode_text",
    "read_text",
    "check_tokenizers",
    "SHIPPED_TEXT",
    "SHIPPED_TARGET",
    "COMPILE",
    "compiled_models",
]

SHIPPED_TEXT = "the shipped corpus's held-out split"
SHIPPED_TARGET = "shipped target"  # the documents' name for the shipped pair's target
#: --compile: the compiled path on CUDA only (auto), everywhere it applies (on), never (off) (docs/gpu.md)
COMPILE = ("auto", "on", "off")
HELD_OUT_CHARACTERS = 400_000  # of the held-out split, for models with their own tokenizer (~100k tokens)


@dataclass(frozen=True)
class Inputs:
    """The target, the drafts by name, their shared tokenizer (None: the corpus's characters) and the held-out
    text as token ids, with where it came from and a fingerprint of its ids."""

    target: object
    drafts: dict
    tokenizer: object | None
    held_out: np.ndarray  # [N] token ids
    text: str
    fingerprint: str
    contents: str | None = None  # the held-out text itself (None: the shipped corpus's held-out split)

    def held_out_text(self) -> str:
        """The held-out text as characters (task prompts are built from it)."""
        return split_text(True) if self.contents is None else self.contents

    def pair(self, draft: str, target_name: str = "target") -> Pair:
        """The target with the draft named ``draft``, under those names."""
        return Pair(self.target, self.drafts[draft], target_name=target_name, draft_name=draft)


@dataclass(frozen=True)
class Pair:
    """A target and a draft measured together, under the names their documents give them: what every measurement
    of a pair takes whole (the bench, the forecast, the audit, trees and policies; docs/measuring.md)."""

    target: object  # decoders.models.protocol.CausalModel
    draft: object
    target_name: str = "target"
    draft_name: str = "draft"


def check_tokenizers(target, draft, draft_name: str = "the draft") -> None:
    """A pair's tokenizers (None: the corpus's characters) must map text to the same ids (the first difference
    is named, beside the flag that takes a draft with another tokenizer: docs/theory-vocabularies.md §15)."""
    if target is None and draft is None:
        return

    try:
        check_same_tokenizer(target or character_tokenizer(), draft or character_tokenizer(), draft_name)
    except ValueError as error:
        raise ValueError(
            f"{error}; bench, report and audit verify a draft with another tokenizer across vocabularies with "
            f"--cross-vocabulary {{{','.join(METHODS)}}}"
        ) from None


def read_text(path, flag: str = "--text") -> str:
    """A UTF-8 text file's contents; a missing, unreadable, non-UTF-8 or blank file is a ValueError naming ``flag``."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"{flag} {path}: cannot be read ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{flag} {path} is not UTF-8 text (byte {error.start} is {data[error.start]:#04x})") from None
    if not text.strip():
        raise ValueError(f"{flag} {path} holds no text")
    return text


def load_inputs(
    target: str | None,
    drafts,
    *,
    text=None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    compile: str = "auto",
) -> Inputs:
    """Load ``target`` (``zoo.load_named``) and every name of ``drafts`` (``decoders.drafts.open_draft``; None: every
    shipped draft, or for a target with its own tokenizer ``own_tokenizer_drafts()``), check that they share a
    tokenizer, and encode the held-out text: the file ``text`` (UTF-8), else the shipped corpus's held-out split (read
    by the model's own tokenizer where it has one). ``compile`` (``COMPILE``): the models on their compiled path
    (``compiled_models``)."""
    if compile not in COMPILE:
        raise ValueError(f"compile must be one of {COMPILE}, got {compile!r}")
    contents = None if text is None else read_text(text)  # a bad file fails before any model loads
    model, tokenizer = zoo.load_named(target, role="target", device=device, dtype=dtype)
    if drafts is None:
        drafts = draft_names(SHIPPED) if tokenizer is None else own_tokenizer_drafts()
    loaded = {name: open_draft(name, device=device, dtype=dtype, target=(model, tokenizer)) for name in drafts}
    for name, (_, other) in loaded.items():
        check_tokenizers(tokenizer, other, f"draft '{name}'")
    model, drafts = compiled_models(model, {name: draft for name, (draft, _) in loaded.items()}, compile)
    return _with_held_out(model, drafts, tokenizer, text, contents)


def compiled_models(target, drafts: dict, compile: str) -> tuple:
    """(target, drafts) on their compiled path (docs/gpu.md) where ``compile`` is "on", or "auto" on CUDA; a model
    without one runs eagerly, and one line on stderr says so. "off", and "auto" elsewhere: the models as they are."""
    if compile == "off" or compile == "auto" and torch.device(target.device).type != "cuda":
        return target, drafts
    roles = {"target": target, **{f"draft {name!r}": draft for name, draft in drafts.items()}}
    twins = {}
    for role, model in roles.items():
        twins[role], note = compiled_model(model, role)
        if note:
            print(note, file=sys.stderr)
    return twins.pop("target"), dict(zip(drafts, twins.values()))


def load_text_inputs(target: str | None, *, text=None) -> Inputs:
    """``load_inputs`` without models (``target`` None in the result): the held-out text as ``target``'s tokenizer
    reads it (``target_tokenizer``), for runs that only build prompts, such as a bench of two servers."""
    contents = None if text is None else read_text(text)
    return _with_held_out(None, {}, target_tokenizer(target), text, contents)


def target_tokenizer(name_or_path: str | None):
    """The tokenizer of the target ``name_or_path`` (None: the corpus's characters) read without its weights: a
    GGUF file's or a real model's (``gguf_tokenizer``), a Hugging Face directory's; the shipped target's and a zoo
    file's are the characters; any other name is refused by ``zoo.load_named``, whose error names what it accepts."""

    if name_or_path in REAL_MODELS or is_gguf_file(name_or_path):
        path = real_model_path(name_or_path) if name_or_path in REAL_MODELS else name_or_path
        return zoo.own_tokenizer(gguf_tokenizer(path))
    if name_or_path not in (None, "target") and is_model_directory(name_or_path):
        from transformers import AutoTokenizer

        return zoo.own_tokenizer(AutoTokenizer.from_pretrained(name_or_path, local_files_only=True))
    if name_or_path in (None, "target") or Path(name_or_path).is_file():
        return None  # the shipped target and zoo files (GGUF files are read above) read the corpus's characters
    return zoo.load_named(name_or_path, role="target")[1]  # no model of ours: its error names what is accepted


def _with_held_out(model, drafts: dict, tokenizer, text, contents: str | None) -> Inputs:
    """Inputs of ``model`` and ``drafts`` with the held-out text read by ``tokenizer`` (docstring of the module)."""
    if text is None and tokenizer is None:
        corpus = load_corpus()
        return Inputs(model, drafts, None, corpus.held_out, SHIPPED_TEXT, corpus.fingerprint)
    if text is None:  # the same held-out files, read by the model's own tokenizer
        contents = split_text(True, max_characters=HELD_OUT_CHARACTERS)
    ids = np.asarray(encode_text(tokenizer, contents), dtype=np.int64)
    return Inputs(
        model,
        drafts,
        tokenizer,
        ids,
        SHIPPED_TEXT if text is None else str(text),
        hashlib.sha256(ids.tobytes()).hexdigest()[:16],
        contents,
    )
