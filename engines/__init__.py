"""Serving engines driven through one interface (``base.Engine``; docs/engines.md): llama.cpp in-process
(``llama-cpp``) and any OpenAI-compatible completions endpoint by URL."""

from __future__ import annotations

from engines.base import END, Engine, EngineRun, EngineSampling
from engines.openai import is_url

__all__ = ["END", "Engine", "EngineRun", "EngineSampling", "ENGINES", "open_engine"]

#: The in-process engines by name; anything else must be an http(s) URL.
ENGINES = ("llama-cpp",)


def open_engine(spec: str, *, gguf: str | None = None, concurrency: int = 4, threads: int | None = None) -> Engine:
    """The engine ``spec`` names: ``llama-cpp`` on the GGUF file ``gguf`` (default SmolLM2's), or a URL (the
    server's own model); a ValueError (one line at the CLI) for anything else, a missing llama-cpp-python, or a
    dead URL."""
    if spec == "llama-cpp":
        from engines.llama_cpp import LlamaCppEngine
        from decoders.models.gguf import is_gguf_file, real_model_path

        path = real_model_path("smollm2") if gguf in (None, "smollm2") else gguf
        if not is_gguf_file(path):
            raise ValueError(f"the llama-cpp engine reads a GGUF file; --target {gguf!r} is not one")
        return LlamaCppEngine(path, threads=threads)
    if is_url(spec):
        from engines.openai import OpenAIEngine

        return OpenAIEngine(spec, concurrency=concurrency)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)} or an http(s):// URL, got {spec!r}")
