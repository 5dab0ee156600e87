"""Counting the host's reads of tensor values (docs/gpu.md, "Host synchronisations"): on CUDA each one waits for the
device's queued work, so a decode loop that reads once per iteration lets the host run ahead of the GPU. A CPU run
counts the same reads as a CUDA run of the same code, so the count is tested on CPU."""

from __future__ import annotations

from collections import Counter

from torch.overrides import TorchFunctionMode

__all__ = ["HostReads", "READS"]

#: The tensor methods that copy values to the host (``nonzero``: its output's size is a value).
READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero")


class HostReads(TorchFunctionMode):
    """A context in which every read of ``READS`` is counted: ``total`` and ``by_name``."""

    def __init__(self) -> None:
        super().__init__()
        self.by_name: Counter = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS:
            self.by_name[name] += 1
        return func(*args, **(kwargs or {}))
