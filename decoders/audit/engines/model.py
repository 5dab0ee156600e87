"""An engine's samples against our model of the same weights (``--against model``; docs/engines.md §3): the
statistical audit of docs/theory.md §8 of the engine's samples against our float32 model's exact law, beside what
the numeric difference of the two forwards alone costs (``numeric_tv``)."""

from __future__ import annotations

import numpy as np

from decoders.audit.samples import EngineSamples
from decoders.audit.statistical import audit_sampler
from decoders.engine_results import EngineModelAudit
from decoders.engines.base import END, EngineRun, EngineSampling, capability
from decoders.sampling import Sampling
from decoders.zoo import load_named

__all__ = ["numeric_tv", "check_model_law", "against_model", "model_lines"]


def numeric_tv(engine_logits: np.ndarray, our_logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Per position, the total variation between the engine's and our model's laws at ``temperature`` from
    their logits ``[S, V]``: what the numeric difference alone (quantized kernels against float32) costs."""

    def softmax(logits):
        scaled = logits / temperature
        weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)

    return 0.5 * np.abs(softmax(engine_logits) - softmax(our_logits)).sum(axis=-1)


def check_model_law(sampling: EngineSampling) -> None:
    """Refuse sampling parameters under which our sampler's law is not llama.cpp's (one line at the CLI)."""
    if sampling.min_p or sampling.repeat_penalty != 1.0 or (sampling.top_p < 1.0 and sampling.temperature != 1.0):
        raise ValueError(
            "--against model needs a law our sampler computes in llama.cpp's order: no --min-p, no "
            "--repeat-penalty, and --top-p only at temperature 1 (llama.cpp truncates before the "
            "temperature, we after); compare with --against plain instead"
        )


def _engine_logits(engine, sequence: list, start: int):
    """The engine's logits ``[len(sequence) - 1 - start, V]`` after each of ``sequence[:start + 1]``,
    ``sequence[:start + 2]``, ...: by its ``all_logits`` where it has it, else one ``logits_after`` a position."""
    if capability(engine, "all_logits"):
        return engine.all_logits([sequence])[start : len(sequence) - 1]
    return np.stack([engine.logits_after([sequence[:end]]) for end in range(start + 1, len(sequence))])


def against_model(
    engine, prompt: str, run: EngineRun, sampling: EngineSampling, *, level: float, seed: int
) -> EngineModelAudit:
    """The engine's samples (ids, in-process) audited against our model of the same GGUF file by the
    statistical audit (docs/theory.md §8), beside what the numeric difference alone costs: the total
    variation between the two laws along the prompt's last position and the engine's greedy continuation."""
    import torch

    missing = [name for name in ("model_path", "tokenize") if capability(engine, name) is None] + [
        "all_logits or logits_after"
    ] * (capability(engine, "all_logits") is None and capability(engine, "logits_after") is None)
    if missing:
        raise ValueError(
            f"--against model needs an engine with {', '.join(missing)} (docs/engines.md §2), as the "
            f"in-process engine (--engine llama-cpp) has; {engine.name} has not"
        )
    check_model_law(sampling)
    if any(END in row for row in run.rows):
        raise ValueError("a sample ended (end of sequence) before the horizon: lower --horizon for --against model")
    target, _ = load_named(str(engine.model_path), role="target", timed=False)
    ids = engine.tokenize(prompt)
    horizon = len(run.rows[0])
    greedy = engine.generate(prompt, 1, horizon, EngineSampling(0.0)).rows[0]
    sequence = list(ids) + [token for token in greedy if token != END]
    with torch.no_grad():
        ours = target.forward(torch.tensor([sequence]), target.new_state(1, len(sequence)))[0].double().numpy()
    tv = numeric_tv(
        _engine_logits(engine, sequence, len(ids) - 1),
        ours[len(ids) - 1 : len(sequence) - 1],
        max(sampling.temperature, 1e-6),
    )
    tokens = torch.tensor([list(row) for row in run.rows], dtype=torch.int64)
    ours_sampling = Sampling(
        sampling.temperature, sampling.top_k or None, None if sampling.top_p >= 1.0 else sampling.top_p
    )
    report = audit_sampler(
        EngineSamples(tuple(ids), tokens).sampler(),
        target,
        list(ids),
        ours_sampling,
        n=len(tokens),
        horizon=horizon,
        seed=seed,
        level=level,
    )
    return EngineModelAudit(
        numeric_tv=tv.tolist(),
        audit=report.as_dict(),
        passed=report.passed,
        detectable_tv=report.as_dict().get("detectable_tv"),
    )


def model_lines(found: EngineModelAudit, described: str, model: str, sampling: EngineSampling) -> list:
    """The printed lines of ``against_model``'s result."""
    tv = found.numeric_tv
    return [
        f"audit: {described} against our float32 model of {model}; {sampling.describe()}",
        f"numeric difference alone (llama.cpp's quantized kernels against our float32), total variation per "
        f"position along its greedy text: median {float(np.median(tv)):.4f}, max {max(tv):.4f}",
        f"statistical audit: p = {found.audit['p_value']:.3g}: {'PASS' if found.passed else 'FAIL'}",
    ]
