"""The reference decoders against greedy autoregressive decoding, fresh forwards, and their error contract.

CUDA variants run only where a GPU is present. The sampled-law checks are chi-square tests with a
fixed seed; a correct decoder fails one with probability 1e-4.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats
from tiny_hf import tiny_hf_model

from decoders import _loop
from decoders.audit.mutants import mutant
from decoders.autoregressive import generate_autoregressive
from decoders.bench.profile import efficiency
from decoders.blockwise import BlockwiseConfig, BlockwiseGPT, generate_blockwise
from decoders.models.history import CopyDraft, NGramModel, TabularModel, UniformModel
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig
from decoders.randomness import TorchRandomness, seeded
from decoders.sampling import GREEDY, Sampling, adjusted_probs
from decoders.speculative import SpeculativeConfig, generate_speculative

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
VOCAB = 24
PROMPTS = [[1, 2, 3], [4], [5, 6, 7, 8, 9], [3, 3]]


def tiny_gpt(seed, d_model=32, n_layer=2, device="cpu"):
    torch.manual_seed(seed)  # model initialisation only; decoding draws through a Randomness
    config = TinyGPTConfig(vocab_size=VOCAB, d_model=d_model, n_layer=n_layer, n_head=4, max_context=96)
    return TinyGPT(config).eval().to(device)


def repetitive_corpus():
    return [[(3 * i + j) % VOCAB for i in range(40)] for j in range(5)]


def drafts(target):
    generator = torch.Generator().manual_seed(0)
    return {
        "transformer": tiny_gpt(1, d_model=16, n_layer=1, device=target.device),
        "unigram": NGramModel.fit(repetitive_corpus(), VOCAB, 1),
        "bigram": NGramModel.fit(repetitive_corpus(), VOCAB, 2),
        "copy": CopyDraft(VOCAB),
        "random": UniformModel(VOCAB),
        "tabular": TabularModel.random(generator, VOCAB, 2),
        "target itself": target,
    }


@pytest.fixture(scope="module")
def target():
    return tiny_gpt(0)


@pytest.fixture(scope="module")
def greedy_reference(target):
    return generate_autoregressive(target, PROMPTS, max_new_tokens=24, sampling=GREEDY, randomness=seeded(0))


@pytest.mark.parametrize("verifier", ("token", "block"))
@pytest.mark.parametrize("batch", (1, 4))
@pytest.mark.parametrize(
    "draft_name", ("transformer", "unigram", "bigram", "copy", "random", "tabular", "target itself")
)
def test_greedy_speculative_against_autoregressive(target, greedy_reference, draft_name, batch, verifier):
    draft = drafts(target)[draft_name]
    for gamma in range(1, 9):
        generation = generate_speculative(
            target,
            draft,
            PROMPTS[:batch],
            max_new_tokens=24,
            config=SpeculativeConfig(gamma, GREEDY, verifier=verifier),
            randomness=seeded(gamma),
        )
        assert generation.tokens == greedy_reference.tokens[:batch], (draft_name, gamma, verifier)


class _Widths:
    """A model whose forward calls record their widths (tokens per row); a prefill (``append``) records none."""

    def __init__(self, model):
        self.model, self.widths = model, []

    def forward(self, tokens, state, *args):
        self.widths.append(tokens.shape[1])
        return self.model.forward(tokens, state, *args)

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.mark.parametrize("batch", (1, 4))
def test_verify_width_follows_proposals_against_autoregressive(target, greedy_reference, batch):
    """The copy draft proposes only after a match: each verify call holds the longest row's proposals plus
    one (width 1 where no row proposed, an autoregressive step), the first one after the prompt but its last
    token (no call of its own: one target call per iteration), and the output is still greedy's."""
    watched = _Widths(target)
    generation = generate_speculative(
        watched,
        CopyDraft(VOCAB),
        PROMPTS[:batch],
        max_new_tokens=24,
        config=SpeculativeConfig(6, GREEDY),
        randomness=seeded(0),
    )
    assert generation.tokens == greedy_reference.tokens[:batch]
    proposed = generation.stats.proposed_per_iteration
    assert len(proposed) == generation.stats.iterations
    prompt_body = max(len(prompt) for prompt in PROMPTS[:batch]) - 1
    assert watched.widths == [prompt_body * (i == 0) + max(row) + 1 for i, row in enumerate(proposed)]
    assert batch > 1 or 0 in {max(row) for row in proposed}  # an iteration that proposed nothing
    full = generate_speculative(
        target,
        drafts(target)["transformer"],
        PROMPTS[:batch],
        max_new_tokens=24,
        config=SpeculativeConfig(6, GREEDY),
        randomness=seeded(0),
    )
    assert {n for row in full.stats.proposed_per_iteration for n in row} == {6}


