"""``spectheory export-hf``: the shipped pair as Hugging Face directories that reproduce the TinyGPTs' logits and
the corpus's character ids, and audit through the adapter; hub ids and other tokenizers refused in one line."""

import json

import numpy as np
import pytest
import torch

from cli import main
from decoders import zoo
from decoders.models.corpus import encode
from decoders.models.hf import load_directory

transformers = pytest.importorskip("transformers")

TEXT = "def f(x):\n\treturn x + 1  # café"  # "é" is outside the corpus's characters


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "pair"
    assert main(["export-hf", "--out", str(out)]) == 0
    return out


def test_exported_pair_against_tinygpt_logits_and_corpus_ids(exported):
    model, tokenizer = load_directory(exported / "target")
    ids = tokenizer(TEXT)["input_ids"]
    assert ids == encode(TEXT).tolist() and tokenizer.decode(ids[:20]) == TEXT[:20]
    tokens = torch.tensor([ids])
    with torch.no_grad():
        ours = zoo.load_target().logits_of_sequences(tokens)
        theirs = model.forward(tokens, model.new_state(1))
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)
    assert sorted(path.name for path in exported.iterdir()) == ["target", "transformer"]


def test_audit_of_our_decoder_on_the_exported_pair(capsys, exported):
    """Our speculative decoder through the Hugging Face adapter, audited statistically on the exported pair."""
    argv = [
        "audit",
        "--target",
        str(exported / "target"),
        "--draft",
        str(exported / "transformer"),
        "--n",
        "600",
        "--horizon",
        "2",
        "--prompt-text",
        "import ",
        "--json",
    ]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["passed"] and document["n"] == 600


def test_pairs_with_other_tokenizers_and_missing_directories_refused(capsys, exported, tmp_path):
    other = tmp_path / "other"
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=98, n_positions=32, n_embd=8, n_layer=1, n_head=2)
    )
    model.save_pretrained(other)
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported / "target", local_files_only=True)
    vocabulary = tokenizer.get_vocab()
    swapped = {**vocabulary, "a": vocabulary["b"], "b": vocabulary["a"]}
    from tokenizers import Tokenizer, models

    transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(swapped, unk_token="<other>")), unk_token="<other>"
    ).save_pretrained(other)
    capsys.readouterr()  # what saving printed
    assert main(["audit", "--target", str(exported / "target"), "--draft", str(other), "--n", "100"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "tokenizers differ: 'a' is id" in error
    for target in ("gpt2", str(tmp_path / "absent")):
        assert main(["audit", "--target", target]) == 2
        assert "nothing is downloaded" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is not a Hugging Face model directory"):
        load_directory(tmp_path)
    assert np.array_equal(encode("é"), [97])


@pytest.mark.slow  # the report end to end: test_report_command.py; the exported pair's audit: above
def test_report_and_profile_on_the_exported_pair(capsys, exported, tmp_path):
    """report and profile take the exported directories as --target/--draft, end to end, on the shipped
    held-out text and on a text file (--text); a directory with a tokenizer of its own beside a shipped draft is
    refused in one line."""
    small = ["--prompts", "1", "--max-new-tokens", "8", "--repeats", "1", "--warmup", "0"]
    text = tmp_path / "held_out.py"
    text.write_text(TEXT * 20, encoding="utf-8")
    argv = [
        "report",
        "--target",
        str(exported / "target"),
        "--draft",
        str(exported / "transformer"),
        "--temperatures",
        "1",
        "--gammas",
        "1",
        "2",
        "--windows",
        "2",
        "--audit-n",
        "200",
    ]
    for out, extra in (("report", []), ("report-text", ["--text", str(text)])):
        assert main(argv + small + extra + ["--out", str(tmp_path / out)]) == 0
        document = json.loads((tmp_path / out / "report.json").read_text())
        assert document["audit"]["passed"] and [row["gamma"] for row in document["bench"]["rows"]] == [1, 2]
        assert document["text"] == (str(text) if extra else "the shipped corpus's held-out split")
    audited = document["audit"]["prompt_ids"]  # the text's first benchmark prompt, a window of its ids
    ids = encode(text.read_text(encoding="utf-8")).tolist()
    assert document["audit"]["prompt"] is None and 97 in ids
    assert any(ids[i : i + len(audited)] == audited for i in range(len(ids)))
    capsys.readouterr()
    assert (
        main(
            [
                "profile",
                "--target",
                str(exported / "target"),
                "--draft",
                str(exported / "transformer"),
                "--gamma-max",
                "2",
                *small,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["profile"]["t_step"] > 0
    other = tmp_path / "own-tokenizer"
    transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=98, n_positions=32, n_embd=8, n_layer=1, n_head=2)
    ).save_pretrained(other)
    from tokenizers import Tokenizer, models

    transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0, "a": 1}, unk_token="<unk>")), unk_token="<unk>"
    ).save_pretrained(other)
    capsys.readouterr()
    assert main(["profile", "--target", str(other), *small]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "tokenizers differ" in error, error  # beside the default draft, a shipped one
