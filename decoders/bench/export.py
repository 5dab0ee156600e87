"""The shipped pair as Hugging Face model directories (``spectheory export-hf``), so that every Hugging Face
path (``generate``, assisted generation, the adapter, any engine that reads such a directory) can run it.

Each TinyGPT becomes a ``GPT2LMHeadModel`` with identical logits (``decoders.models.hf.tinygpt_to_gpt2``),
saved beside the corpus's character-level tokenizer (``decoders.models.corpus.character_tokenizer``).
Nothing is downloaded; the directories load with ``local_files_only=True``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from decoders import zoo
from decoders.models.corpus import character_tokenizer
from decoders.models.gguf import checked_reader
from decoders.models.hf import tinygpt_to_gpt2
from plumbing.outputs import staged_directory, write_atomically

__all__ = ["EXPORTABLE", "export_hf", "export_truncated_gguf"]

#: The shipped transformers that have a GPT-2 form: the target and the TinyGPT drafts.
EXPORTABLE = ("target", "transformer", "distilled")


def export_hf(out, names=("target", "transformer")) -> list[Path]:
    """Write ``out/<name>`` for each shipped model of ``names`` (``EXPORTABLE``); the directory is replaced as
    a whole once all of them are written. Returns the model directories."""

    unknown = [name for name in names if name not in EXPORTABLE]
    if unknown or not names:
        raise ValueError(f"models must be among {EXPORTABLE}, got {list(names)}")
    tokenizer = character_tokenizer()
    with staged_directory(out) as stage, _quiet_transformers():
        for name in names:
            model = zoo.load_target() if name == "target" else zoo.load_draft(name)
            tinygpt_to_gpt2(model).save_pretrained(stage / name)
            tokenizer.save_pretrained(stage / name)
    return [Path(out) / name for name in names]


@contextmanager
def _quiet_transformers():
    """transformers' own progress bars ("Writing model shards") off for the block: the command has one output."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


def export_truncated_gguf(source, out, layers: int) -> Path:
    """``source``, a llama-architecture GGUF file, through its first ``layers`` blocks only, written to ``out``
    (atomically): every key but the block count and every tensor outside the dropped blocks copied as it is
    (quantized bytes included), so the vocabulary is the source's exactly and llama-server takes it as a draft
    model for the source (``-md``; docs/engines.md). Self-speculation by early exit, as ``layerskip:K`` is for
    our decoders (docs/theory.md §11)."""
    import re

    from gguf import GGUFValueType, GGUFWriter

    architecture, reader = checked_reader(source)
    if architecture != "llama":
        raise ValueError(f"--target {str(source)!r}: truncation writes llama-architecture GGUF files only")
    total = int(reader.fields["llama.block_count"].contents())
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers < total:
        raise ValueError(
            f"layers must be an integer in [1, {total - 1}] (the model has {total} blocks), got {layers!r}"
        )

    def kept(name: str) -> bool:
        block = re.match(r"blk\.(\d+)\.", name)
        return block is None or int(block.group(1)) < layers

    def write(path: Path) -> None:
        writer = GGUFWriter(path, arch="llama")
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue  # the writer's own header and the architecture it was given
            value = layers if key == "llama.block_count" else field.contents()
            sub_type = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(key, value, field.types[0], sub_type=sub_type)
        for tensor in reader.tensors:
            if kept(tensor.name):
                writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    return write_atomically(out, write)