@pytest.mark.parametrize("heads", (1, 2, 4, 8))
@pytest.mark.parametrize("batch", (1, 4))
def test_exact_blockwise_against_greedy_base(target, greedy_reference, heads, batch):
    model = BlockwiseGPT(target, heads).eval()
    generation = generate_blockwise(model, PROMPTS[:batch], max_new_tokens=24)
    assert generation.tokens == greedy_reference.tokens[:batch]
    assert generation.stats.target_calls == generation.stats.iterations + 1  # one call per iteration, after the first


def test_blockwise_approximate_criteria_and_minimum_block_size(target):
    model = BlockwiseGPT(target, 4).eval()
    exact = generate_blockwise(model, PROMPTS, max_new_tokens=24)
    loose = generate_blockwise(model, PROMPTS, max_new_tokens=24, config=BlockwiseConfig("top_k", top_k=VOCAB))
    assert loose.stats.mean_accepted_tokens_per_iteration == 3  # every proposal is in the full top-k
    forced = generate_blockwise(model, PROMPTS, max_new_tokens=24, config=BlockwiseConfig(min_block_size=3))
    assert all(n >= 2 for row in forced.stats.accepted_per_iteration for n in row)  # blocks of >= 3 tokens
    near = generate_blockwise(model, PROMPTS, max_new_tokens=24, config=BlockwiseConfig("distance", epsilon=VOCAB))
    assert near.stats.mean_accepted_tokens_per_iteration >= exact.stats.mean_accepted_tokens_per_iteration
    with pytest.raises(ValueError, match="min_block_size must be at most the block size 4"):
        generate_blockwise(model, PROMPTS, max_new_tokens=4, config=BlockwiseConfig(min_block_size=5))


def test_blockwise_with_fewer_heads_against_greedy_base(target, greedy_reference):
    """block_size k uses the first k heads: still the greedy output, and at most k tokens per iteration."""
    model = BlockwiseGPT(target, 4).eval()
    short = generate_blockwise(model, PROMPTS, max_new_tokens=24, config=BlockwiseConfig(block_size=2))
    assert short.tokens == greedy_reference.tokens
    loose = generate_blockwise(
        model, PROMPTS, max_new_tokens=24, config=BlockwiseConfig("top_k", top_k=VOCAB, block_size=2)
    )
    assert loose.stats.mean_accepted_tokens_per_iteration == 1  # blocks of exactly 2 tokens
    with pytest.raises(ValueError, match="block_size must be at most heads = 4, got 5"):
        generate_blockwise(model, PROMPTS, max_new_tokens=4, config=BlockwiseConfig(block_size=5))


