"""How the vLLM engine starts its servers and what every request carries: ``VLLMOptions``, parsed from the part of
``--engine vllm:OPTIONS`` after the colon (docs/engines.md, "vLLM"). Everything here is checked before a server
starts: a method or mode vLLM's CPU build lacks is one line, not a server that dies after two minutes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from decoders.engines.llama_server_options import _float_or_text
from plumbing.validation import as_int

__all__ = ["METHODS", "DRAFT_SAMPLING", "VERIFIERS", "REQUEST_FIELDS", "PATCHES", "VLLMOptions"]

#: Speculative methods vLLM 0.32's CPU build starts (vllm/config/speculative.py): prompt lookup, a draft model, and
#: suffix decoding (its arctic-inference package); none: no speculation at any ``speculate``.
METHODS = ("ngram", "draft_model", "suffix")
#: What a drafting method or model needs a GPU or a trained head for, with why (refused before a server starts).
NEEDS_GPU = {
    "eagle": "an EAGLE head trained for the target (none exists for SmolLM2-135M)",
    "eagle3": "an EAGLE-3 head trained for the target (none exists for SmolLM2-135M)",
    "mtp": "a model with multi-token-prediction layers (SmolLM2 has none)",
    "medusa": "Medusa heads trained for the target (none exist for SmolLM2-135M)",
    "ngram_gpu": "a GPU (the n-gram proposer on the device)",
    "dflash": "a DFlash draft trained for the target",
    "dspark": "a DSpark draft trained for the target",
}
#: vLLM's draft_sample_method: greedy (the draft's argmax, one-hot in the verifier) or probabilistic (sampled drafts
#: verified against their probabilities).
DRAFT_SAMPLING = ("greedy", "probabilistic")
#: vLLM's rejection_sample_method values that run on a CPU: ``standard`` only. ``block`` (block verification) lives
#: in the V2 model runner, which needs Triton; the CPU build falls back to the V1 runner, whose rejection sampler
#: reads only ``synthetic``, so ``block`` would be ignored without a word. ``synthetic`` asserts in the CPU kernels
#: (vllm/utils/cpu_triton_utils.py: "Synthetic acceptance not supported with CPU sampling").
VERIFIERS = ("standard",)
REFUSED_VERIFIERS = {
    "block": "block verification runs in vLLM's V2 model runner, which needs Triton (a GPU); the CPU build uses the "
    "V1 runner, whose rejection sampler ignores it (it would verify token by token without a word)",
    "synthetic": "synthetic acceptance is not in vLLM's CPU kernels (an assertion in vllm/utils/cpu_triton_utils.py), "
    "and it is not exact by design (it accepts at fixed rates)",
}
#: Request fields beyond the engines' common ones (``field=KEY:NUMBER``) that vLLM's completions take.
REQUEST_FIELDS = ("presence_penalty", "frequency_penalty", "min_tokens")
#: Fixes of vLLM's CPU build a server can run with (``patch=NAME``), each loaded into every vLLM process at start:
#: ``expand``, the rejection sampler's expand kernel (docs/upstream/vllm-cpu-expand.md; decoders/engines/vllm_site).
PATCHES = ("expand",)


@dataclass(frozen=True)
class VLLMOptions:
    """How the engine starts its servers: ``method`` (``METHODS``, by default ngram, the drafter that needs no draft
    model; None, ``method=none``: no speculation); for ngram ``lookup_min``/``lookup_max`` (prompt_lookup_min/max);
    for draft_model ``draft`` (an HF directory) or ``draft_layers`` (SmolLM2's first K layers, written once as an HF
    directory) and ``draft_sampling`` (``DRAFT_SAMPLING``); ``verify`` (``VERIFIERS``); ``threads`` (the OpenMP
    threads, bound to that many of this process's CPUs), ``kv`` (GiB of KV cache), ``seqs`` (--max-num-seqs),
    ``completions`` (samples per request, ``n``), ``context`` (--max-model-len), ``eager`` (1: --enforce-eager, no
    compile warm-up: a start in seconds instead of minutes, slower decoding); and what every request carries
    beyond the common parameters: ``fields`` ((key, number) of ``REQUEST_FIELDS``), ``stop`` (stop strings) and
    ``logit_bias`` ((token, bias)); ``patch`` (one of ``PATCHES``: vLLM run with that fix of its CPU build, to show
    what the fix changes; None, the default: vLLM as installed)."""

    method: str | None = "ngram"
    lookup_min: int = 2
    lookup_max: int = 4
    draft: str | None = None
    draft_layers: int | None = None
    draft_sampling: str = "greedy"
    verify: str = "standard"
    threads: int = 2
    kv: int = 1
    seqs: int = 16
    completions: int = 16
    context: int = 1024
    eager: int = 0
    fields: tuple = ()
    stop: tuple = ()
    logit_bias: tuple = ()
    patch: str | None = None

    WORDS = {
        "method": "method",
        "lookup-min": "lookup_min",
        "lookup-max": "lookup_max",
        "draft": "draft",
        "draft-layers": "draft_layers",
        "draft-sampling": "draft_sampling",
        "verify": "verify",
        "threads": "threads",
        "kv": "kv",
        "seqs": "seqs",
        "completions": "completions",
        "context": "context",
        "eager": "eager",
        "field": "fields",
        "stop": "stop",
        "logit-bias": "logit_bias",
        "patch": "patch",
    }
    INTEGERS = ("lookup_min", "lookup_max", "draft_layers", "threads", "kv", "seqs", "completions", "context", "eager")

    def __post_init__(self) -> None:

        if self.method in NEEDS_GPU:
            raise ValueError(
                f"vllm method {self.method} needs {NEEDS_GPU[self.method]}; on this CPU build use one of "
                f"{', '.join(METHODS)}"
            )
        if self.method is not None and self.method not in METHODS:
            raise ValueError(f"vllm method must be one of {', '.join(METHODS)} or none, got {self.method!r}")
        if self.verify in REFUSED_VERIFIERS:
            raise ValueError(f"vllm verify={self.verify}: {REFUSED_VERIFIERS[self.verify]}")
        if self.verify not in VERIFIERS:
            raise ValueError(f"vllm verify must be one of {', '.join(VERIFIERS)}, got {self.verify!r}")
        if self.draft_sampling not in DRAFT_SAMPLING:
            raise ValueError(
                f"vllm draft-sampling must be one of {', '.join(DRAFT_SAMPLING)}, got {self.draft_sampling!r}"
            )
        for name in self.INTEGERS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"vllm {name.replace('_', '-')} must be an integer, got {value!r}")
        as_int("lookup_min", self.lookup_min, low=1, high=64)
        as_int("lookup_max", self.lookup_max, low=self.lookup_min, high=64)
        as_int("threads", self.threads, low=1, high=512)
        as_int("kv", self.kv, low=1, high=1024)
        as_int("seqs", self.seqs, low=1, high=1024)
        as_int("completions", self.completions, low=1, high=self.seqs)
        as_int("context", self.context, low=64, high=1 << 20)
        as_int("eager", self.eager, low=0, high=1)
        if self.patch is not None and self.patch not in PATCHES:
            raise ValueError(f"vllm patch must be one of {', '.join(PATCHES)}, got {self.patch!r}")
        drafts = (self.draft is not None) + (self.draft_layers is not None)
        if (self.method == "draft_model") != (drafts == 1):
            raise ValueError(
                "vllm method=draft_model needs one of draft=DIR or draft-layers=K"
                if self.method == "draft_model"
                else f"vllm method {self.method} takes no draft"
            )
        if self.draft is not None and not (Path(self.draft) / "config.json").is_file():
            raise ValueError(f"vllm draft {self.draft!r} is not a Hugging Face model directory (no config.json)")
        if self.draft_layers is not None:
            as_int("draft_layers", self.draft_layers, low=1, high=1024)
        if self.draft_sampling != "greedy" and self.method != "draft_model":
            raise ValueError("vllm draft-sampling applies to method=draft_model only")
        for key, value in self.fields:
            if key not in REQUEST_FIELDS or not isinstance(value, float):
                raise ValueError(
                    f"vllm field must be KEY:NUMBER with KEY one of {', '.join(REQUEST_FIELDS)}, got {key}:{value}"
                )
        for token, bias in self.logit_bias:
            if not isinstance(token, int) or token < 0 or not isinstance(bias, float):
                raise ValueError(f"vllm logit-bias must be TOKEN:BIAS (an id >= 0 and a number), got {token}:{bias}")

    @classmethod
    def parse(cls, words: str) -> "VLLMOptions":
        """Options from ``method=draft_model,draft-layers=16,threads=2`` (the part of ``--engine vllm:...`` after
        the colon)."""
        values: dict = {}
        for word in filter(None, words.split(",")):
            key, equals, value = word.partition("=")
            if not equals or key not in cls.WORDS:
                raise ValueError(
                    f"vllm options are {', '.join(k + '=' for k in cls.WORDS)} separated by commas, got {word!r}"
                )
            name = cls.WORDS[key]
            if name in ("fields", "logit_bias"):
                first, _, number = value.partition(":")
                first = int(first) if name == "logit_bias" and first.isdigit() else first
                values[name] = values.get(name, ()) + ((first, _float_or_text(number)),)
            elif name == "stop":
                values[name] = values.get(name, ()) + (value,)
            elif name == "method" and value == "none":
                values[name] = None
            else:
                values[name] = int(value) if name in cls.INTEGERS and value.isdigit() else value
        return cls(**values)

    def speculative_config(self, speculate: int, draft_directory: str | None) -> dict | None:
        """vLLM's ``--speculative-config`` for ``speculate`` draft tokens (None: a plain server)."""
        if not speculate or self.method is None:
            return None
        config: dict = {"method": self.method, "num_speculative_tokens": speculate}
        if self.method == "ngram":
            config.update(prompt_lookup_min=self.lookup_min, prompt_lookup_max=self.lookup_max)
        if self.method == "draft_model":
            config.update(model=draft_directory, draft_sample_method=self.draft_sampling)
        return dict(config, rejection_sample_method=self.verify)

    def request_fields(self) -> dict:
        """What every request carries beyond the common sampling parameters."""
        return {
            **dict(self.fields),
            **({"stop": list(self.stop)} if self.stop else {}),
            **({"logit_bias": {str(token): bias for token, bias in self.logit_bias}} if self.logit_bias else {}),
        }

    def words(self) -> list:
        """The options that change the law or the speculation, in words for the engine's name."""
        method = (
            "no speculation"
            if self.method is None
            else self.method
            + (f" lookup {self.lookup_min}-{self.lookup_max}" if self.method == "ngram" else "")
            + (
                f" {self.draft_layers} layers"
                if self.draft_layers
                else f" {Path(self.draft).name}"
                if self.draft
                else ""
            )
            + (f" {self.draft_sampling} drafts" if self.method == "draft_model" else "")
        )
        return (
            [method]
            + ["eager"] * bool(self.eager)
            + [f"patched: {self.patch}"] * bool(self.patch)
            + [f"{key} {value:g}" for key, value in self.fields]
            + [f"stop {json.dumps(list(self.stop))}"] * bool(self.stop)
            + [f"logit bias {dict(self.logit_bias)}"] * bool(self.logit_bias)
        )
