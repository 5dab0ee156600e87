"""vLLM's rejection sampler driven as a function, run by vLLM's own interpreter (``vllm_home()/bin/python
decoders/engines/vllm_probe.py < cases.json > counts.json``): it imports only the standard library, torch and vLLM, so
it also runs beside any vLLM install, without this toolkit (docs/findings/vllm.md, "vLLM's rejection sampler").

Each case of the JSON on stdin is a batch of rows, each row one request of a speculative step: its draft tokens
(``draft``, k >= 0 ids) or a law to draw them from (``draft_law``, [k][V]: drawn here, afresh for every draw),
the draft's probabilities (``draft_probs`` [k][V], or null: vLLM's one-hot case, the n-gram and greedy drafts), the
target's logits at each draft position and the bonus position (``logits`` [k + 1][V]), and its sampling
parameters (``temperature``, 0 for greedy; ``top_k``; ``top_p``; ``repetition_penalty``, ``presence_penalty``,
``frequency_penalty`` over ``prompt`` and ``output``; ``seed``, a per-request generator). The probe builds vLLM's
``SpecDecodeMetadata`` and ``SamplingMetadata`` for the batch as its model runner would (``layout``), calls
``RejectionSampler.forward`` (the target logits processed by vLLM's own penalties, temperature, top-k and top-p,
the bonus token drawn by vLLM's ``Sampler``) ``draws`` times, the batch's rows in a fresh random order each call,
and prints, per case and row, how often each output (the emitted tokens, comma-joined; with ``draft_law``, the
drafts too, ``drafts|output``) came out; a case that raises is reported with its error.

``patch``: ["expand"] replaces vLLM's CPU implementation of the rejection sampler's ``expand_kernel`` (which writes
int64 copies of float32 and int32 tensors and never copies them back, so the per-token temperature, top-k and top-p
it expands are uninitialised memory; docs/upstream/vllm-cpu-expand.md) with a correct one before the run.
"""

from __future__ import annotations

import json
import os
import sys
import time

# This file's directory holds the toolkit's decoders/engines/vllm.py, which would shadow the vllm package.
sys.path[:] = [
    entry for entry in sys.path if os.path.abspath(entry or ".") != os.path.dirname(os.path.abspath(__file__))
]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_site"))

import torch  # noqa: E402
from vllm_expand_fix import expand_fixed  # noqa: E402


def _platform(patch: list) -> None:
    """vLLM's CPU kernels for the rejection sampler (registered by its CPU platform when Triton has no CPU
    backend, as in the CPU build), with the patches asked for."""
    from vllm.platforms import current_platform

    register = getattr(type(current_platform), "register_triton_kernel_overrides", None)
    if register is not None:
        register()
    if "expand" in patch:
        from vllm.triton_utils.dispatcher import register_kernels

        register_kernels({"vllm.v1.sample.rejection_sampler.expand_kernel": expand_fixed})


def layout(rows: list, vocab: int):
    """(SpecDecodeMetadata, the index of each request's first logit row) of ``rows`` as vLLM's model runner lays a
    batch out: request b's k_b target positions, then its bonus position."""
    import numpy as np
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    drafts = [list(row["draft_now"]) for row in rows]
    counts = [len(ids) for ids in drafts]
    sampled = np.cumsum([k + 1 for k in counts])
    starts = np.concatenate([[0], sampled[:-1]])
    target = [int(s) + i for s, k in zip(starts, counts) for i in range(k)]
    bonus = [int(s) + k for s, k in zip(starts, counts)]
    metadata = SpecDecodeMetadata(
        draft_token_ids=torch.tensor([t for ids in drafts for t in ids], dtype=torch.int32),
        num_draft_tokens=counts,
        cu_num_draft_tokens=torch.tensor(np.cumsum(counts), dtype=torch.int32),
        cu_num_sampled_tokens=torch.tensor(sampled, dtype=torch.int32),
        target_logits_indices=torch.tensor(target, dtype=torch.int32),
        bonus_logits_indices=torch.tensor(bonus, dtype=torch.int32),
        logits_indices=torch.arange(int(sampled[-1]), dtype=torch.int32),
    )
    return metadata, starts


def sampling_metadata(rows: list, vocab: int, generators: dict):
    """vLLM's SamplingMetadata of ``rows`` (prompt ids padded with ``vocab``, as its input batch pads them)."""
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    temperature = torch.tensor([row.get("temperature", 1.0) for row in rows], dtype=torch.float32)
    greedy = temperature == 0
    top_k = [row.get("top_k") or vocab for row in rows]
    top_p = [row.get("top_p") or 1.0 for row in rows]
    penalties = {
        name: torch.tensor([float(row.get(name, neutral)) for row in rows], dtype=torch.float32)
        for name, neutral in (("repetition_penalty", 1.0), ("presence_penalty", 0.0), ("frequency_penalty", 0.0))
    }
    no_penalties = all(
        row.get("repetition_penalty", 1.0) == 1.0
        and not row.get("presence_penalty")
        and not row.get("frequency_penalty")
        for row in rows
    )
    width = max([len(row.get("prompt", [])) for row in rows] + [1])
    prompts = torch.full((len(rows), width), vocab, dtype=torch.int64)
    for b, row in enumerate(rows):
        prompts[b, : len(row.get("prompt", []))] = torch.tensor(row.get("prompt", []), dtype=torch.int64)
    return SamplingMetadata(
        temperature=temperature,
        all_greedy=bool(greedy.all()),
        all_random=bool((~greedy).all()),
        top_p=None if all(p == 1.0 for p in top_p) else torch.tensor(top_p, dtype=torch.float32),
        top_k=None if all(k == vocab for k in top_k) else torch.tensor(top_k, dtype=torch.int32),
        generators=generators,
        max_num_logprobs=None,
        no_penalties=no_penalties,
        prompt_token_ids=None if no_penalties else prompts,
        frequency_penalties=penalties["frequency_penalty"],
        presence_penalties=penalties["presence_penalty"],
        repetition_penalties=penalties["repetition_penalty"],
        output_token_ids=[list(row.get("output", [])) for row in rows],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=LogitsProcessors(),
        spec_token_ids=[list(row["draft_now"]) for row in rows],
    )