def test_state_sized_to_its_sequences_against_full_context():
    """A TinyGPT state made for 12 tokens holds 13 slots per row (not the context's 97), gives the logits of
    a full-context state on a prefill and on a cached step, and refuses a 13th token."""
    model = tiny_gpt(2)
    tokens = torch.randint(0, VOCAB, (3, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        small, full = model.new_state(3, 12), model.new_state(3)
        assert small.keys.shape[3] == 13 and full.keys.shape[3] == model.max_context + 1
        torch.testing.assert_close(model.forward(tokens[:, :8], small), model.forward(tokens[:, :8], full))
        torch.testing.assert_close(model.forward(tokens[:, 8:], small), model.forward(tokens[:, 8:], full))
        with pytest.raises(ValueError, match="sequence length 13 exceeds the state's capacity of 12 tokens"):
            model.forward(tokens[:, :1], small)


def hugging_face(kind, attention="sdpa"):
    return tiny_hf_model(kind, attention, vocab=VOCAB)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model_name", ("tinygpt", "bigram", "tabular", "copy", "hf-gpt2", "hf-gpt2-eager", "hf-llama"))
def test_cache_rollback_against_fresh_forward(model_name, device):
    if model_name.startswith("hf-"):
        model = hugging_face(model_name.split("-")[1], "eager" if model_name.endswith("eager") else "sdpa")
        model.model.to(device)
    else:
        model = (
            tiny_gpt(2, device=device)
            if model_name == "tinygpt"
            else {
                "bigram": NGramModel.fit(repetitive_corpus(), VOCAB, 2),
                "tabular": TabularModel.random(torch.Generator().manual_seed(1), VOCAB, 3),
                "copy": CopyDraft(VOCAB),
            }[model_name]
        )
    tokens = torch.randint(0, VOCAB, (3, 12), generator=torch.Generator().manual_seed(3)).to(model.device)
    with torch.no_grad():
        fresh = model.forward(tokens, model.new_state(3))
        state = model.new_state(3)
        model.forward(tokens[:, :9], state)
        rejected = torch.randint(0, VOCAB, (3, 3), generator=torch.Generator().manual_seed(4))
        model.forward(rejected.to(model.device), state)  # tokens that get rejected
        model.truncate(state, torch.tensor([5, 7, 4], device=model.device))
        for b, length in enumerate((5, 7, 4)):  # each row re-runs from its own cut
            row_state = state.clone()
            again = model.forward(tokens[:, length : length + 3], row_state)
            torch.testing.assert_close(
                again[b].nan_to_num(neginf=-1e9),
                fresh[b, length : length + 3].nan_to_num(neginf=-1e9),
                atol=1e-5,
                rtol=0,
            )
        # ragged counts: each row appends its own number of tokens (the adapter's buffers grow from 4 slots)
        padded = model.new_state(3, 4 if model_name.startswith("hf-") else 12)
        model.forward(tokens[:, :6], padded, torch.tensor([6, 3, 5], device=model.device))
        model.forward(
            torch.stack([tokens[b, held : held + 6] for b, held in enumerate((6, 3, 5))]),
            padded,
            torch.tensor([1, 6, 2], device=model.device),
        )
        assert padded.lengths.tolist() == [7, 9, 7]
        for b, length in enumerate((7, 9, 7)):  # the first new logits of each row, past the padding written before
            row_state = padded.clone()
            again = model.forward(tokens[:, length : length + 1], row_state)
            torch.testing.assert_close(
                again[b, 0].nan_to_num(neginf=-1e9), fresh[b, length].nan_to_num(neginf=-1e9), atol=1e-5, rtol=0
            )


@pytest.mark.parametrize("device", DEVICES)
def test_batched_decoding_against_rows_alone(device):
    target = tiny_gpt(0, device=device)
    draft = tiny_gpt(1, d_model=16, n_layer=1, device=device)
    config = SpeculativeConfig(4, GREEDY)
    together = generate_speculative(
        target, draft, PROMPTS, max_new_tokens=20, config=config, randomness=seeded(0, device)
    )
    for b, prompt in enumerate(PROMPTS):
        alone = generate_speculative(
            target, draft, [prompt], max_new_tokens=20, config=config, randomness=seeded(0, device)
        )
        assert alone.tokens[0] == together.tokens[b]
    blockwise = BlockwiseGPT(target, 3).eval()
    rows = generate_blockwise(blockwise, PROMPTS, max_new_tokens=20).tokens
    assert rows == tuple(generate_blockwise(blockwise, [prompt], max_new_tokens=20).tokens[0] for prompt in PROMPTS)


def test_same_seed_same_tokens_different_seed_different_samples(target):
    draft = drafts(target)["transformer"]
    hot = Sampling(4.0)  # the untrained target is peaked; a high temperature makes samples vary
    config = SpeculativeConfig(3, hot)
    runs = [
        generate_speculative(target, draft, PROMPTS, max_new_tokens=30, config=config, randomness=seeded(seed))
        for seed in (7, 7, 8)
    ]
    assert runs[0].tokens == runs[1].tokens and runs[0].tokens != runs[2].tokens
    ar = [
        generate_autoregressive(target, PROMPTS, max_new_tokens=30, sampling=hot, randomness=seeded(seed))
        for seed in (7, 7, 8)
    ]
    assert ar[0].tokens == ar[1].tokens and ar[0].tokens != ar[2].tokens


def exact_three_token_law(table, prompt_token, sampling):
    probs = adjusted_probs(table, sampling).numpy()
    law = {}
    for sequence in itertools.product(range(table.shape[-1]), repeat=3):
        probability, previous = 1.0, prompt_token
        for token in sequence:
            probability, previous = probability * probs[previous, token], token
        law[sequence] = probability
    return law


@pytest.mark.parametrize(
    "verifier, gamma, sampling",
    [
        ("token", 2, Sampling(1.0)),
        ("token", 4, Sampling(0.7)),
        ("token", 3, Sampling(1.0, top_k=2)),
        ("token", 2, Sampling(1.3, top_p=0.8)),
        ("block", 2, Sampling(1.0)),
        ("block", 3, Sampling(0.7, top_k=2)),
    ],
)
def test_sampled_law_of_three_tokens_against_target(verifier, gamma, sampling):
    """30000 rows of a batch against the target's exact law of three tokens (27 cells, chi-square)."""
    generator = torch.Generator().manual_seed(3)
    target, draft = TabularModel.random(generator, 3, 1), TabularModel.random(generator, 3, 2)
    generation = generate_speculative(
        target,
        draft,
        [[1]] * 30000,
        max_new_tokens=3,
        randomness=seeded(5),
        config=SpeculativeConfig(gamma, sampling, verifier=verifier),
    )
    p_value = three_token_p_value(generation, target, sampling)
    assert p_value > 1e-4, f"p = {p_value:.2e}"


def three_token_p_value(generation, target, sampling) -> float:
    """Chi-square p-value of the rows' three tokens against the target's exact law (0 off its support)."""
    law = exact_three_token_law(target.table, 1, sampling)
    observed = np.array([sum(1 for row in generation.tokens if row == key) for key in law])
    expected = np.array(list(law.values()))
    if observed[expected == 0].sum() > 0:
        return 0.0
    return stats.chisquare(observed[expected > 0], expected[expected > 0] * observed.sum()).pvalue


@pytest.mark.parametrize("verifier", ("token", "block"))
def test_sampled_law_negative_control_fails(verifier):
    """The same test has power: with the accept ratio inverted to q/p (a planted bug from
    decoders.audit.mutants), the law moves and the p-value falls below 1e-4."""
    generator = torch.Generator().manual_seed(3)
    target, draft = TabularModel.random(generator, 3, 1), TabularModel.random(generator, 3, 2)
    generation = generate_speculative(
        target,
        draft,
        [[1]] * 30000,
        max_new_tokens=3,
        randomness=seeded(5),
        config=SpeculativeConfig(2, Sampling(1.0), verifier=verifier),
        step=mutant("ratio-q-over-p").step,
    )
    assert three_token_p_value(generation, target, Sampling(1.0)) < 1e-4


def test_statistics_of_a_run(target):
    draft = drafts(target)["transformer"]
    generation = generate_speculative(
        target,
        draft,
        PROMPTS,
        max_new_tokens=16,
        profile=True,
        config=SpeculativeConfig(3, Sampling(1.0)),
        randomness=seeded(0),
    )
    stats_ = generation.stats
    assert stats_.draft_calls == 3 * stats_.iterations and stats_.target_calls == stats_.iterations
    assert stats_.mean_tokens_per_iteration == pytest.approx(1 + stats_.mean_accepted_tokens_per_iteration)
    assert 0 <= stats_.alpha_estimate <= 1
    assert {"prefill", "draft", "verify", "accept", "correct", "total"} <= set(stats_.seconds)
    assert all(len(row) == 16 for row in generation.tokens)
    assert set(generation.as_dict()) == {"tokens", "stats"}


@pytest.mark.parametrize("sampling", (GREEDY, Sampling(1.0)), ids=("greedy", "T=1"))
@pytest.mark.parametrize("model_name", ("tinygpt", "trigram"))
def test_draft_equal_to_target_accepts_every_token_against_theory(model_name, sampling):
    """alpha = 1 when q = p, so every iteration accepts all gamma tokens. Regression: the rollback once cut
    the draft's state ``draft_pending`` tokens short, so the draft read a corrupted context and was
    rejected. The output law stayed exact, so no distribution audit could see it; only acceptance can."""
    config = TinyGPTConfig(vocab_size=VOCAB, d_model=16, n_layer=1, n_head=2, max_context=96)
    model = (
        TinyGPT(config).initialize(torch.Generator().manual_seed(0), std=0.3).eval()
        if model_name == "tinygpt"
        else NGramModel.fit(repetitive_corpus(), VOCAB, 3)
    )  # sharp weights: the context matters
    for gamma in (1, 3):
        generation = generate_speculative(
            model, model, PROMPTS, max_new_tokens=20, config=SpeculativeConfig(gamma, sampling), randomness=seeded(0)
        )
        assert all(n == gamma for row in generation.stats.accepted_per_iteration for n in row)
        assert min(generation.stats.betas) > 1 - 1e-5


def test_end_of_sequence_stops_each_row(target, greedy_reference):
    eos = greedy_reference.tokens[0][3]
    generation = generate_speculative(
        target,
        drafts(target)["bigram"],
        PROMPTS,
        max_new_tokens=24,
        eos=eos,
        config=SpeculativeConfig(4, GREEDY),
        randomness=seeded(0),
    )
    for row, reference in zip(generation.tokens, greedy_reference.tokens):
        cut = reference.index(eos) + 1 if eos in reference else len(reference)
        assert row == reference[:cut]


def test_lenience_accepts_more():
    generator = torch.Generator().manual_seed(4)
    target, draft = TabularModel.random(generator, 6, 1), TabularModel.random(generator, 6, 1)
    runs = {
        lenience: generate_speculative(
            target,
            draft,
            [[0]] * 500,
            max_new_tokens=8,
            randomness=seeded(1),
            config=SpeculativeConfig(4, Sampling(1.0), lenience=lenience),
        )
        for lenience in (1.0, 0.3)
    }
    assert runs[0.3].stats.mean_tokens_per_iteration > runs[1.0].stats.mean_tokens_per_iteration


def test_adjusted_probs_settings_and_no_mutation():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    original = logits.clone()
    assert adjusted_probs(logits, GREEDY).tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]  # ties: lowest id
    top2 = adjusted_probs(logits, Sampling(1.0, top_k=2))
    assert (top2[0] > 0).tolist() == [False, True, True, False]
    nucleus = adjusted_probs(torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])), Sampling(1.0, top_p=0.8))
    torch.testing.assert_close(nucleus, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    hot = adjusted_probs(logits, Sampling(0.5))
    torch.testing.assert_close(hot[0], torch.softmax(logits[0] / 0.5, dim=-1))
    assert torch.equal(logits, original)


def test_adjusted_probs_limits_against_greedy():
    """+inf logits give the uniform law over the +inf tokens; a temperature so small that logits / T
    overflows float32 gives the uniform law over the largest logits, the set greedy picks from."""
    infinite = torch.tensor([[1.0, math.inf, 2.0, math.inf], [1.0, 3.0, 2.0, 3.0]])
    torch.testing.assert_close(adjusted_probs(infinite[:1], Sampling(0.7)), torch.tensor([[0.0, 0.5, 0.0, 0.5]]))
    torch.testing.assert_close(adjusted_probs(infinite[1:], Sampling(1e-40)), torch.tensor([[0.0, 0.5, 0.0, 0.5]]))
    assert adjusted_probs(infinite, GREEDY).argmax(dim=-1).tolist() == [1, 1]


def test_infinite_logit_decoding_against_greedy():
    """A target whose every row has one +inf logit: sampling at T = 1 and at T = 1e-40, autoregressive and
    speculative, emits exactly greedy's tokens (it used to emit the last token id)."""
    table = torch.zeros(VOCAB, VOCAB)
    table[torch.arange(VOCAB), (torch.arange(VOCAB) * 7 + 3) % VOCAB] = math.inf
    target = TabularModel(table, 1)
    greedy = generate_autoregressive(target, PROMPTS, max_new_tokens=6, sampling=GREEDY, randomness=seeded(0)).tokens
    for sampling in (Sampling(1.0), Sampling(1e-40)):
        assert (
            generate_autoregressive(target, PROMPTS, max_new_tokens=6, sampling=sampling, randomness=seeded(1)).tokens
            == greedy
        )
        assert (
            generate_speculative(
                target,
                UniformModel(VOCAB),
                PROMPTS,
                max_new_tokens=6,
                config=SpeculativeConfig(2, sampling),
                randomness=seeded(2),
            ).tokens
            == greedy
        )


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: Sampling(top_p=0.0), "top_p must be in (0, 1]"),
        (lambda: Sampling(top_p=1.5), "top_p must be in (0, 1]"),
        (lambda: Sampling(temperature=-1.0), "temperature must be a finite number >= 0"),
        (lambda: Sampling(top_k=0), "top_k must be a positive integer"),
        (lambda: SpeculativeConfig(-1, GREEDY), "gamma must be a positive integer, got -1"),
        (lambda: SpeculativeConfig(0, GREEDY), "gamma must be a positive integer, got 0"),
        (lambda: SpeculativeConfig(2, GREEDY, lenience=0.0), "lenience must be in (0, 1]"),
        (lambda: SpeculativeConfig(2, GREEDY, lenience=1.5), "lenience must be in (0, 1]"),
        (lambda: SpeculativeConfig(2, GREEDY, verifier="block", lenience=0.5), "lenience must be 1 with the block"),
        (lambda: adjusted_probs(torch.tensor([[0.0, float("nan")]]), GREEDY), "logits must not contain NaN"),
        (lambda: TorchRandomness(42), "generator must be a torch.Generator"),
    ],
)
def test_bad_settings_raise_value_errors(make, fragment):
    with pytest.raises(ValueError) as error:
        make()
    assert fragment in str(error.value)


