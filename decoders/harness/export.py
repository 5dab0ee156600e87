"""The shipped pair as Hugging Face model directories (``spectheory export-hf``), so that every Hugging Face
path (``generate``, assisted generation, the adapter, any engine that reads such a directory) can run it.

Each TinyGPT becomes a ``GPT2LMHeadModel`` with identical logits (``decoders.models.hf.tinygpt_to_gpt2``),
saved beside a character-level tokenizer built with the ``tokenizers`` library: one token per character,
the ids of ``decoders.harness.corpus.encode`` (every character outside the corpus's vocabulary is ``OTHER``).
Nothing is downloaded; the directories load with ``local_files_only=True``.
"""

from __future__ import annotations

from pathlib import Path

from decoders.harness import zoo
from decoders.harness.corpus import OTHER, VOCABULARY
from spectheory.outputs import staged_directory

__all__ = ["EXPORTABLE", "OTHER_TOKEN", "character_tokenizer", "export_hf"]

#: The shipped transformers that have a GPT-2 form: the target and the TinyGPT drafts.
EXPORTABLE = ("target", "transformer", "distilled")
OTHER_TOKEN = "<other>"  # the token of every character outside the vocabulary (a name no character has)


def character_tokenizer():
    """A ``PreTrainedTokenizerFast`` mapping each character to its corpus id, and ids back to text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {character: index for index, character in enumerate(VOCABULARY)}
    vocabulary[OTHER_TOKEN] = OTHER
    core = Tokenizer(models.WordLevel(vocabulary, unk_token=OTHER_TOKEN))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    core.decoder = decoders.Fuse()  # joined back without separators
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=OTHER_TOKEN)


def export_hf(out, names=("target", "transformer")) -> list[Path]:
    """Write ``out/<name>`` for each shipped model of ``names`` (``EXPORTABLE``); the directory is replaced as
    a whole once all of them are written. Returns the model directories."""
    from decoders.models.hf import tinygpt_to_gpt2

    unknown = [name for name in names if name not in EXPORTABLE]
    if unknown or not names:
        raise ValueError(f"models must be among {EXPORTABLE}, got {list(names)}")
    tokenizer = character_tokenizer()
    with staged_directory(out) as stage:
        for name in names:
            model = zoo.load_target() if name == "target" else zoo.load_draft(name)
            tinygpt_to_gpt2(model).save_pretrained(stage / name)
            tokenizer.save_pretrained(stage / name)
    return [Path(out) / name for name in names]
