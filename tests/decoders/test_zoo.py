"""The shipped models: they load by name without unpickling, fit the size budget and decode exactly."""

import hashlib

import numpy as np
import pytest
import torch

from decoders import zoo
from decoders.autoregressive import generate_autoregressive
from decoders.bench.prompts import text_windows
from decoders.blockwise import generate_blockwise
from decoders.drafts import SHIPPED, DraftContext, build_draft, draft_names
from decoders.models.corpus import VOCAB_SIZE, load_corpus
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
    for name in draft_names(SHIPPED):
        assert build_draft(name, DraftContext()).vocab_size == VOCAB_SIZE
    assert zoo.load_blockwise().heads == zoo.HEADS.heads
    target_parameters = sum(p.numel() for p in target.parameters())
    for name in ("transformer", "distilled"):
        draft_parameters = sum(p.numel() for p in zoo.load_draft(name).parameters())
        assert target_parameters >= 10 * draft_parameters  # the issue: a draft at least 10x smaller
    with pytest.raises(ValueError, match="draft must be one of transformer, distilled, bigram, unigram, copy, "):
        build_draft("nope", DraftContext(), offered=SHIPPED)


def test_zoo_files_against_manifest_and_budget():
    book = zoo.manifest()
    assert set(book) == {"target", "transformer", "distilled", "heads", "unigram", "bigram", zoo.REAL_DRAFT_NAME}
    assert book[zoo.REAL_DRAFT_NAME]["bytes"] < 16_000_000  # the real-model issue's limit for its draft
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


def _spoiled(entries: dict, how: str) -> dict:
    """A copy of a zoo file's ``entries`` broken in one way."""
    entries = {key: dict(value) if isinstance(value, dict) else value for key, value in entries.items()}
    if how == "extra config key":
        entries["config"]["extra"] = 1
    elif how == "config not a dict":
        entries["config"] = [1, 2]
    elif how == "no vocab_size":
        del entries["config"]["vocab_size"]
    elif how == "bad config value":
        entries["config"]["n_head"] = 3
    elif how == "wrong shape":
        entries["weights"]["embed.weight"] = entries["weights"]["embed.weight"][:, :5]
    elif how == "missing weight":
        del entries["weights"]["norm.bias"]
    elif how == "weights not a dict":
        entries["weights"] = 3
    elif how == "NaN weights":
        entries["weights"]["blocks.0.qkv.weight"] = torch.full_like(
            entries["weights"]["blocks.0.qkv.weight"], torch.nan
        )
    elif how == "NaN table":
        entries["table"] = torch.full_like(entries["table"], torch.nan)
    elif how == "order not an int":
        entries["order"] = "1"
    elif how == "table of another shape":
        entries["table"] = entries["table"][:3]
    elif how == "neither model":
        entries = {"payload": torch.zeros(1)}
    return entries


@pytest.mark.parametrize(
    "source, how, fragment",
    [
        ("transformer", "extra config key", "config has unknown keys ['extra']"),
        ("transformer", "config not a dict", "config must be a dictionary of ('vocab_size'"),
        ("transformer", "no vocab_size", "config lacks vocab_size"),
        ("transformer", "bad config value", "d_model must be divisible by n_head, got 128 and 3"),
        ("transformer", "wrong shape", "size mismatch for embed.weight"),
        ("transformer", "missing weight", 'Missing key(s) in state_dict: "norm.bias"'),
        ("transformer", "weights not a dict", "weights must be a dictionary of tensors"),
        (
            "transformer",
            "NaN weights",
            "weights must be finite, 1 tensors hold NaN or infinity (first 'blocks.0.qkv.weight')",
        ),
        ("bigram", "NaN table", "table must not contain NaN logits"),
        ("bigram", "order not an int", "order must be an integer in [0, 3], got '1'"),
        ("bigram", "table of another shape", "table must have shape (V^order, V) = (98, 98), got (3, 98)"),
        ("bigram", "neither model", "a model file holds a TinyGPT (config, weights) or an n-gram table"),
    ],
)
def test_malformed_model_files_raise_value_errors(tmp_path, source, how, fragment):
    """Each way a model file can be malformed is one ValueError naming the file (they used to be TypeErrors,
    RuntimeErrors, or for NaN weights a model that ran and accepted nothing)."""
    path = tmp_path / "model.pt"
    torch.save(_spoiled(torch.load(zoo.ZOO / f"{source}.pt", weights_only=True), how), path)
    with pytest.raises(ValueError) as error:
        zoo.load_file(path)
    assert str(error.value).startswith(f"model file {str(path)!r}: ") and fragment in str(error.value)
    assert "\n" not in str(error.value)


