"""The stdlib corpus: deterministic, split by file, encoded and decoded without loss on ASCII."""

import numpy as np
import pytest

from decoders.models.corpus import OTHER, VOCAB_SIZE, decode, encode, load_corpus, stdlib_files


def write_tree(root):
    (root / "pkg").mkdir()
    (root / "test").mkdir()
    for i in range(40):
        (root / "pkg" / f"module_{i}.py").write_text(f"def f{i}(x):\n\treturn x + {i}  # caf\u00e9\n")
    (root / "test" / "test_x.py").write_text("excluded\n")
    return root


def test_encode_decode_round_trip_and_other():
    text = "def f(x):\n\treturn x ~ 1\n"
    assert decode(encode(text)) == text
    assert encode("\u00e9\x00\x7f").tolist() == [OTHER] * 3 and VOCAB_SIZE == 98
    assert encode(text).max() < OTHER


def test_corpus_split_against_its_files(tmp_path):
    root = write_tree(tmp_path)
    files = stdlib_files(root)
    assert len(files) == 40 and all(path.parts[0] == "pkg" for path in files)  # test suites excluded
    corpus = load_corpus(root)
    assert set(corpus.train_files).isdisjoint(corpus.held_out_files)
    assert len(corpus.train_files) + len(corpus.held_out_files) == 40 and corpus.held_out_files
    assert len(corpus.train) == sum(len((root / name).read_text()) + 2 for name in corpus.train_files)
    again = load_corpus(root)
    assert again.fingerprint == corpus.fingerprint and np.array_equal(again.held_out, corpus.held_out)
    assert len(load_corpus(root, max_characters=100).train) == 100


def test_stdlib_corpus_is_there_and_deterministic():
    first, second = load_corpus(max_characters=200_000), load_corpus(max_characters=200_000)
    assert len(first.train) == 200_000 and len(first.held_out) > 0
    assert first.fingerprint == second.fingerprint
    assert (first.train == OTHER).mean() < 0.01  # Python source is almost all ASCII


def test_bad_root_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="root must be a directory"):
        stdlib_files(tmp_path / "missing")
