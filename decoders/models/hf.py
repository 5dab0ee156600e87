"""A Hugging Face causal language model behind the project's model protocol (optional ``hf`` extra).

The adapter keeps its own key/value cache, like TinyGPT's (docs/theory.md §7): per layer, buffers
``[B, H, capacity + 1, Dh]`` in which each row writes its new tokens at its own positions (padding into the
spare last slot), with the row's position ids and a ``[B, 1, S, K]`` mask that lets a query see its row's
slots up to its own position. Rows of different lengths and a rejection's cut therefore cost nothing: the
model never recomputes a history, and a call does no work TinyGPT's skips (no host synchronisation unless
the buffers may need to grow, no mask built by transformers). It fits decoder-only models with full
attention whose attention takes a mask (``sdpa`` or ``eager``): GPT-2, Llama and their kin. Nothing is
downloaded: pass a model you built or a local directory.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from decoders.models.base import check_shape, check_step, check_truncate, extend_tree, path_slots, tree_layout
from decoders.models.compiled import BACKENDS, MAX_COMPILED_WIDTH, allocate, compile_mode, raise_shape_limits
from decoders.models.hf_cache import HFState, RowCache

__all__ = [
    "HFCausalLM",
    "HFState",
    "RowCache",
    "tinygpt_to_gpt2",
    "is_model_directory",
    "load_directory",
    "check_same_tokenizer",
    "layer_skip",
    "layer_count",
    "float_logits",
    "StaticHF",
]

#: Tokens per row a state holds before its buffers first grow, when the caller gives no capacity.
DEFAULT_CAPACITY = 256
#: Attention implementations that take our per-row mask: sdpa a boolean one, eager an additive one.
MASKED_ATTENTION = ("sdpa", "eager")


class HFCausalLM:
    """Wraps e.g. ``transformers.GPT2LMHeadModel(config)``; ``forward`` returns float logits."""

    def __init__(self, model) -> None:
        attention = getattr(model.config, "_attn_implementation", None) or "eager"
        if attention not in MASKED_ATTENTION:
            raise ValueError(
                f"the adapter needs an attention implementation that takes a mask per row, one of "
                f"{MASKED_ATTENTION}, got {attention!r}: load the model with attn_implementation='sdpa'"
            )
        self.model = model.eval()
        self.vocab_size = int(model.config.vocab_size)
        self.max_context = getattr(model.config, "max_position_embeddings", None) or getattr(
            model.config, "n_positions", None
        )
        self.boolean_mask = attention == "sdpa"
        self.mask_dtype = next(model.parameters()).dtype
        self.early_exit: int | None = None  # set by layer_skip: the decoder layers kept
        #: {tokens per call: the cheaper count it is padded to} (``decoders.models.call_widths``); none by default
        self.padded_widths: dict[int, int] = {}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model's weights (what results record)."""
        return self.mask_dtype

    def new_state(self, batch_size: int, capacity: int | None = None) -> HFState:
        """An empty cache for rows of ``capacity`` tokens (default: ``DEFAULT_CAPACITY``), never more than
        the model's context; it grows when a row needs more, up to the context."""
        slots = capacity or DEFAULT_CAPACITY
        if self.max_context is not None:
            slots = min(slots, self.max_context)
        return HFState(RowCache(slots), torch.zeros(batch_size, dtype=torch.int64, device=self.device))

    def forward(
        self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None = None, keep: int = 0
    ) -> torch.Tensor:
        """Logits ``[B, S, V]`` (float) of the new tokens; appends ``counts`` (default: all S) per row. ``keep``
        > 0 computes the LM head at the last ``keep`` positions only (``[B, keep, V]``)."""
        if torch.is_grad_enabled():
            with torch.no_grad():
                return self.forward(tokens, state, counts, keep)
        check_shape(tokens, state)
        batch, new = tokens.shape
        if state.bound + new > state.capacity:  # the exact check costs a synchronisation: only where buffers may fill
            counts = self._make_room(tokens, state, counts)
        pad = -(-self.padded_widths.get(batch * new, batch * new) // batch) - new  # columns added: a cheaper call
        if pad:
            counts = torch.full_like(state.lengths, new) if counts is None else counts
            tokens = torch.cat([tokens, tokens[:, -1:].expand(-1, pad)], 1)
        offsets = torch.arange(new + pad, device=tokens.device)
        positions = state.lengths[:, None] + offsets  # [B, S + pad], absolute positions
        if counts is None:
            counts, write_at, position_ids = torch.full_like(state.lengths, new), positions, positions
        else:  # padding (s >= counts[b]) writes into the spare last slot, never into the row
            write_at = torch.where(offsets < counts[:, None], positions, state.capacity)
            position_ids = positions.clamp(max=state.capacity - 1)
        visible = self._visible(state, state.bound + new)  # slots past a row's end are masked anyway
        keys = torch.arange(visible, device=tokens.device)
        mask = (keys <= positions[:, :, None])[:, None]  # [B, 1, S + pad, K]: a query sees its row up to itself
        kept = keep or new
        logits = self._run(tokens, state, write_at, visible, mask, position_ids, kept + pad)[:, :kept]
        state.lengths = state.lengths + counts
        state.bound = min(state.bound + new, state.capacity)
        state.tree = None  # a pending tree's slots may have been overwritten
        return logits

    __call__ = forward

    def _make_room(self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None) -> torch.Tensor:
        """Checked ``counts`` after growing the buffers where a row needs more slots (up to the context)."""
        counts = check_step(self, tokens, state, counts)
        state.bound = int(state.lengths.max())  # tightened where a read is made anyway
        needed = int((state.lengths + counts).max())
        if needed > state.capacity:
            state.cache.grow(min(max(needed, 2 * state.capacity), self.max_context or needed))
        return counts

    def _visible(self, state: HFState, bound: int) -> int:
        """The key slots a call's mask spans, given a bound on the rows' lengths after it: no more than needed."""
        return min(bound, state.capacity)

    def compiled(self, backend: str = "inductor", mode: str | None = None) -> "HFCausalLM":
        """This model (the same weights) on the compiled, static-cache path (``decoders.models.compiled``)."""
        twin = StaticHF(self.model, backend=backend, mode=mode)
        twin.early_exit = self.early_exit
        return twin

    def append(self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None = None) -> None:
        """``forward`` without the logits (a prefill): the LM head runs at one position only."""
        self.forward(tokens, state, counts, keep=1)

    def _run(self, tokens, state: HFState, write_at, visible: int, mask, position_ids, keep: int = 0) -> torch.Tensor:
        """One call of the wrapped model writing at ``write_at`` with the boolean ``mask: [B, 1, S, K]``."""
        if not self.boolean_mask:
            mask = torch.zeros(mask.shape, dtype=self.mask_dtype, device=mask.device).masked_fill_(
                ~mask, torch.finfo(self.mask_dtype).min
            )
        state.cache.prepare(write_at, visible)
        return float_logits(
            self.model(
                input_ids=tokens,
                cache=state.cache,
                attention_mask=mask,
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=keep,
            ).logits
        )

    def forward_tree(
        self,
        tokens: torch.Tensor,
        state: HFState,
        parents: torch.Tensor,
        positions: torch.Tensor | None = None,
        keep: int = 0,
    ) -> torch.Tensor:
        """Logits ``[B, n, V]`` of n new draft-tree nodes (``decoders.models.base``; ``keep`` > 0: of the last
        ``keep`` only): a 4D mask over the prefix and each node's ancestors, position ids prefix length + depth (or
        ``positions``: the audits' planted flat-position bug)."""
        if torch.is_grad_enabled():
            with torch.no_grad():
                return self.forward_tree(tokens, state, parents, positions, keep)
        check_shape(tokens, state)
        parents = torch.as_tensor(parents, dtype=torch.int64, device=tokens.device).expand(tokens.shape)
        tree = extend_tree(state.tree, parents)
        needed = state.bound + tree.size
        if needed > min(state.capacity, self.max_context or needed):  # the host bound may be loose (after a truncate)
            state.bound = int(state.lengths.max())
            needed = state.bound + tree.size
        if self.max_context is not None and needed > self.max_context:
            raise ValueError(
                f"a tree of {tree.size} nodes after {state.bound} tokens exceeds the model's context "
                f"of {self.max_context} tokens"
            )
        if needed > state.capacity:
            self._grow_for_tree(state, tree.size, needed)
        visible = self._visible(state, needed)
        depth_positions, slots, mask = tree_layout(tree, state.lengths, tokens.shape[1], visible)
        logits = self._run(
            tokens, state, slots, visible, mask, depth_positions if positions is None else positions, keep
        )
        state.tree = tree
        return logits

    def _grow_for_tree(self, state: HFState, nodes: int, needed: int) -> None:
        """Buffers of at least ``needed`` slots for a tree of ``nodes`` nodes (up to the context)."""
        state.cache.grow(min(max(needed, 2 * state.capacity), self.max_context or needed))

    def commit_path(self, state: HFState, path: torch.Tensor, counts: torch.Tensor) -> None:
        """Keep each row's first ``counts[b]`` nodes of ``path: [B, M]`` after its prefix; drop the pending tree."""
        source, destination = path_slots(state.lengths, torch.as_tensor(path, device=state.lengths.device), counts)
        for buffers in (state.cache.keys, state.cache.values):
            for cache in buffers:
                heads, width = cache.shape[1], cache.shape[3]
                cache.scatter_(
                    2,
                    destination[:, None, :, None].expand(-1, heads, -1, width),
                    cache.gather(2, source[:, None, :, None].expand(-1, heads, -1, width)),
                )
        state.lengths = state.lengths + counts
        state.bound = min(state.bound + path.shape[1], state.capacity)  # no read: the decoder's own tightens it
        state.tree = None

    def truncate(self, state: HFState, lengths: torch.Tensor, *, bound: int | None = None) -> None:
        """Cut rows back (the slots past a row's end are overwritten later), without a host read: ``bound`` is a
        known upper bound on the new lengths, else the old one stays (a decoder tightens it from its own read,
        ``decoders.models.protocol.tighten``)."""
        state.lengths = (
            check_truncate(state, lengths)
            if self.device.type == "cpu"
            else torch.as_tensor(lengths, dtype=torch.int64, device=self.device)
        )
        state.bound = state.bound if bound is None else min(bound, state.bound)
        state.tree = None


class StaticHF(HFCausalLM):
    """``HFCausalLM`` over a static cache, its short calls compiled (``decoders.models.compiled``'s docstring).
    ``backend`` is one of ``BACKENDS``; ``mode`` is inductor's (None: ``compile_mode`` of the model's device).
    ``compiled_shapes`` holds the shapes (rows, width, capacity) of the calls that ran compiled so far."""

    fixed_widths = True  # verify at gamma + 1 tokens: no host read, one compiled shape a gamma

    def __init__(
        self, model, *, backend: str = "inductor", mode: str | None = None, max_width: int = MAX_COMPILED_WIDTH
    ) -> None:
        super().__init__(model)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend, self.max_width = backend, max_width
        self.mode = compile_mode(self.device) if mode is None and backend == "inductor" else mode
        self.compiled_shapes: set = set()
        raise_shape_limits()
        self._compiled = (
            self._call
            if backend == "none"
            else torch.compile(self._call, fullgraph=True, dynamic=None, backend=backend, mode=self.mode)
        )

    def __repr__(self) -> str:
        return f"StaticHF({type(self.model).__name__}, backend={self.backend!r}, mode={self.mode!r})"

    @property
    def decode_path(self) -> str:
        return f"compiled, static cache ({self.backend}, mode {self.mode})"

    def new_state(self, batch_size: int, capacity: int | None = None) -> HFState:
        """A state whose buffers hold ``capacity`` tokens a row (None: the model's context), allocated now."""
        slots = capacity or self.max_context
        if slots is None:
            raise ValueError("a static cache needs a capacity: the model states no context length")
        slots = min(slots, self.max_context or slots)
        state = HFState(RowCache(slots), torch.zeros(batch_size, dtype=torch.int64, device=self.device))
        allocate(state.cache, self.model.config, batch_size, self.mask_dtype, self.device)
        return state

    def _make_room(self, tokens: torch.Tensor, state: HFState, counts: torch.Tensor | None) -> torch.Tensor:
        """Checked ``counts``: a static cache never grows, so a row that would outgrow it is an error (the host
        bound was loose: tightened by the read)."""
        counts = check_step(self, tokens, state, counts, state.capacity)
        state.bound = int(state.lengths.max())
        return counts

    def truncate(self, state: HFState, lengths: torch.Tensor, *, bound: int | None = None) -> None:
        """Cut rows back by moving their lengths; checked on the device (no host read on any device)."""
        lengths = torch.as_tensor(lengths, dtype=torch.int64, device=self.device)
        torch._assert_async(((lengths >= 0) & (lengths <= state.lengths)).all(), "lengths must be in [0, held] per row")
        state.lengths = lengths
        state.bound = state.bound if bound is None else min(bound, state.bound)
        state.tree = None

    def _grow_for_tree(self, state: HFState, nodes: int, needed: int) -> None:
        raise ValueError(
            f"a tree of {nodes} nodes after {state.bound} tokens exceeds the static cache's capacity of "
            f"{state.capacity} tokens"
        )

    def _visible(self, state: HFState, bound: int) -> int:
        """Every slot, the spare last one included: one key width for every call."""
        return state.capacity + 1

    def _call(self, tokens, cache: RowCache, write_at, mask, position_ids, keep: int) -> torch.Tensor:
        """One call of the wrapped model over the whole static cache: the function that is compiled."""
        if not self.boolean_mask:
            mask = torch.zeros(mask.shape, dtype=self.mask_dtype, device=mask.device).masked_fill_(
                ~mask, torch.finfo(self.mask_dtype).min
            )
        cache.prepare(write_at, None)  # every slot: no Python integer for the graph to specialise on
        return float_logits(
            self.model(
                input_ids=tokens,
                cache=cache,
                attention_mask=mask,
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=keep,
            ).logits
        )

    def _run(self, tokens, state: HFState, write_at, visible: int, mask, position_ids, keep: int = 0) -> torch.Tensor:
        """The compiled call where the shape is a step's (no prompt, at most ``max_width`` tokens), else eager."""
        batch, width = tokens.shape
        if keep not in (0, width) or width > self.max_width:
            return self._call(tokens, state.cache, write_at, mask, position_ids, keep)
        self.compiled_shapes.add((batch, width, state.capacity))
        if position_ids is write_at:  # one tensor as two inputs would be a graph of its own (dynamo's aliasing guard)
            position_ids = position_ids.clone()
        return self._compiled(tokens, state.cache, write_at, mask, position_ids, 0)


def float_logits(logits: torch.Tensor) -> torch.Tensor:
    """Logits in float32 at least: half precision widened, float64 kept (the exact audits' tiny models)."""
    return logits if logits.dtype == torch.float64 else logits.float()


def _layer_stack(model) -> tuple:
    """(the base model inside ``model``, the name of its list of decoder layers)."""
    inner = getattr(model, model.base_model_prefix)
    for name in ("layers", "h"):  # Llama and its kin; GPT-2
        if isinstance(getattr(inner, name, None), torch.nn.ModuleList):
            return inner, name
    raise ValueError(f"{type(model).__name__} keeps its decoder layers under neither 'layers' nor 'h'")


def layer_count(adapter: HFCausalLM) -> int:
    """How many decoder layers the adapter's model has."""
    inner, name = _layer_stack(adapter.model)
    return len(getattr(inner, name))


def layer_skip(adapter: HFCausalLM, layers: int) -> HFCausalLM:
    """Self-speculation (docs/theory.md §11): the adapter's model through its first ``layers`` decoder layers,
    then its own final norm and LM head, as a model of its own with its own cache. Every weight is the
    target's (shared, not copied): only the module lists and the configuration are new."""
    model = adapter.model
    total = layer_count(adapter)
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers < total:
        raise ValueError(
            f"layerskip layers must be an integer in [1, {total - 1}] (the target has {total} layers), got {layers!r}"
        )
    inner, name = _layer_stack(model)
    config = copy.copy(model.config)
    config.num_hidden_layers = layers
    shallow_inner = copy.copy(inner)
    shallow_inner._modules = dict(inner._modules, **{name: torch.nn.ModuleList(list(getattr(inner, name))[:layers])})
    shallow_inner.config = config
    shallow = copy.copy(model)
    shallow._modules = dict(model._modules, **{model.base_model_prefix: shallow_inner})
    shallow.config = config
    draft = HFCausalLM(shallow)
    draft.early_exit = layers
    return draft


def is_model_directory(spec) -> bool:
    """Whether ``spec`` names a local Hugging Face model directory (one holding a ``config.json``)."""
    return Path(spec).is_dir() and (Path(spec) / "config.json").is_file()


def load_directory(path, *, device: str = "cpu", dtype: torch.dtype | None = None):
    """(``HFCausalLM``, tokenizer) of a Hugging Face model directory, read from disk only
    (``local_files_only``): a hub id or a missing directory is a ``ValueError``, never a download."""
    if not is_model_directory(path):
        raise ValueError(
            f"'{path}' is not a Hugging Face model directory (no config.json there); nothing is "
            f"downloaded: give a local directory, e.g. one written by spectheory export-hf"
        )
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


def check_same_tokenizer(target, draft, draft_name: str = "the draft") -> None:
    """A pair must map text to the same ids: refused with the first difference named."""
    if target is draft:
        return
    ours, theirs = target.get_vocab(), draft.get_vocab()
    for token in sorted(set(ours) | set(theirs)):
        if ours.get(token) != theirs.get(token):
            raise ValueError(
                f"the target's and {draft_name}'s tokenizers differ: {token!r} is id {ours.get(token)} "
                f"for the target and {theirs.get(token)} for {draft_name}"
            )


def tinygpt_to_gpt2(model):
    """The same network as a ``transformers.GPT2LMHeadModel`` (pre-LayerNorm, learned positions, exact GELU,
    tied embeddings): TinyGPT's ``nn.Linear`` weights become GPT-2's transposed ``Conv1D`` weights. Used to
    compare our decoders with Hugging Face ``generate`` on identical models."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    config = GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.max_context,
        n_embd=c.d_model,
        n_layer=c.n_layer,
        n_head=c.n_head,
        activation_function="gelu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=model.norm.eps,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=True,
    )
    weights = {
        "transformer.wte.weight": model.embed.weight,
        "transformer.wpe.weight": model.position.weight,
        "transformer.ln_f.weight": model.norm.weight,
        "transformer.ln_f.bias": model.norm.bias,
        "lm_head.weight": model.embed.weight,
    }
    for i, block in enumerate(model.blocks):
        prefix = f"transformer.h.{i}."
        for ours, theirs in ((block.norm_attention, "ln_1"), (block.norm_mlp, "ln_2")):
            weights[prefix + theirs + ".weight"], weights[prefix + theirs + ".bias"] = ours.weight, ours.bias
        for ours, theirs in (
            (block.qkv, "attn.c_attn"),
            (block.project, "attn.c_proj"),
            (block.mlp[0], "mlp.c_fc"),
            (block.mlp[2], "mlp.c_proj"),
        ):
            weights[prefix + theirs + ".weight"], weights[prefix + theirs + ".bias"] = ours.weight.t(), ours.bias
    converted = GPT2LMHeadModel(config)
    converted.load_state_dict(
        {key: value.detach().clone() for key, value in weights.items()}
    )  # strict: every weight mapped
    return converted.to(device=model.device, dtype=model.embed.weight.dtype).eval()
