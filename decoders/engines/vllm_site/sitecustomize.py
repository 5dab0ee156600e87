"""Run by every interpreter of a vLLM server this toolkit starts with ``patch=expand`` (this directory is on its
PYTHONPATH, SPECTHEORY_VLLM_PATCH=expand): vLLM's API server, engine core and workers all get the fixed kernel."""

import os

if "expand" in os.environ.get("SPECTHEORY_VLLM_PATCH", "").split(","):
    import vllm_expand_fix

    vllm_expand_fix.install_on_import()
