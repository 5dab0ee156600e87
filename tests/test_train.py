"""Training: the loss falls, resuming from a checkpoint equals training straight through, bad settings raise."""

import numpy as np
import pytest
import torch

from decoders.corpus import VOCAB_SIZE, Corpus, encode
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.train import TrainConfig, load_checkpoint, train_language_model

TEXT = "def add(x, y):\n    return x + y\n\n" * 200


def small_corpus():
    stream = encode(TEXT)
    return Corpus(stream, stream[:2000].copy(), ("a.py",), ("b.py",), "test")


def config(steps):
    model = TinyGPTConfig(VOCAB_SIZE, d_model=16, n_layer=1, n_head=2, max_context=32)
    return TrainConfig(model, steps=steps, batch_size=8, context=16, learning_rate=1e-2, warmup_steps=5, eval_every=10,
                       eval_batches=2)


def test_training_loss_falls_against_uniform_baseline():
    model, result = train_language_model(config(100), small_corpus(), progress=False)
    assert result.steps == 100 and len(result.held_out_losses) == 10
    assert result.held_out_losses[0][1] > result.held_out_losses[-1][1]
    assert result.held_out_losses[-1][1] < 0.5 * np.log(VOCAB_SIZE)  # a repetitive text is easy to learn


def test_bad_training_settings_raise_value_errors():
    with pytest.raises(ValueError, match="steps must"):
        config(0)
    with pytest.raises(ValueError, match="context must be at most"):
        TrainConfig(TinyGPTConfig(VOCAB_SIZE, max_context=8), steps=1, context=16)


def test_resumed_training_against_straight_through(tmp_path):
    path = tmp_path / "model.pt"
    straight, _ = train_language_model(config(30), small_corpus(), progress=False)
    _, first = train_language_model(config(30), small_corpus(), checkpoint=path, progress=False, until=15)
    assert first.steps == 15
    resumed, result = train_language_model(config(30), small_corpus(), checkpoint=path, progress=False)
    assert result.steps == 30
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    loaded, entries = load_checkpoint(path)
    assert entries["step"] == 30 and torch.equal(loaded.embed.weight, straight.embed.weight)


def test_training_logits_against_cached_forward():
    model = TinyGPT(TinyGPTConfig(VOCAB_SIZE, d_model=32, n_layer=3, n_head=4, max_context=40)).eval()
    tokens = torch.randint(0, VOCAB_SIZE, (3, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(model.training_logits(tokens), model.logits_of_sequences(tokens), atol=1e-5)