def test_bad_decoding_inputs_raise_value_errors(target):
    config = SpeculativeConfig(2, GREEDY)
    with pytest.raises(ValueError, match="draft and target vocabularies differ: draft has 7 tokens, target 24"):
        generate_speculative(target, UniformModel(7), PROMPTS, max_new_tokens=4, config=config, randomness=seeded(0))
    with pytest.raises(
        ValueError,
        match="plus max_new_tokens and one iteration's overshoot, 4 [+] 3 [(]7[)] exceeds "
        "the model's context of 96 tokens",
    ):
        generate_speculative(
            target, UniformModel(VOCAB), [[1] * 95], max_new_tokens=4, config=config, randomness=seeded(0)
        )
    with pytest.raises(ValueError, match="exceeds the model's context of 96 tokens"):
        generate_autoregressive(target, [[1] * 97], max_new_tokens=1, sampling=GREEDY, randomness=seeded(0))
    with pytest.raises(ValueError, match="prompt tokens must be integers in"):
        generate_autoregressive(target, [[VOCAB]], max_new_tokens=1, sampling=GREEDY, randomness=seeded(0))
    with pytest.raises(ValueError, match=r"prompt tokens must be integers in \[0, 24\)"):  # used to be truncated
        generate_autoregressive(target, [[1.7, 2]], max_new_tokens=1, sampling=GREEDY, randomness=seeded(0))
    with pytest.raises(ValueError, match="a prompt tensor must be integer"):
        generate_autoregressive(
            target, torch.tensor([[1.0, 2.0]]), max_new_tokens=1, sampling=GREEDY, randomness=seeded(0)
        )
    with pytest.raises(ValueError, match=r"eos must be an integer in \[0, 23\], got 24"):  # used to be accepted
        generate_speculative(
            target, UniformModel(VOCAB), PROMPTS, max_new_tokens=4, config=config, randomness=seeded(0), eos=VOCAB
        )
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        generate_autoregressive(target, PROMPTS, max_new_tokens=0, sampling=GREEDY, randomness=seeded(0))


