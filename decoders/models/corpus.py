"""A deterministic text corpus from the running Python's standard-library sources: no download, on every
machine that runs this package.

The ``.py`` files under ``sysconfig``'s stdlib directory, outside test suites and site-packages, sorted by
relative path; a file is held out when the first byte of the SHA-1 of its relative path is below
``HELD_OUT_SHARE`` * 256 (stable as files come and go). The vocabulary is character-level: printable
ASCII, newline and tab, and one id for every other character. ``Corpus.fingerprint`` (SHA-256 of the
token streams) and ``python_version`` identify the data a checkpoint was trained on.
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "VOCABULARY",
    "VOCAB_SIZE",
    "OTHER",
    "encode",
    "encode_text",
    "decode",
    "Corpus",
    "load_corpus",
    "stdlib_files",
    "split_text",
    "OTHER_TOKEN",
    "character_tokenizer",
]

VOCABULARY = "\n\t" + "".join(chr(code) for code in range(32, 127))  # id = position
OTHER = len(VOCABULARY)  # every character outside VOCABULARY
VOCAB_SIZE = OTHER + 1
HELD_OUT_SHARE = 0.1
EXCLUDED_DIRECTORIES = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__"})
_LOOKUP = np.full(128, OTHER, dtype=np.uint8)
_LOOKUP[[ord(character) for character in VOCABULARY]] = np.arange(len(VOCABULARY), dtype=np.uint8)


def encode(text: str) -> np.ndarray:
    """Text -> token ids ``[len(text)]`` uint8 (non-ASCII and control characters -> ``OTHER``)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return np.where(codes < 128, _LOOKUP[np.minimum(codes, 127)], OTHER).astype(np.uint8)


def decode(tokens) -> str:
    """Token ids -> text; ``OTHER`` becomes U+FFFD."""
    return "".join(VOCABULARY[token] if token < OTHER else "\ufffd" for token in np.asarray(tokens).tolist())


def stdlib_files(root: Path | None = None) -> list[Path]:
    """The corpus's source files, relative to ``root`` (default: this Python's stdlib), sorted."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise ValueError(f"root must be a directory, got {str(root)!r}")
    return sorted(
        path.relative_to(root)
        for path in root.rglob("*.py")
        if not EXCLUDED_DIRECTORIES & set(path.relative_to(root).parts[:-1])
    )


def _held_out(relative: Path) -> bool:
    return hashlib.sha1(relative.as_posix().encode()).digest()[0] < HELD_OUT_SHARE * 256


@dataclass(frozen=True)
class Corpus:
    """Training and held-out token streams (files joined by a blank line), with their provenance."""

    train: np.ndarray  # [N_train] uint8
    held_out: np.ndarray  # [N_held_out] uint8
    train_files: tuple[str, ...]
    held_out_files: tuple[str, ...]
    python_version: str

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.train.tobytes())
        digest.update(self.held_out.tobytes())
        return digest.hexdigest()[:16]


def load_corpus(root: Path | None = None, *, max_characters: int | None = None) -> Corpus:
    """Read and encode the corpus; ``max_characters`` caps each split (files are taken in order, the last
    one cut), for quick runs and tests."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    splits = {True: ([], []), False: ([], [])}
    for relative in stdlib_files(root):
        tokens, names = splits[_held_out(relative)]
        if max_characters is not None and sum(len(part) for part in tokens) >= max_characters:
            continue
        tokens.append(encode((root / relative).read_text(encoding="utf-8", errors="replace") + "\n\n"))
        names.append(relative.as_posix())

    def joined(parts):
        stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
        return stream[:max_characters] if max_characters is not None else stream

    return Corpus(
        joined(splits[False][0]),
        joined(splits[True][0]),
        tuple(splits[False][1]),
        tuple(splits[True][1]),
        platform.python_version(),
    )


def split_text(held_out: bool, *, max_characters: int | None = None, root: Path | None = None) -> str:
    """The raw text of one split's files (the held-out one, or training), joined by a blank line as in
    ``load_corpus``, for models with a tokenizer of their own; ``max_characters`` caps it (whole files first)."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    parts, size = [], 0
    for relative in stdlib_files(root):
        if _held_out(relative) != held_out:
            continue
        if max_characters is not None and size >= max_characters:
            break
        parts.append((root / relative).read_text(encoding="utf-8", errors="replace") + "\n\n")
        size += len(parts[-1])
    text = "".join(parts)
    return text[:max_characters] if max_characters is not None else text


OTHER_TOKEN = "<other>"  # the token of every character outside the vocabulary (a name no character has)


def character_tokenizer():
    """A ``PreTrainedTokenizerFast`` (built with the ``tokenizers`` library) mapping each character to its id of
    ``encode`` (``OTHER_TOKEN`` for every character outside the vocabulary), and ids back to text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {character: index for index, character in enumerate(VOCABULARY)}
    vocabulary[OTHER_TOKEN] = OTHER
    core = Tokenizer(models.WordLevel(vocabulary, unk_token=OTHER_TOKEN))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    core.decoder = decoders.Fuse()  # joined back without separators
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=OTHER_TOKEN)


def encode_text(tokenizer, text: str) -> list[int]:
    """``text`` as ids of ``tokenizer``, or of the corpus's characters where it is None."""
    if tokenizer is None:
        return encode(text).tolist()
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
