"""A Hugging Face causal language model behind the project's model protocol (optional ``hf`` extra).

Rows of equal length (always, at batch 1) run incrementally on a ``DynamicCache`` that is cropped after
a rejection; when rows differ in length the adapter recomputes from the token history (right-padded,
which causal attention never sees), slower but exact. Nothing is downloaded: pass a model you built.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch

from decoders.models.base import append_history, check_step, check_truncate

__all__ = ["HFCausalLM", "HFState", "tinygpt_to_gpt2", "is_model_directory", "load_directory"]


@dataclass
class HFState:
    tokens: torch.Tensor  # [B, capacity] history
    lengths: torch.Tensor  # [B]
    cache: object = None  # a DynamicCache holding the first ``cached`` tokens of every row, or None
    cached: int = 0

    def clone(self) -> "HFState":
        return HFState(self.tokens.clone(), self.lengths.clone(), copy.deepcopy(self.cache), self.cached)


class HFCausalLM:
    """Wraps e.g. ``transformers.GPT2LMHeadModel(config)``; ``forward`` returns float logits."""

    def __init__(self, model) -> None:
        self.model = model.eval()
        self.vocab_size = int(model.config.vocab_size)
        self.max_context = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def new_state(self, batch_size: int, capacity: int | None = None) -> HFState:
        """The cache grows with the sequences, so ``capacity`` needs no allocation up front."""
        return HFState(torch.zeros(batch_size, 0, dtype=torch.int64, device=self.device),
                       torch.zeros(batch_size, dtype=torch.int64, device=self.device))

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None = None) -> torch.Tensor:
        from transformers import DynamicCache

        counts = check_step(self, tokens, state, counts)
        batch, new = tokens.shape
        starts = state.lengths.clone()
        width = int((starts + new).max())
        state.tokens, _ = append_history(state.tokens, starts, tokens)
        uniform = bool((starts == starts[0]).all()) and bool((counts == new).all())
        if uniform and (state.cache is None and int(starts[0]) == 0 or state.cache is not None
                        and state.cached == int(starts[0])):
            cache = state.cache if state.cache is not None else DynamicCache()
            logits = self.model(input_ids=tokens, past_key_values=cache, use_cache=True).logits
            state.cache, state.cached = cache, int(starts[0]) + new
        else:  # ragged rows: recompute every row from its history
            logits_all = self.model(input_ids=state.tokens[:, :width], use_cache=False).logits  # [B, W, V]
            index = (starts[:, None] + torch.arange(new, device=self.device)).clamp(max=width - 1)
            logits = torch.gather(logits_all, 1, index[..., None].expand(-1, -1, logits_all.shape[-1]))
            state.cache, state.cached = None, 0
        state.lengths = starts + counts
        return logits.float()

    __call__ = forward

    def truncate(self, state: HFState, lengths: torch.Tensor) -> None:
        state.lengths = check_truncate(state, lengths)
        keep = int(state.lengths[0])
        if state.cache is not None and bool((state.lengths == keep).all()) and 0 < keep <= state.cached:
            if keep < state.cached:
                state.cache.crop(keep - state.cached)  # a negative count removes that many tokens
            state.cached = keep
        else:
            state.cache, state.cached = None, 0


def is_model_directory(spec) -> bool:
    """Whether ``spec`` names a local Hugging Face model directory (one holding a ``config.json``)."""
    return Path(spec).is_dir() and (Path(spec) / "config.json").is_file()


def load_directory(path, *, device: str = "cpu", dtype: torch.dtype | None = None):
    """(``HFCausalLM``, tokenizer) of a Hugging Face model directory, read from disk only
    (``local_files_only``): a hub id or a missing directory is a ``ValueError``, never a download."""
    if not is_model_directory(path):
        raise ValueError(f"'{path}' is not a Hugging Face model directory (no config.json there); nothing is "
                         f"downloaded: give a local directory, e.g. one written by spectheory export-hf")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error(), logging.disable_progress_bar()  # loading is quiet: errors are ours, one line
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"Hugging Face model directory '{path}' cannot be loaded: {reason}") from None
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
    return HFCausalLM(model.to(device)), tokenizer


def tinygpt_to_gpt2(model):
    """The same network as a ``transformers.GPT2LMHeadModel`` (pre-LayerNorm, learned positions, exact GELU,
    tied embeddings): TinyGPT's ``nn.Linear`` weights become GPT-2's transposed ``Conv1D`` weights. Used to
    compare our decoders with Hugging Face ``generate`` on identical models."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    config = GPT2Config(vocab_size=c.vocab_size, n_positions=c.max_context, n_embd=c.d_model, n_layer=c.n_layer,
                        n_head=c.n_head, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        layer_norm_epsilon=model.norm.eps, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        tie_word_embeddings=True)
    weights = {"transformer.wte.weight": model.embed.weight, "transformer.wpe.weight": model.position.weight,
               "transformer.ln_f.weight": model.norm.weight, "transformer.ln_f.bias": model.norm.bias,
               "lm_head.weight": model.embed.weight}
    for i, block in enumerate(model.blocks):
        prefix = f"transformer.h.{i}."
        for ours, theirs in ((block.norm_attention, "ln_1"), (block.norm_mlp, "ln_2")):
            weights[prefix + theirs + ".weight"], weights[prefix + theirs + ".bias"] = ours.weight, ours.bias
        for ours, theirs in ((block.qkv, "attn.c_attn"), (block.project, "attn.c_proj"), (block.mlp[0], "mlp.c_fc"),
                             (block.mlp[2], "mlp.c_proj")):
            weights[prefix + theirs + ".weight"], weights[prefix + theirs + ".bias"] = ours.weight.t(), ours.bias
    converted = GPT2LMHeadModel(config)
    converted.load_state_dict({key: value.detach().clone() for key, value in weights.items()})  # strict: every weight mapped
    return converted.to(device=model.device, dtype=model.embed.weight.dtype).eval()