def _batch(base: list, order: list, vocab: int, random: torch.Generator, seed_offset: int):
    """(rows, metadata, logits, sampling metadata, draft probs) of ``base``'s rows in ``order`` (slot -> base row),
    drafts of ``draft_law`` rows drawn afresh."""
    rows = []
    for slot in order:
        row = dict(base[slot % len(base)])
        if row.get("draft_law") is not None:
            row["draft_probs"] = row["draft_law"]
            row["draft_now"] = torch.multinomial(
                torch.tensor(row["draft_law"], dtype=torch.float64), 1, generator=random
            )[:, 0].tolist()
        else:
            row["draft_now"] = list(row.get("draft", []))
        rows.append(row)
    generators = {}
    for b, row in enumerate(rows):
        if row.get("seed") is not None:
            generator = torch.Generator()
            generator.manual_seed(int(row["seed"]) + seed_offset + b)
            generators[b] = generator
    metadata, _ = layout(rows, vocab)
    blocks = [torch.tensor(row["logits"], dtype=torch.float32) for row in base]  # [k + 1, V] per base row
    logits = torch.cat([blocks[slot % len(base)][: len(row["draft_now"]) + 1] for slot, row in zip(order, rows)])
    with_drafts = [row for row in rows if row["draft_now"]]
    given = all(row.get("draft_probs") is not None for row in with_drafts) and bool(with_drafts)
    probs = (
        torch.tensor(
            [p for row in with_drafts for p in row["draft_probs"][: len(row["draft_now"])]], dtype=torch.float32
        )
        if given
        else None
    )
    return rows, metadata, logits, sampling_metadata(rows, vocab, generators), probs


def run_case(case: dict, sampler, random: torch.Generator) -> dict:
    """Counts of each row's outputs over ``case["draws"]`` draws: calls of ``repeats`` copies of its rows, in
    ``orders`` random orders (a batch is laid out once per order; drafts drawn from a law are drawn every call).
    ``draft_probs``: "given" (default) passes the rows' draft probabilities, "withheld" passes None (a control)."""
    vocab, base = int(case["vocab"]), case["rows"]
    repeats, orders = int(case.get("repeats", 1)), int(case.get("orders", 8))
    calls = -(-int(case["draws"]) // repeats)
    drawn = any(row.get("draft_law") is not None for row in base)
    outputs = []  # (base row of each slot [B], outputs [B, k + 1]) per call
    per_order = -(-calls // orders)  # calls made in one order
    order: list = []
    for call in range(calls):
        fresh = call % per_order == 0
        if fresh:
            order = torch.randperm(len(base) * repeats, generator=random).tolist()
        if fresh or drawn:  # laid out again in a new order, or with drafts drawn afresh
            rows, metadata, logits, metadata_s, probs = _batch(base, order, vocab, random, call * len(order))
            if case.get("draft_probs", "given") == "withheld":
                probs = None
            slots = torch.tensor([slot % len(base) for slot in order])
            drafts = [torch.tensor(row["draft_now"]) for row in rows] if drawn else None
        output = sampler(metadata, probs, logits.clone(), metadata_s).sampled_token_ids
        if drawn:  # drafts first, then the output, separated by -2
            k = max(len(d) for d in drafts)
            padded = torch.full((len(rows), k), -1, dtype=torch.int64)
            for b, d in enumerate(drafts):
                padded[b, : len(d)] = d
            output = torch.cat([padded, torch.full((len(rows), 1), -2), output.long()], dim=1)
        outputs.append((slots, output.long()))
    counts = []
    slots = torch.cat([s for s, _ in outputs])
    width = max(o.shape[1] for _, o in outputs)
    table = torch.cat([torch.nn.functional.pad(o, (0, width - o.shape[1]), value=-1) for _, o in outputs])
    for index in range(len(base)):
        unique, count = torch.unique(table[slots == index], dim=0, return_counts=True)
        tally = {}
        for values, number in zip(unique.tolist(), count.tolist()):
            text = ",".join(str(v) for v in values if v != -1)
            tally[text.replace(",-2,", "|").replace(",-2", "|").replace("-2,", "|")] = number
        counts.append(tally)
    return {"name": case["name"], "draws": calls * repeats, "counts": counts}


def main() -> int:
    spec = json.load(sys.stdin)
    _platform(spec.get("patch", []))
    import vllm
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler

    sampler = RejectionSampler(Sampler())
    random = torch.Generator()
    random.manual_seed(int(spec.get("seed", 0)))
    results = []
    for case in spec["cases"]:
        started = time.perf_counter()
        try:
            result = run_case(case, sampler, random)
        except Exception as error:  # reported, as a verdict: a sampler that raises on a valid batch fails
            result = {
                "name": case["name"],
                "draws": 0,
                "counts": None,
                "error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
            }
        results.append(dict(result, seconds=time.perf_counter() - started))
        print(
            f"{case['name']}: {results[-1]['draws']} draws in {results[-1]['seconds']:.1f} s"
            + (f" ({result['error']})" if result.get("error") else ""),
            file=sys.stderr,
            flush=True,
        )
    json.dump({"vllm": vllm.__version__, "torch": torch.__version__, "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