def test_unreadable_model_files_raise_value_errors(tmp_path):
    (tmp_path / "truncated.pt").write_bytes((zoo.ZOO / "transformer.pt").read_bytes()[:5000])
    torch.save([1, 2], tmp_path / "list.pt")
    for name, fragment in (
        ("truncated.pt", "cannot be read"),
        ("list.pt", "holds a list, not a dictionary"),
        ("absent.pt", "does not exist"),
    ):
        with pytest.raises(ValueError, match=fragment):
            zoo.load_file(tmp_path / name)


@pytest.mark.parametrize("draft_name", ("transformer", "distilled", "bigram"))
def test_shipped_pair_greedy_speculative_against_autoregressive(target, prompts, draft_name):
    reference = generate_autoregressive(target, prompts, max_new_tokens=40, sampling=GREEDY, randomness=seeded(0))
    generation = generate_speculative(
        target,
        zoo.load_draft(draft_name),
        prompts,
        max_new_tokens=40,
        config=SpeculativeConfig(4, GREEDY),
        randomness=seeded(0),
    )
    assert generation.tokens == reference.tokens


def test_shipped_heads_exact_blockwise_against_greedy_target(target, prompts):
    reference = generate_autoregressive(target, prompts, max_new_tokens=40, sampling=GREEDY, randomness=seeded(0))
    generation = generate_blockwise(zoo.load_blockwise(), prompts, max_new_tokens=40)
    assert generation.tokens == reference.tokens
    assert generation.stats.mean_accepted_tokens_per_iteration > 0.5  # trained heads propose useful blocks


def test_real_draft_against_its_tokenizer(tmp_path):
    """The draft in a real model's tokenizer loads only for a target with that tokenizer (its file records the
    fingerprint); target_samples keeps ids above 255."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models

    from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
    from decoders.sampling import Sampling
    from decoders.training import target_samples

    def tokenizer(words):
        core = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token=words[0]))
        return transformers.PreTrainedTokenizerFast(tokenizer_object=core, unk_token=words[0])

    ours, other = tokenizer([f"w{i}" for i in range(300)]), tokenizer([f"v{i}" for i in range(300)])
    assert zoo.tokenizer_fingerprint(ours) == zoo.tokenizer_fingerprint(tokenizer([f"w{i}" for i in range(300)]))
    assert zoo.tokenizer_fingerprint(ours) != zoo.tokenizer_fingerprint(other)
    model = TinyGPT(TinyGPTConfig(300, d_model=8, n_layer=1, n_head=2, max_context=32)).eval()
    torch.save(
        {
            "config": model.config.as_dict(),
            "weights": model.state_dict(),
            "tokenizer_fingerprint": zoo.tokenizer_fingerprint(ours),
        },
        tmp_path / f"{zoo.REAL_DRAFT_NAME}.pt",
    )
    loaded = zoo.real_draft(ours, "cpu", torch.float32, zoo=tmp_path)
    assert loaded.vocab_size == 300
    for tokenizer in (other, None):
        with pytest.raises(
            ValueError, match=f"draft '{zoo.REAL_DRAFT_NAME}' reads smollm2's tokens: use it with --target smollm2"
        ):
            zoo.real_draft(tokenizer, "cpu", torch.float32, zoo=tmp_path)
    stream = np.arange(260, 300).repeat(3)
    samples = target_samples(model, stream, count=2, length=8, prompt_length=4, sampling=Sampling(1.0), seed=0)
    assert samples.dtype == np.int32 and samples[:, :4].min() >= 260
