"""Serving engines driven through one interface (``base.Engine``; docs/engines.md): llama.cpp in-process
(``llama-cpp``), llama.cpp's own server started here (``llama-server[:OPTIONS]``) and any OpenAI-compatible
completions endpoint by URL."""

from __future__ import annotations

from engines.base import END, Engine, EngineRun, EngineSampling
from engines.openai import is_url

__all__ = ["END", "Engine", "EngineRun", "EngineSampling", "ENGINES", "open_engine"]

#: The in-process engines by name; anything else must be an http(s) URL.
ENGINES = ("llama-cpp", "llama-server[:OPTIONS]")
#: ``--target`` values that mean the engines' default model, SmolLM2-135M-Instruct's GGUF file.
DEFAULT_TARGETS = (None, "smollm2", "shipped")


def open_engine(spec: str, *, gguf: str | None = None, concurrency: int = 4, threads: int | None = None) -> Engine:
    """The engine ``spec`` names: ``llama-cpp`` or ``llama-server[:OPTIONS]`` (``engines.llama_server.ServerOptions``)
    on the GGUF file ``gguf`` (the one place that reads ``--target`` for an engine: a path, or None, "smollm2" or
    "shipped" for SmolLM2's), or a URL (the server's own model); a ValueError (one line at the CLI) for anything
    else, a missing llama-cpp-python, or a dead URL."""
    name, _, options = spec.partition(":")
    if name in ("llama-cpp", "llama-server") and not is_url(spec):
        from decoders.models.gguf import is_gguf_file, real_model_path

        path = real_model_path("smollm2") if gguf in DEFAULT_TARGETS else gguf
        if not is_gguf_file(path):
            raise ValueError(f"the {name} engine reads a GGUF file; --target {gguf!r} is not one")
        if name == "llama-server":
            from engines.llama_server import LlamaServerEngine, ServerOptions

            return LlamaServerEngine(path, ServerOptions.parse(options))
        if options:
            raise ValueError(f"the llama-cpp engine takes no options, got {spec!r}")
        from engines.llama_cpp import LlamaCppEngine

        return LlamaCppEngine(path, threads=threads)
    if is_url(spec):
        from engines.openai import OpenAIEngine

        return OpenAIEngine(spec, concurrency=concurrency)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)} or an http(s):// URL, got {spec!r}")
