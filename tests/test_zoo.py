"""The shipped models: they load by name without unpickling, fit the size budget, decode exactly, and the
CLI commands built on them (train, alpha, bench, audit) write what they say."""

import hashlib
import json

import pytest
import torch

from decoders import zoo
from decoders.autoregressive import generate_autoregressive
from decoders.blockwise import generate_blockwise
from decoders.corpus import VOCAB_SIZE, load_corpus
from decoders.measure import text_windows
from decoders.random import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative
from spectheory.cli import ZOO_DRAFTS, ZOO_TRAINABLE, main

BUDGET_BYTES = 20_000_000  # the limit for everything shipped


@pytest.fixture(scope="module")
def target():
    return zoo.load_target()


@pytest.fixture(scope="module")
def prompts():
    return text_windows(load_corpus().held_out, 3, 48, seed=5)


def test_every_shipped_model_loads_by_name(target):
    assert target.vocab_size == VOCAB_SIZE and target.config == zoo.TARGET.model
    for name in zoo.DRAFTS:
        assert zoo.load_draft(name).vocab_size == VOCAB_SIZE
    assert zoo.load_blockwise().heads == zoo.HEADS.heads
    target_parameters = sum(p.numel() for p in target.parameters())
    for name in ("transformer", "distilled"):
        draft_parameters = sum(p.numel() for p in zoo.load_draft(name).parameters())
        assert target_parameters >= 10 * draft_parameters  # the issue: a draft at least 10x smaller
    with pytest.raises(ValueError, match="draft must be one of"):
        zoo.load_draft("nope")


def test_zoo_files_against_manifest_and_budget():
    book = zoo.manifest()
    assert set(book) == {"target", "transformer", "distilled", "heads", "unigram", "bigram"}
    total = 0
    for name, entry in book.items():
        data = (zoo.ZOO / entry["file"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"], name
        total += len(data)
    assert total <= BUDGET_BYTES
    assert book["target"]["steps"] == zoo.TARGET.steps and book["target"]["corpus_fingerprint"]


def test_zoo_refuses_pickled_objects(tmp_path):
    """Loading goes through torch.load(weights_only=True): a file carrying an arbitrary object is refused."""
    torch.save({"config": zoo.TARGET.model.as_dict(), "weights": {}, "payload": seeded}, tmp_path / "target.pt")
    with pytest.raises(Exception, match="(?i)weights_only|unpickl"):
        zoo.load_target(zoo=tmp_path)
    with pytest.raises(ValueError, match="no shipped model 'transformer'"):
        zoo.load_draft("transformer", zoo=tmp_path)


@pytest.mark.parametrize("draft_name", ("transformer", "distilled", "bigram"))
def test_shipped_pair_greedy_speculative_against_autoregressive(target, prompts, draft_name):
    reference = generate_autoregressive(target, prompts, max_new_tokens=40, sampling=GREEDY, randomness=seeded(0))
    generation = generate_speculative(target, zoo.load_draft(draft_name), prompts, max_new_tokens=40,
                                      config=SpeculativeConfig(4, GREEDY), randomness=seeded(0))
    assert generation.tokens == reference.tokens


def test_shipped_heads_exact_blockwise_against_greedy_target(target, prompts):
    reference = generate_autoregressive(target, prompts, max_new_tokens=40, sampling=GREEDY, randomness=seeded(0))
    generation = generate_blockwise(zoo.load_blockwise(), prompts, max_new_tokens=40)
    assert generation.tokens == reference.tokens
    assert generation.stats.mean_accepted_tokens_per_iteration > 0.5  # trained heads propose useful blocks


def test_train_ngrams_reproduces_the_shipped_tables(tmp_path, capsys):
    assert main(["train", "ngrams", "--work", str(tmp_path / "work"), "--zoo", str(tmp_path)]) == 0
    assert "bigram:" in capsys.readouterr().out
    for name in ("unigram", "bigram"):
        assert torch.equal(zoo.load_draft(name, zoo=tmp_path).table, zoo.load_draft(name).table)


def test_alpha_cli_writes_json_and_markdown(tmp_path, capsys):
    out, table = tmp_path / "alpha.json", tmp_path / "alpha.md"
    status = main(["alpha", "--drafts", "bigram", "random", "--temperatures", "0", "--windows", "2", "--prompts", "2",
                   "--out", str(out), "--markdown", str(table)])
    assert status == 0
    document = json.loads(out.read_text())
    assert [e["draft"] for e in document["estimates"]] == ["bigram", "random"]
    assert document["command"].startswith("spectheory alpha")
    assert table.read_text() == capsys.readouterr().out
    assert document["estimates"][0]["alpha_text"] > document["estimates"][1]["alpha_text"]  # bigram beats uniform


def test_bench_cli_writes_its_settings(tmp_path, capsys):
    out = tmp_path / "bench.json"
    status = main(["bench", "--gammas", "2", "--temperatures", "0", "--prompts", "1", "--max-new-tokens", "8",
                   "--repeats", "1", "--warmup", "0", "--out", str(out)])
    assert status == 0 and "best gamma 2" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["settings"]["gammas"] == [2] and document["settings"]["repeats"] == 1
    assert document["environment"]["device"] == "cpu" and document["draft"] == "transformer"
    assert document["rows"][0]["tokens_per_iteration"] >= 1 and document["command"].startswith("spectheory bench")


def test_audit_cli_passes_on_the_shipped_pair(capsys):
    """A small statistical audit of the shipped pair at T = 1 (false-positive probability 0.01)."""
    status = main(["audit", "--target", "shipped", "--n", "1000", "--horizon", "3", "--seed", "1"])
    out = capsys.readouterr().out
    assert status == 0 and "PASS" in out and "draft transformer" in out


@pytest.mark.parametrize("argv, fragment", [
    (["audit", "--target", "shipped", "--exact"], "--exact enumerates tiny models only"),
    (["audit", "--prompt-text", "x"], "--prompt-text goes with --target shipped"),
    (["audit", "--target", "shipped", "--draft", "nope"], "draft must be one of"),
    (["bench", "--draft", "bigram", "--hf"], "--hf needs a transformer draft"),
    (["bench", "--repeats", "0"], "repeats must be a positive integer"),
    (["alpha", "--windows", "0"], "windows must be a positive integer"),
    (["train", "nope"], "invalid choice"),
])
def test_zoo_cli_bad_arguments_exit_2_with_one_line(capsys, argv, fragment):
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert fragment in error and error.count("\n") == 1


def test_cli_name_lists_against_the_zoo():
    assert ZOO_DRAFTS == ", ".join(zoo.DRAFTS) and ZOO_TRAINABLE == zoo.TRAINABLE
