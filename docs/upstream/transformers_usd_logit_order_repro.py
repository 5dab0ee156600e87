"""transformers' Universal Speculative Decoding (assisted generation with two tokenizers, do_sample=True) scatters the
assistant's pruned logits to the wrong target tokens, so its accept test uses another token's q and its output does
not follow the target's law.

Run with transformers 5.24, tokenizers and torch (CPU is enough): `python transformers_usd_logit_order_repro.py`.
Nothing else is needed: two character-level tokenizers built with `tokenizers`, two tiny random GPT-2 models. The
assistant's `get_vocab()` is forced to list its tokens by decreasing id (``UnsortedVocabulary``), an order a fast
tokenizer may take in any process, so that every run gives the same result.

`AssistantToTargetTranslator` (generation/candidate_generator.py) prunes the assistant's LM head to the tokens both
vocabularies share, in the order of `target_to_assistant_input_ids.values()` (the insertion order of a dict built by
iterating `assistant_tokenizer.get_vocab()`, which for a fast tokenizer is not sorted by id), but `get_target_logits`
writes pruned logit k to the target id of the k-th shared assistant id in ascending id order. The two orders differ
whenever `get_vocab()` is not sorted, and then q(x) in `_speculative_sampling` is the assistant's probability of
another token. Part 1 shows the two orders and where a one-hot pruned logit lands; part 2 samples the first new token
1,500 times and tests it against the target's own softmax (chi-square), with the translator as shipped and with the
one-line fix (the overlap order in `get_target_logits`).
"""

import math

import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from tokenizers import decoders as token_decoders
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.generation.candidate_generator import AssistantToTargetTranslator, AssistantVocabTranslatorCache

TARGET_PIECES = ["<unk>", "x", "e", "a", "d", "c", "b", "y"]  # 8 tokens
ASSISTANT_PIECES = ["<unk>", "a", "b", "c", "d", "e", "z"]  # 7 tokens; "z" is not the target's
PROMPT = "ab"
SAMPLES = 1500


class UnsortedVocabulary(PreTrainedTokenizerFast):
    """A fast tokenizer whose ``get_vocab()`` lists its tokens by decreasing id. A fast tokenizer's own order comes
    from a hash map and changes from process to process; fixing it here makes every run show the bug."""

    def get_vocab(self):
        return dict(sorted(super().get_vocab().items(), key=lambda item: -item[1]))


def tokenizer(pieces, kind=PreTrainedTokenizerFast):
    core = Tokenizer(models.WordLevel({piece: i for i, piece in enumerate(pieces)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = token_decoders.Fuse()
    return kind(tokenizer_object=core, unk_token="<unk>")


def model(vocab_size, seed):
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=32, n_embd=16, n_layer=1, n_head=2, tie_word_embeddings=False
    )
    config.bos_token_id = config.eos_token_id = config.pad_token_id = None
    gpt = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        gpt.lm_head.weight.normal_(0, 0.3)  # laws spread over most tokens
    return gpt


def part_1(target_tokenizer, assistant_tokenizer):
    translator = AssistantToTargetTranslator(
        target_tokenizer,
        assistant_tokenizer,
        len(TARGET_PIECES),
        assistant_model=model(len(ASSISTANT_PIECES), 1),
        assistant_prune_lm_head=True,
    )
    overlap = translator.assistant_overlap_token_ids.tolist()  # pruned index k -> assistant id
    ascending = torch.where(translator._assistant_to_target_input_ids != -1)[0].tolist()
    print(f"assistant get_vocab() order: {list(assistant_tokenizer.get_vocab().values())}")
    print(f"pruned LM head order (assistant ids): {overlap}")
    print(f"order get_target_logits assumes:      {ascending}")
    wrong = 0
    for k, assistant_id in enumerate(overlap):
        one_hot = torch.full((1, 1, len(overlap)), -math.inf)
        one_hot[..., k] = 0.0
        landed = int(translator.get_target_logits(one_hot).argmax())
        expected = translator._assistant_to_target_input_ids[assistant_id].item()
        wrong += landed != expected
        print(
            f"  pruned logit {k} is assistant token {ASSISTANT_PIECES[assistant_id]!r}: lands on target token "
            f"{TARGET_PIECES[landed]!r} (should be {TARGET_PIECES[expected]!r})"
        )
    return wrong


def part_2(target_tokenizer, assistant_tokenizer, fixed):
    target, assistant = model(len(TARGET_PIECES), 0), model(len(ASSISTANT_PIECES), 1)
    AssistantVocabTranslatorCache._cache.clear()
    original = AssistantToTargetTranslator.get_target_logits
    if fixed:

        def get_target_logits(self, assistant_logits):
            shape = (*assistant_logits.shape[:-1], self.target_vocab_size)
            target_logits = torch.full(shape, self.FILTER_VALUE, device=assistant_logits.device)
            target_ids = self._assistant_to_target_input_ids[self.assistant_overlap_token_ids]
            target_logits[..., target_ids] = assistant_logits
            return target_logits

        AssistantToTargetTranslator.get_target_logits = get_target_logits
    try:
        prompt = target_tokenizer(PROMPT, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            p = torch.softmax(target(prompt).logits[0, -1].double(), dim=-1)
        counts = torch.zeros(len(TARGET_PIECES))
        assistant.generation_config.num_assistant_tokens = 1
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        for seed in range(SAMPLES):
            torch.manual_seed(seed)
            out = target.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                assistant_model=assistant,
                do_sample=True,
                max_new_tokens=2,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                pad_token_id=0,
                tokenizer=target_tokenizer,
                assistant_tokenizer=assistant_tokenizer,
            )
            counts[out[0, prompt.shape[1]]] += 1
    finally:
        AssistantToTargetTranslator.get_target_logits = original
    expected = SAMPLES * p
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    dof = len(TARGET_PIECES) - 1
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(chi2 / 2.0)))
    label = "with the fix" if fixed else "as shipped  "
    print(f"{label}: first new token, chi-square {chi2:.1f} on {dof} df, p = {p_value:.3g}")
    for i, piece in enumerate(TARGET_PIECES):
        print(f"    {piece!r:8s} observed {int(counts[i]):5d}  expected {float(expected[i]):8.1f}")
    return p_value


def main() -> int:
    target_tokenizer, assistant_tokenizer = tokenizer(TARGET_PIECES), tokenizer(ASSISTANT_PIECES, UnsortedVocabulary)
    wrong = part_1(target_tokenizer, assistant_tokenizer)
    shipped, fixed = (part_2(target_tokenizer, assistant_tokenizer, fixed) for fixed in (False, True))
    print(f"pruned logits on the wrong target token: {wrong}; p as shipped {shipped:.3g}, with the fix {fixed:.3g}")
    return 1 if wrong or shipped < 1e-3 else 0


if __name__ == "__main__":
    raise SystemExit(main())
