"""The shipped models: they load by name without unpickling, fit the size budget and decode exactly."""

import hashlib
import json

import pytest
import torch

from decoders.harness import zoo
from decoders.autoregressive import generate_autoregressive
from decoders.blockwise import generate_blockwise
from decoders.harness.corpus import VOCAB_SIZE, load_corpus
from decoders.harness.alpha import text_windows
from decoders.randomness import seeded
from decoders.sampling import GREEDY
from decoders.speculative import SpeculativeConfig, generate_speculative

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