@pytest.mark.parametrize("sampling", [GREEDY, Sampling(1.0)], ids=["greedy", "sampled"])
def test_non_finite_models_raise_at_first_call(target, sampling):
    """A model with NaN weights is refused at its first call by every decoder, greedy included (greedy's
    argmax used to read NaN as the largest logit; an all-NaN draft used to pass as "no proposal" and accept
    nothing); a table of NaN logits is refused when it is built."""
    nan_model = tiny_gpt(5, d_model=16, n_layer=1)
    with torch.no_grad():
        nan_model.embed.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="logits must not contain NaN"):
        generate_autoregressive(nan_model, PROMPTS, max_new_tokens=2, sampling=sampling, randomness=seeded(0))
    for pair, culprit in (((target, nan_model), "draft"), ((nan_model, target), "target")):
        with pytest.raises(ValueError, match=f"the {culprit}'s logits must not contain NaN"):
            generate_speculative(
                *pair, PROMPTS, max_new_tokens=4, config=SpeculativeConfig(2, sampling), randomness=seeded(0)
            )
    with pytest.raises(ValueError, match="logits must not contain NaN"):
        generate_blockwise(BlockwiseGPT(nan_model, 3).eval(), PROMPTS, max_new_tokens=4)
    with pytest.raises(ValueError, match="table must not contain NaN logits"):
        TabularModel(torch.full((VOCAB, VOCAB), float("nan")), 1)
    with pytest.raises(ValueError, match=r"order must be an integer in \[0, 3\], got 1.0"):
        TabularModel(torch.zeros(VOCAB, VOCAB), 1.0)


