"""Bring your own models: ``report``, ``bench``, ``alpha`` and ``profile`` on a tiny random GPT-2 pair with a
word-level tokenizer of its own, saved to temporary directories, measured on held-out text given with
``--text``; the shipped models on a text file; bad text files and mismatched tokenizers refused in one line."""

import json

import pytest
import torch

from cli import main
from decoders.bench.report.pair import AUDIT_PROMPT_TOKENS

transformers = pytest.importorskip("transformers")

WORDS = ("the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "and", "then", "slept", ".")


def held_out_text(words: int, seed: int) -> str:
    generator = torch.Generator().manual_seed(seed)
    return " ".join(WORDS[i] for i in torch.randint(0, len(WORDS), (words,), generator=generator).tolist())


def word_tokenizer():
    """Whitespace-split words, one id each (not the corpus's characters)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    core = Tokenizer(models.WordLevel({"<unk>": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")


def save_tiny(path, seed, layers, context):
    torch.manual_seed(seed)  # initialisation of a throwaway model
    config = transformers.GPT2Config(
        vocab_size=len(WORDS) + 1,
        n_positions=context,
        n_embd=16,
        n_layer=layers,
        n_head=2,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    word_tokenizer().save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    text = root / "held_out.txt"
    text.write_text(held_out_text(2000, 0), encoding="utf-8")
    return save_tiny(root / "target", 0, 2, 256), save_tiny(root / "draft", 1, 1, 200), str(text)


SMALL = ["--prompts", "1", "--max-new-tokens", "12", "--repeats", "1", "--warmup", "0"]


def test_report_on_a_tiny_random_pair_with_its_own_tokenizer(capsys, own, tmp_path):
    """report end to end: windows as long as the shorter context (the draft's 200 words), prompts and the audit's prompt
    from the words of --text; the audit of our decoder through the adapter passes."""
    target, draft, text = own
    argv = [
        "report",
        "--target",
        target,
        "--draft",
        draft,
        "--text",
        text,
        "--out",
        str(tmp_path / "report"),
        "--temperatures",
        "0",
        "1",
        "--gammas",
        "1",
        "2",
        "--windows",
        "2",
        "--audit-n",
        "300",
        *SMALL,
    ]
    assert main(argv) == 0, capsys.readouterr().err
    document = json.loads((tmp_path / "report" / "report.json").read_text())
    assert document["text"] == text and document["alpha_text"][0]["length"] == 200
    assert document["audit"]["passed"] and document["audit"]["prompt"] is None
    assert len(document["audit"]["prompt_ids"]) == AUDIT_PROMPT_TOKENS  # the end of the first benchmark prompt
    assert [row["gamma"] for row in document["bench"]["rows"]] == [1, 2, 1, 2]
    assert "held-out windows of 200 tokens of " + text in (tmp_path / "report" / "report.md").read_text()


def test_bench_alpha_and_profile_on_a_tiny_random_pair_with_its_own_tokenizer(capsys, own, tmp_path):
    target, draft, text = own
    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--target",
                target,
                "--draft",
                draft,
                "--text",
                text,
                "--gammas",
                "2",
                "--temperatures",
                "0",
                "--batch-sizes",
                "--hf",
                "--out",
                str(out),
                *SMALL,
            ]
        )
        == 0
    ), capsys.readouterr().err
    document = json.loads(out.read_text())
    assert document["text"] == text and document["hf"]["native"] is False
    assert document["hf"]["rows"][0]["greedy_outputs_agree"] is True  # generate, assisted and the adapter agree
    assert (
        main(
            [
                "alpha",
                "--target",
                target,
                "--drafts",
                draft,
                "--text",
                text,
                "--windows",
                "2",
                "--prompts",
                "1",
                "--temperatures",
                "1",
                "--gamma",
                "2",
            ]
        )
        == 0
    )
    assert f"| {draft} | 1 |" in capsys.readouterr().out
    assert main(["profile", "--target", target, "--draft", draft, "--text", text, "--gamma-max", "2", *SMALL]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == text


@pytest.mark.parametrize("command", ["report", "bench", "alpha", "profile"])
def test_mismatched_pairs_and_bad_text_refused(capsys, own, tmp_path, command):
    """Each command refuses, in one line and before measuring: a shipped draft beside a model with its own tokenizer
    (the tokenizers differ), with and without --text, and unreadable, non-UTF-8, blank or too short text."""
    target, draft, text = own
    drafts = "--drafts" if command == "alpha" else "--draft"
    binary, blank, short = tmp_path / "latin1.txt", tmp_path / "blank.txt", tmp_path / "short.txt"
    binary.write_bytes("café".encode("latin-1"))
    blank.write_text("  \n", encoding="utf-8")
    short.write_text("the cat sat", encoding="utf-8")
    cases = {
        "tokenizers differ": [target, drafts, "bigram", "--text", text],
        "for draft 'transformer'; bench, report and audit verify a draft with another tokenizer across vocabularies "
        "with --cross-vocabulary {slem,tli,slrs}": [target, drafts, "transformer"],
        "cannot be read": [target, drafts, draft, "--text", str(tmp_path / "absent.txt")],
        "is not UTF-8 text (byte 3 is 0xe9)": [target, drafts, draft, "--text", str(binary)],
        "holds no text": [target, drafts, draft, "--text", str(blank)],
        "the held-out text has 3 tokens": [target, drafts, draft, "--text", str(short)],
    }
    if command == "report":
        extra = ["--out", str(tmp_path / "report")]
    else:
        extra = []
    for message, argv in cases.items():
        assert main([command, "--target", *argv, *extra]) == 2, message
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error


def test_shipped_pair_on_a_text_file(capsys, tmp_path):
    """--text with the shipped models: the file's characters are the corpus's ids (others are <other>)."""
    text = tmp_path / "code.py"
    text.write_text("def add(a, b):\n    return a + b  # é\n" * 40, encoding="utf-8")
    assert (
        main(
            [
                "alpha",
                "--drafts",
                "bigram",
                "--text",
                str(text),
                "--windows",
                "2",
                "--prompts",
                "1",
                "--temperatures",
                "1",
                "--gamma",
                "2",
                "--out",
                str(tmp_path / "alpha.json"),
            ]
        )
        == 0
    )
    document = json.loads((tmp_path / "alpha.json").read_text())
    assert document["text"] == str(text) and document["estimates"][0]["alpha_text"] > 0.3  # repetitive text


def test_audit_prompt_from_text(capsys, own, tmp_path):
    """audit --text: the prompt is a seeded 64-word window of the file, tokenized by the pair's tokenizer; our
    decoder through the adapter passes; --text beside another prompt, or with tiny models, is refused."""
    target, draft, text = own
    assert (
        main(["audit", "--target", target, "--draft", draft, "--text", text, "--n", "300", "--horizon", "2", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["passed"]
    for argv, message in (
        (["--target", target, "--text", text, "--prompt-text", "the cat"], "give one of --prompt"),
        (["--text", text], "--text goes with --target shipped or a model directory"),
    ):
        assert main(["audit", *argv]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error
