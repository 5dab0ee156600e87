"""A regression test for transformers' tests/generation/test_candidate_generator.py, in that file's style (mocked
tokenizers; a tiny GPT-2 as the assistant whose head is pruned): with a pruned LM head,
`AssistantToTargetTranslator.get_target_logits` must write pruned logit k to the target id of assistant token
`assistant_overlap_token_ids[k]`. The assistant's vocabulary is listed out of id order, as a fast tokenizer's
`get_vocab()` may be (it comes from a hash map), so the test fails on every run without the fix
(transformers-usd-logit-order.patch) and passes with it.

Run: `python -m pytest transformers_usd_logit_order_test.py` (transformers 5.24, torch)."""

import unittest
from unittest.mock import MagicMock

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.generation.candidate_generator import AssistantToTargetTranslator


class TestAssistantToTargetTranslatorPrunedOrder(unittest.TestCase):
    def setUp(self):
        self.target_tokenizer = MagicMock()
        self.assistant_tokenizer = MagicMock()
        config = GPT2Config(vocab_size=5, n_positions=8, n_embd=8, n_layer=1, n_head=2, tie_word_embeddings=False)
        self.assistant_model = GPT2LMHeadModel(config).eval()  # pruning reads and cuts a real LM head
        self.target_tokenizer.get_vocab.return_value = {"hello": 0, "world": 1, "foo": 2, "bar": 3}
        # Out of id order, as a fast tokenizer may list it: the pruned head's order is this one
        self.assistant_tokenizer.get_vocab.return_value = {"foo": 2, "baz": 4, "world": 1, "hello": 0}
        self.translator = AssistantToTargetTranslator(
            target_tokenizer=self.target_tokenizer,
            assistant_tokenizer=self.assistant_tokenizer,
            target_vocab_size=6,
            assistant_model=self.assistant_model,
            assistant_prune_lm_head=True,
        )

    def test_get_target_logits_follows_the_pruned_lm_head_order(self):
        overlap = self.translator.assistant_overlap_token_ids.tolist()  # pruned index k -> assistant token id
        self.assertNotEqual(overlap, sorted(overlap))  # the case the ascending-id scatter gets wrong
        for k, assistant_id in enumerate(overlap):
            assistant_logits = torch.full((1, 1, len(overlap)), -float("inf"))
            assistant_logits[..., k] = 0.0
            target_logits = self.translator.get_target_logits(assistant_logits)
            expected = self.translator._assistant_to_target_input_ids[assistant_id].item()
            self.assertEqual(target_logits.argmax().item(), expected, f"pruned logit {k}")


if __name__ == "__main__":
    unittest.main()