def test_hugging_face_adapter_against_generate():
    transformers = pytest.importorskip("transformers")
    from decoders.models.hf import HFCausalLM

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=VOCAB, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    adapter = HFCausalLM(model)
    prompt = [[1, 2, 3, 4]]
    ours = generate_autoregressive(adapter, prompt, max_new_tokens=15, sampling=GREEDY, randomness=seeded(0))
    reference = model.generate(
        torch.tensor(prompt), max_new_tokens=15, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    assert ours.tokens[0] == tuple(reference[0, 4:].tolist())
    ragged = generate_speculative(
        adapter,
        tiny_gpt(1, d_model=16, n_layer=1),
        PROMPTS,
        max_new_tokens=10,
        config=SpeculativeConfig(3, GREEDY),
        randomness=seeded(0),
    )
    assert (
        ragged.tokens
        == generate_autoregressive(adapter, PROMPTS, max_new_tokens=10, sampling=GREEDY, randomness=seeded(0)).tokens
    )


def test_batched_adapter_against_rows_alone_without_recomputation():
    """Eight prompts of different lengths decoded together through the adapter give each row's batch-1 tokens
    at T = 0, while rows accept different numbers of tokens in the same iteration; every call after the
    first feeds the models only the new tokens (gamma + 1 to the target, at most 2 to the draft): the cache is
    kept, no history is recomputed. The target's first call carries the prompts but their last tokens (ragged:
    each row's new positions after its own prompt) with the first gamma + 1 positions."""
    from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2

    pytest.importorskip("transformers")
    target, draft = (HFCausalLM(tinygpt_to_gpt2(model)) for model in (tiny_gpt(0), tiny_gpt(1, d_model=16, n_layer=1)))
    widths = {"target": [], "draft": []}
    for name, model in (("target", target), ("draft", draft)):
        model.model.register_forward_pre_hook(
            lambda module, args, kwargs, name=name: widths[name].append(kwargs["input_ids"].shape[1]), with_kwargs=True
        )
    prompts = [[(5 * b + i) % VOCAB for i in range(1 + b)] for b in range(8)]
    config = SpeculativeConfig(3, GREEDY)
    together = generate_speculative(target, draft, prompts, max_new_tokens=20, config=config, randomness=seeded(0))
    accepted = torch.tensor(together.stats.accepted_per_iteration[0])
    assert len(set(accepted.tolist())) > 1  # ragged: rows accepted different counts in the first iteration
    assert widths["target"][0] == 7 + config.gamma + 1 and set(widths["target"][1:]) == {config.gamma + 1}
    assert len(widths["target"]) == together.stats.iterations  # no call of its own for the prompt
    assert widths["draft"][0] == 7 and max(widths["draft"][1:]) <= 2
    for b, prompt in enumerate(prompts):
        alone = generate_speculative(target, draft, [prompt], max_new_tokens=20, config=config, randomness=seeded(0))
        assert alone.tokens[0] == together.tokens[b]


class _FakeClock:
    """Seconds that pass only when ``advance`` says so: what the profile reads instead of the wall clock."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class _Slow:
    """A model, or a randomness source, whose every call in ``calls`` first takes ``seconds`` on ``clock``."""

    def __init__(self, inner, clock, seconds, calls):
        self.inner, self.clock, self.seconds, self.calls = inner, clock, seconds, calls

    def __getattr__(self, name):
        attribute = getattr(self.inner, name)
        if name not in self.calls:
            return attribute

        def slow(*args, **kwargs):
            self.clock.advance(self.seconds)
            return attribute(*args, **kwargs)

        return slow


def test_efficiency_against_slow_model_and_slow_sampler(target, monkeypatch):
    """Profiled runs record the seconds inside model calls, on an injected clock (no wall time, so a busy
    machine changes nothing): a model whose calls take 20 ms makes all of the time model time; a sampler whose
    draws take as long makes none of it (the control). Unprofiled runs record none, at no cost."""
    clock = _FakeClock()
    monkeypatch.setattr(_loop, "clock", clock)
    slow_model = _Slow(target, clock, 0.02, ("forward",))
    slow_sampler = _Slow(seeded(0), clock, 0.02, ("categorical", "bernoulli"))
    sampling, config = Sampling(1.0), SpeculativeConfig(2, Sampling(1.0))
    runs = {
        "slow model, autoregressive": generate_autoregressive(
            slow_model, PROMPTS, max_new_tokens=3, sampling=sampling, randomness=seeded(0), profile=True
        ),
        "slow model, speculative": generate_speculative(
            slow_model, target, PROMPTS, max_new_tokens=3, config=config, randomness=seeded(0), profile=True
        ),
        "slow sampler, autoregressive": generate_autoregressive(
            target, PROMPTS, max_new_tokens=3, sampling=sampling, randomness=slow_sampler, profile=True
        ),
        "slow sampler, speculative": generate_speculative(
            target, target, PROMPTS, max_new_tokens=3, config=config, randomness=slow_sampler, profile=True
        ),
    }
    shares = {name: efficiency([run.stats]) for name, run in runs.items()}
    assert all(share == 1.0 for name, share in shares.items() if "slow model" in name), shares
    assert all(share == 0.0 for name, share in shares.items() if "slow sampler" in name), shares
    assert all(run.stats.seconds["total"] >= 0.02 for run in runs.values())  # the clock did advance
    unprofiled = generate_autoregressive(target, PROMPTS, max_new_tokens=3, sampling=sampling, randomness=seeded(0))
    assert "model" not in unprofiled.stats.seconds and efficiency([unprofiled.stats]) is None


def test_tinygpt_refuses_tokens_outside_its_vocabulary():
    """Out-of-range ids are refused with the vocabulary named (the lookup's own IndexError on CPU, no check on
    the hot path), and the state is left as it was."""
    model = tiny_gpt(0)
    state = model.new_state(1, 8)
    for token in (VOCAB, -1):
        with pytest.raises(ValueError, match=rf"tokens must be in \[0, {VOCAB}\), got {token}\.\.{token}"):
            model.forward(torch.tensor([[token]]), state)
        assert state.lengths.tolist() == [0] and state.bound == 0


def test_earliest_copy_draft_against_transformers_prompt_lookup():
    """``CopyDraft(occurrence="earliest")``, drafting token by token, proposes transformers' prompt-lookup
    candidates (the continuation of the suffix's first match, copied as a block) on 200 seeded random
    sequences, then may go on where transformers' block stops at the sequence's end. Control: the latest
    occurrence (our default) proposes otherwise on some of them."""
    pytest.importorskip("transformers")
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    generator = torch.Generator().manual_seed(0)
    lookup = PromptLookupCandidateGenerator(num_output_tokens=4, max_matching_ngram_size=20, max_length=1000)
    drafts = {rule: CopyDraft(6, max_match=20, occurrence=rule) for rule in ("earliest", "latest")}
    differs = 0
    for _ in range(200):
        sequence = torch.randint(0, 6, (1, int(torch.randint(4, 40, (1,), generator=generator))), generator=generator)
        theirs = lookup.get_candidates(sequence)[0][0, sequence.shape[1] :].tolist()
        ours = {}
        for rule, draft in drafts.items():
            context, proposals = sequence[0].tolist(), []
            while len(proposals) < 4 and (token := draft._lookup(context)) is not None:
                proposals.append(token)
                context.append(token)
            ours[rule] = proposals
        assert ours["earliest"][: len(theirs)] == theirs and (theirs or not ours["earliest"])
        differs += ours["latest"][: len(theirs)] != theirs
    assert differs > 20
    with pytest.raises(ValueError, match="occurrence must be one of"):
        CopyDraft(6, occurrence="first")


def _lookup_by_definition(context: list, min_match: int, max_match: int, earliest: bool):
    """The longest suffix (sizes from the largest down), then its latest or earliest earlier occurrence."""
    for size in range(min(max_match, len(context) - 1), min_match - 1, -1):
        starts = range(len(context) - size) if earliest else range(len(context) - size - 1, -1, -1)
        for start in starts:
            if context[start : start + size] == context[-size:]:
                return context[start + size]
    return None


@pytest.mark.parametrize("occurrence", ["latest", "earliest"])
def test_copy_draft_lookup_against_its_definition(occurrence):
    """The one-pass lookup (each occurrence of the last token extended backwards) against the definition, on 300
    seeded random sequences over 3 tokens (long, overlapping matches) at min_match 2 and max_match 4."""
    generator = torch.Generator().manual_seed(1)
    draft = CopyDraft(3, min_match=2, max_match=4, occurrence=occurrence)
    for _ in range(300):
        context = torch.randint(
            0, 3, (int(torch.randint(1, 30, (1,), generator=generator)),), generator=generator
        ).tolist()
        assert draft._lookup(context) == _lookup_by_definition(context, 2, 4, occurrence == "earliest"), context


def test_history_prefill_looks_nothing_up_against_forward():
    """A history model's ``append`` (the decoders' prefill) writes the history without computing logits: a copy
    draft's prefill of 20 tokens makes no lookup, where ``forward`` makes one per position (the control); the
    next call proposes the same token either way. ``copy:earliest`` loads by name with transformers' rule."""
    from decoders.drafts import open_draft

    lookups = []
    draft = CopyDraft(VOCAB)
    draft._lookup = lambda context, own=draft._lookup: lookups.append(len(context)) or own(context)
    tokens = torch.tensor([[1, 2, 3, 1, 2] * 4])
    appended, forwarded = draft.new_state(1), draft.new_state(1)
    draft.append(tokens, appended)
    assert lookups == []
    draft.forward(tokens, forwarded)
    assert len(lookups) == 20
    step = torch.tensor([[3]])
    assert torch.equal(draft.forward(step, appended), draft.forward(step, forwarded))
    assert open_draft("copy:earliest")[0].earliest and not open_draft("copy")[0].earliest
