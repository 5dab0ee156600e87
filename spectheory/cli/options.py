"""Options that several commands share, defined once (and the lists of names they offer, from the
registries that own them)."""

from __future__ import annotations

import argparse

__all__ = ["add_device", "add_dtype", "names"]

DTYPES = ("float32", "float16", "bfloat16", "float64")


def names(registry) -> str:
    """A registry's names for a help text: "a, b, c"."""
    return ", ".join(registry)


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")


def add_dtype(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="model dtype (default float32; weights are stored as float16)")
