"""The measurements behind the committed results, on the shipped models and the held-out corpus: each
function loads what it needs, measures, and returns the JSON document (without provenance, which the
writer adds). ``spectheory alpha`` and ``bench`` print them; the figure scripts' ``compute`` write them."""

from __future__ import annotations

import torch

from decoders.harness import alpha, bench, zoo
from decoders.harness.corpus import load_corpus
from decoders.harness.inputs import load_inputs
from decoders.harness.tasks import benchmark_prompts
from spectheory.validation import as_positive_int

__all__ = ["alpha_document", "lenience_document", "bench_document", "blockwise_document", "shipped_prompts"]


def shipped_prompts(count: int, length: int, seed: int) -> torch.Tensor:
    """``count`` seeded held-out windows ``[count, length]`` of the shipped corpus."""
    return alpha.text_windows(load_corpus().held_out, count, length, seed)


def alpha_document(drafts=None, temperatures=(0.0, 1.0), *, target: str | None = None, text=None, windows: int = 32,
                   prompts: int = 16, gamma: int = 4, seed: int = 0, device: str = "cpu",
                   progress: bool | None = None) -> dict:
    """Leviathan et al.'s Table 3 analogue: both estimates of alpha for each draft (default: every shipped
    one) against ``target`` (default: the shipped one) at each temperature, on the held-out ``text`` file
    (default: the shipped corpus's held-out split; ``decoders.harness.inputs``)."""
    inputs = load_inputs(target, list(drafts or zoo.DRAFTS), text=text, device=device)
    estimates = alpha.alpha_table(inputs.target, inputs.drafts, inputs.held_out, tuple(temperatures), windows=windows,
                                  prompts=prompts, gamma=gamma, seed=seed, progress=progress,
                                  **alpha.window_shape(inputs.target, *inputs.drafts.values()))
    return {"corpus_fingerprint": inputs.fingerprint, "text": inputs.text,
            "estimates": [e.as_dict() for e in estimates]}


def lenience_document(*, windows: int = 32, progress: bool | None = None) -> dict:
    """Leviathan et al.'s Table 5 analogue: alpha of every shipped draft at every lenience of ``LENIENCES``."""
    corpus = load_corpus()
    drafts = {name: zoo.load_draft(name) for name in zoo.DRAFTS}
    rows = alpha.alpha_under_lenience(zoo.load_target(), drafts, corpus.held_out, alpha.LENIENCES, windows=windows,
                                      progress=progress)
    return {"corpus_fingerprint": corpus.fingerprint, "windows": windows, "rows": rows}


def bench_document(draft: str = "transformer", settings: bench.BenchSettings = bench.BenchSettings(), *,
                   target: str | None = None, text=None, device: str = "cpu", dtype: torch.dtype = torch.float32,
                   hf: bool = False, hf_gamma: int | None = None, task: str | None = None,
                   progress: bool | None = None) -> dict:
    """A pair's speed against Theorem 3.8 (Table 4 analogue; default the shipped pair, prompts from the held-out
    ``text`` file or the shipped corpus's held-out split); with ``hf``, our loops against Hugging Face on the same
    networks at ``hf_gamma`` (default: the best measured gamma at the first temperature). With ``task`` the prompts
    are that task's (``decoders.harness.tasks``) instead of windows of the text."""
    if hf_gamma is not None:
        as_positive_int("hf_gamma", hf_gamma)
    inputs = load_inputs(target, [draft], text=text, device=device, dtype=dtype)
    target_model, model = inputs.target, inputs.drafts[draft]
    if hf:
        from decoders.harness.hf_compare import check_comparable

        check_comparable(target_model, model)
    prompts = benchmark_prompts(inputs, task, settings.prompts, settings.prompt_length, settings.seed)
    report = bench.bench_pair(target_model, model, prompts, settings, target_name=target or "shipped target",
                              draft_name=draft, progress=progress)
    document = dict(report.as_dict(), text=inputs.text, task=task)
    if settings.batch_sizes:
        pool = alpha.text_windows(inputs.held_out, max(settings.batch_prompts(b) for b in settings.batch_sizes),
                                  settings.prompt_length, settings.seed)
        document["batches"] = bench.bench_batches(target_model, model, pool, settings, progress=progress)
    if hf:
        from decoders.harness.hf_compare import hf_comparison

        gamma = hf_gamma or report.best(settings.temperatures[0])["gamma"]
        document["hf"] = hf_comparison(target_model, model, prompts, settings, gamma=gamma, progress=progress)
    return document


def blockwise_document(settings: bench.BenchSettings = bench.BenchSettings(), *,
                       progress: bool | None = None) -> dict:
    """Stern et al.'s Fig. 4 analogue: the shipped target with its proposal heads (``bench.BLOCKWISE_CONFIGS``)."""
    prompts = shipped_prompts(settings.prompts, settings.prompt_length, settings.seed)
    return bench.bench_blockwise(zoo.load_blockwise(), prompts, settings, progress=progress)
