"""The correct ``expand_kernel`` for vLLM's CPU build (docs/upstream/vllm-cpu-expand.md), standard library and torch
only, so that vLLM's own interpreter loads it: ``expand_fixed`` is the kernel's law for any dtype, and
``install_on_import`` puts it in place of ``vllm.utils.cpu_triton_utils._expand_kernel_impl`` as that module is
imported, before vLLM's CPU platform registers its kernels (how ``--engine vllm:patch=expand`` serves)."""

import importlib.abc
import os
import sys

MODULE = "vllm.utils.cpu_triton_utils"


def expand_fixed(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    """expand_kernel's law for any dtype: request b's value (``replace_to`` where it is ``replace_from``) at each of
    its tokens."""
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    output[: int(counts.sum())] = values.repeat_interleave(counts)


class _Patcher(importlib.abc.MetaPathFinder):
    """Finds ``MODULE`` by the other finders and replaces its expand kernel once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    module._expand_kernel_impl = expand_fixed
                    print(
                        f"spectheory: {MODULE}._expand_kernel_impl patched (pid {os.getpid()})",
                        file=sys.stderr,
                        flush=True,
                    )

                spec.loader.exec_module = exec_module
                return spec
        return None


def install_on_import() -> None:
    """Patch ``MODULE`` when it is imported (it must not be imported yet)."""
    if MODULE in sys.modules:
        raise RuntimeError(f"{MODULE} is already imported: the expand fix must be installed first")
    sys.meta_path.insert(0, _Patcher())
