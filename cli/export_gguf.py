"""Write a draft model for llama-server (`-md`; docs/engines.md): a llama GGUF file (default SmolLM2's) through its
first --layers blocks, every kept tensor and the tokenizer copied byte for byte, so that llama.cpp accepts it as a
draft of the full model (same vocabulary) and its alpha can be measured as any draft's (`spectheory alpha --target
smollm2 --drafts FILE`)."""

from __future__ import annotations

import argparse

from decoders.bench.export import export_truncated_gguf
from decoders.models.gguf import real_model_path
from plumbing.outputs import check_writable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="the GGUF file to write")
    parser.add_argument("--layers", type=int, required=True, help="blocks kept, from the first (SmolLM2 has 30)")
    parser.add_argument("--target", default="smollm2", help="a llama GGUF file, or smollm2 (default)")


def run(args: argparse.Namespace) -> int:

    check_writable(args.out)
    source = real_model_path("smollm2") if args.target == "smollm2" else args.target
    print(export_truncated_gguf(source, args.out, args.layers))
    return 0
