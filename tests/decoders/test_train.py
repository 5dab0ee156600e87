"""Training: the loss falls, resuming from a checkpoint equals training straight through, bad settings raise."""

import io

import numpy as np
import pytest
import torch

from decoders.models.corpus import VOCAB_SIZE, decode, encode
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.sampling import GREEDY
from decoders.training import (
    HeadsConfig,
    TrainConfig,
    _windows,
    load_checkpoint,
    target_samples,
    train_language_model,
    train_proposal_heads,
)

TEXT = "def add(x, y):\n    return x + y\n\n" * 200


def small_corpus():
    """(train, held_out) streams."""
    stream = encode(TEXT)
    return stream, stream[:2000].copy()


def config(steps):
    model = TinyGPTConfig(VOCAB_SIZE, d_model=16, n_layer=1, n_head=2, max_context=32)
    return TrainConfig(
        model, steps=steps, batch_size=8, context=16, learning_rate=1e-2, warmup_steps=5, eval_every=10, eval_batches=2
    )


def test_training_loss_falls_against_uniform_baseline():
    model, result = train_language_model(config(100), *small_corpus(), progress=False)
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
    straight, _ = train_language_model(config(30), *small_corpus(), progress=False)
    _, first = train_language_model(config(30), *small_corpus(), checkpoint=path, progress=False, until=15)
    assert first.steps == 15
    resumed, result = train_language_model(config(30), *small_corpus(), checkpoint=path, progress=False)
    assert result.steps == 30
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    loaded, entries = load_checkpoint(path)
    assert entries["step"] == 30 and torch.equal(loaded.embed.weight, straight.embed.weight)


def test_damaged_checkpoints_raise_value_errors(tmp_path):
    """A truncated checkpoint, or one with its entries missing, is one ValueError telling what to do."""
    path = tmp_path / "model.pt"
    train_language_model(config(30), *small_corpus(), checkpoint=path, progress=False, until=2)
    intact = path.read_bytes()
    path.write_bytes(intact[: len(intact) // 2])
    with pytest.raises(ValueError, match="checkpoint .* cannot be read"):
        train_language_model(config(30), *small_corpus(), checkpoint=path, progress=False)
    with pytest.raises(ValueError, match="checkpoint .* cannot be read"):
        load_checkpoint(path)
    state = torch.load(io.BytesIO(intact), weights_only=True)
    del state["optimizer"]
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"cannot be resumed \(KeyError: 'optimizer'\); delete it"):
        train_language_model(config(30), *small_corpus(), checkpoint=path, progress=False)


def test_training_logits_against_cached_forward():
    model = TinyGPT(TinyGPTConfig(VOCAB_SIZE, d_model=32, n_layer=3, n_head=4, max_context=40)).eval()
    tokens = torch.randint(0, VOCAB_SIZE, (3, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(model.training_logits(tokens), model.logits_of_sequences(tokens), atol=1e-5)


def test_sample_windows_never_cross_rows():
    rows = np.stack([np.full(9, r, dtype=np.uint8) for r in range(50)])  # row r holds only token r
    windows = _windows(rows, 400, 8, torch.Generator().manual_seed(0))
    assert windows.shape == (400, 9)
    assert bool((windows == windows[:, :1]).all())  # each window lies inside one row
    assert len(set(windows[:, 0].tolist())) > 40  # and the rows are drawn at random


def test_fine_tuning_starts_from_initial_weights():
    train, held_out = small_corpus()
    base, _ = train_language_model(config(100), train, held_out, progress=False)
    tuned, result = train_language_model(config(1), train, held_out, progress=False, initial=base)
    fresh, fresh_result = train_language_model(config(1), train, held_out, progress=False)
    assert result.held_out_losses[0][1] < 0.5 * fresh_result.held_out_losses[0][1]


def test_proposal_heads_learn_the_tokens_ahead():
    """On a periodic text, heads 2..k can predict exactly: their loss must fall far below log V."""
    train, held_out = small_corpus()
    base, _ = train_language_model(config(150), train, held_out, progress=False)
    before = [p.clone() for p in base.parameters()]
    heads_config = HeadsConfig(
        3,
        32,
        TrainConfig(
            base.config,
            steps=120,
            batch_size=8,
            context=16,
            learning_rate=1e-2,
            warmup_steps=5,
            eval_every=40,
            eval_batches=2,
        ),
    )
    model, result = train_proposal_heads(heads_config, base, train, held_out, progress=False)
    losses = [loss for _, loss in result.held_out_losses]
    assert losses[-1] < losses[0] and losses[-1] < 0.1 * np.log(VOCAB_SIZE)  # untrained heads: about log V
    assert all(torch.equal(a, b) for a, b in zip(before, base.parameters()))  # the base stays frozen
    with pytest.raises(ValueError, match="heads must be at least 2"):
        HeadsConfig(1, 32, heads_config.schedule)


def test_target_samples_continue_their_prompts():
    train, held_out = small_corpus()
    model, _ = train_language_model(config(100), train, held_out, progress=False)
    samples = target_samples(model, train, count=10, length=24, prompt_length=8, sampling=GREEDY, seed=0, batch_size=4)
    assert samples.shape == (10, 24) and samples.dtype == np.uint8
    text = decode(train)
    assert all(decode(row[:8]) in text for row in samples)  # prompts are windows of the stream
    with pytest.raises(ValueError, match="prompt_length"):
        target_samples(model, train, count=2, length=8, prompt_length=8, sampling=GREEDY, seed=0)
