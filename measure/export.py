"""The shipped pair as Hugging Face model directories (``spectheory export-hf``), so that every Hugging Face
path (``generate``, assisted generation, the adapter, any engine that reads such a directory) can run it.

Each TinyGPT becomes a ``GPT2LMHeadModel`` with identical logits (``decoders.models.hf.tinygpt_to_gpt2``),
saved beside the corpus's character-level tokenizer (``decoders.models.corpus.character_tokenizer``).
Nothing is downloaded; the directories load with ``local_files_only=True``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from decoders.models import zoo
from decoders.models.corpus import character_tokenizer
from spectheory.outputs import staged_directory

__all__ = ["EXPORTABLE", "export_hf"]

#: The shipped transformers that have a GPT-2 form: the target and the TinyGPT drafts.
EXPORTABLE = ("target", "transformer", "distilled")
def export_hf(out, names=("target", "transformer")) -> list[Path]:
    """Write ``out/<name>`` for each shipped model of ``names`` (``EXPORTABLE``); the directory is replaced as
    a whole once all of them are written. Returns the model directories."""
    from decoders.models.hf import tinygpt_to_gpt2

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
