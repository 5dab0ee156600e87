"""A tiny random Hugging Face model behind our adapter, shared by the decoder and tree-attention tests."""

import pytest
import torch


def tiny_hf_model(kind: str, attention: str = "sdpa", vocab: int = 24, context: int = 96, seed: int = 7):
    """Our adapter over a tiny random transformers model: GPT-2 (learned positions) or Llama (rotary
    positions, grouped-query attention), with ``attention`` its attention implementation."""
    transformers = pytest.importorskip("transformers")
    from decoders.models.hf import HFCausalLM

    torch.manual_seed(seed)  # model initialisation only
    if kind == "gpt2":
        config = transformers.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, vocab_size=vocab, n_positions=context, bos_token_id=None, eos_token_id=None
        )
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=vocab,
            max_position_embeddings=context,
            bos_token_id=None,
            eos_token_id=None,
        )
        model = transformers.LlamaForCausalLM(config)
    model.config._attn_implementation = attention
    return HFCausalLM(model.eval())
