"""``spectheory audit --sampler hf-generate|hf-assisted``: transformers' own sampling, audited as a black box on
tiny random GPT-2 pairs saved to temporary directories. Its assisted generation passes; a planted replica of
the greedy-assistant bug (the assistant drafts greedily while the accept test uses its soft probabilities)
fails. Fixed seeds; a correct sampler fails with probability 0.01 (the level)."""

import contextlib
import copy
import json

import pytest
import torch

from cli import main

transformers = pytest.importorskip("transformers")


def save_tiny(path, seed):
    from decoders.models.corpus import character_tokenizer

    torch.manual_seed(seed)  # initialisation of a throwaway model
    config = transformers.GPT2Config(
        vocab_size=98,
        n_positions=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 0.5)  # tied: peaked enough that greedy and sampled drafts differ
    model.save_pretrained(path)
    character_tokenizer().save_pretrained(path)
    return str(path)


@contextlib.contextmanager
def greedy_assistant():
    """The bug, replicated: the assistant's candidates are drawn greedily, its scores still used as q."""
    from transformers.generation.candidate_generator import AssistedCandidateGenerator

    original = AssistedCandidateGenerator._prepare_generation_args

    def greedy(self, *args, **kwargs):
        arguments = original(self, *args, **kwargs)
        config = copy.deepcopy(arguments["generation_config"])
        config.do_sample = False
        return dict(arguments, generation_config=config)

    AssistedCandidateGenerator._prepare_generation_args = greedy
    try:
        yield
    finally:
        AssistedCandidateGenerator._prepare_generation_args = original


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-pair")
    return save_tiny(root / "target", 0), save_tiny(root / "draft", 1)


def audit(capsys, pair, *extra, n: int = 400, horizon: int = 3):
    """The CLI's audit of a sampler on ``pair`` at n samples of ``horizon`` tokens (n = 400, T = 3: the stop test's
    planted bug fails at p 3.5e-6; the greedy assistant is caught by the joint test of the first token, which needs
    n >= 5 x 98: at n = 800, T = 2, p 1.8e-25, at n = 400, T = 3, 0.02)."""
    target, draft = pair
    status = main(
        [
            "audit",
            "--target",
            target,
            "--draft",
            draft,
            "--prompt",
            "5",
            "6",
            "--horizon",
            str(horizon),
            "--n",
            str(n),
            "--json",
            *extra,
        ]
    )
    return status, json.loads(capsys.readouterr().out)


def test_hf_assisted_generation_against_the_greedy_assistant_bug(capsys, pair):
    status, document = audit(capsys, pair, "--sampler", "hf-assisted", "--assistant-tokens", "3", n=800, horizon=2)
    assert status == 0 and document["passed"], document["test_p_values"]
    assert "hf-assisted, 3 assistant tokens, constant schedule" in document["decoder"]
    with greedy_assistant():
        status, document = audit(capsys, pair, "--sampler", "hf-assisted", "--assistant-tokens", "3", n=800, horizon=2)
    assert status == 1 and document["p_value"] < 1e-4


def test_hf_generate_sampling_against_target(capsys, pair):
    status, document = audit(capsys, pair, "--sampler", "hf-generate", "--temperature", "0.7")
    assert status == 0 and document["passed"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--sampler", "hf-assisted"], "audits transformers' generate on a model directory"),
        (["--sampler", "nope"], "invalid choice"),
    ],
)
def test_hf_sampler_flags_exit_2(capsys, argv, fragment):
    assert main(["audit", *argv]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and fragment in error, error


@contextlib.contextmanager
def stop_token_banned():
    """A sampler that never emits its stop token before max_new_tokens (transformers' min_new_tokens suppresses
    eos_token_id): the law before the stop changes."""
    original = transformers.GenerationMixin.generate

    def banning(self, *args, **kwargs):
        return original(self, *args, **dict(kwargs, min_new_tokens=kwargs["max_new_tokens"]))

    transformers.GenerationMixin.generate = banning
    try:
        yield
    finally:
        transformers.GenerationMixin.generate = original


def test_hf_generate_with_stop_against_a_sampler_banning_it(capsys, pair):
    """--stop reaches generate as eos_token_id: rows end there and pass against the stopped law (T = 3, where the
    tiny model emits the stop token 6 right after the prompt with probability 0.13); a sampler that bans the stop
    token until max_new_tokens (min_new_tokens) fails."""
    status, document = audit(capsys, pair, "--sampler", "hf-generate", "--temperature", "3", "--stop", "6")
    assert status == 0 and document["passed"], document["test_p_values"]
    with stop_token_banned():
        status, document = audit(capsys, pair, "--sampler", "hf-generate", "--temperature", "3", "--stop", "6")
    assert status == 1 and document["p_value"] < 1e-4, document["test_p_values"]
