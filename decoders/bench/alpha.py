"""Measured acceptance rate alpha of a target/draft pair (Leviathan et al.'s Table 3), two ways.

* Along text: both models read the same held-out windows (teacher forcing); at every position
  beta = sum_x min(p(x), q(x)) of the adjusted distributions (docs/theory.md §2), and alpha is its mean. A
  draft that proposes nothing at a position (the copy draft without a match) counts beta = 0 there.
* From acceptance counts: speculative runs from held-out prompts; every verified draft token is one
  Bernoulli(alpha) trial under the i.i.d. assumption, so alpha = accepted / (accepted + rejected).

The first estimates alpha on the corpus's text, the second on the target's own continuations: where
they differ, the draft matches the target better on one than on the other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.inputs import Pair
from decoders.bench.prompts import text_windows
from decoders.bench.rows import AlphaEstimate, EngineWords, LenienceRow
from decoders.policies import acceptance_bin_sums, calibration_from_sums, seen_law
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.results import DecodeStats
from decoders.sampling import Sampling, adjusted_probs, history_of, processed_logits, proposes
from decoders.speculative import SpeculativeConfig, generate_speculative
from plumbing.validation import as_int, as_lenience
from spectheory.metrics import EngineCounts

__all__ = [
    "MAX_PROMPTS",
    "MAX_WINDOWS",
    "WINDOW",
    "SKIP",
    "window_shape",
    "check_windows",
    "betas_along_text",
    "accepted_and_verified",
    "engine_metrics",
    "estimate_alpha",
    "alpha_on_prompts",
    "alpha_markdown",
    "LENIENCES",
    "AlongText",
    "CountedRuns",
    "alpha_under_lenience",
    "acceptance_calibration",
]

#: Leviathan et al.'s Table 5 leniences.
LENIENCES = (1.0, 0.5, 0.3, 0.1)
ALONG_TEXT_CELLS = 1 << 23  # windows x length x V of one batch along text: ~32 MB per float32 tensor, whatever V is


MAX_PROMPTS = 1024  # each decoded in full per run: 1024 prompts x 128 tokens is already an hour on 2 CPU cores
WINDOW = 256  # tokens per held-out window for alpha along text (the shipped target's context)
SKIP = 32  # the first positions of a window, whose contexts are short, are not counted
MAX_WINDOWS = 10_000  # hours of teacher-forced passes on 2 CPU cores; the held-out text has ~3,500 disjoint windows


def check_windows(windows: int) -> int:
    """Held-out windows: at least 2 (standard errors are over windows), at most ``MAX_WINDOWS``."""
    return as_int("windows", windows, low=2, high=MAX_WINDOWS)


def window_shape(along: AlongText, *models) -> AlongText:
    """``along`` with the held-out windows' ``length`` and ``skip`` for ``models``: ``WINDOW`` tokens, or the shortest
    context among them, of which the first ``SKIP`` (at most half) are not counted."""
    length = min([WINDOW] + [m.max_context for m in models if getattr(m, "max_context", None)])
    return replace(along, length=length, skip=min(SKIP, length // 2))


@torch.no_grad()
def adjusted_along_text(target, draft, windows: torch.Tensor, sampling: Sampling, skip: int) -> tuple:
    """(p, q, proposed, seen) at each position of ``windows`` ``[B, L]`` after the first ``skip``: the adjusted
    distributions ``[B, L - skip, V]``, where the draft proposes a token ``[B, L - skip]``, and the law a
    draft-length policy reads there (``seen_law``: q, or at T = 0 the draft's softmax) ``[B, L - skip, V]``."""
    windows = windows.to(target.device)
    history = history_of(sampling, windows[:, :skip].tolist(), target)  # the first ``skip`` tokens are the prompt
    history = None if history is None else history.along(windows[:, skip:-1])
    p = adjusted_probs(
        target.forward(windows, target.new_state(len(windows), windows.shape[1]))[:, skip - 1 : -1],
        sampling,
        history=history,
    )
    draft_logits = draft.forward(windows, draft.new_state(len(windows), windows.shape[1]))[
        :, skip - 1 : -1
    ]  # [B, L - skip, V]
    proposed = proposes(draft_logits)
    logits = torch.where(proposed[..., None], draft_logits, torch.zeros_like(draft_logits))
    q = adjusted_probs(processed_logits(logits, sampling, history), sampling.warping)  # the decoders' q
    return p, q, proposed, seen_law(logits, q, sampling.greedy)


def acceptance_calibration(target, draft, windows: torch.Tensor, sampling: Sampling, *, skip: int, bins: int = 20):
    """The rejection-risk policy's acceptance predictor (``decoders.policies.calibrate_acceptance``) fitted on the
    adjusted laws at every proposing position of ``windows`` ``[W, L]`` after the first ``skip``, in batches that
    keep memory bounded for any vocabulary."""
    batch_size = max(1, ALONG_TEXT_CELLS // (windows.shape[1] * target.vocab_size))
    sums = 0
    for start in range(0, len(windows), batch_size):
        rows = windows[start : start + batch_size]
        p, q, proposed, seen = adjusted_along_text(target, draft, rows, sampling, skip)
        sums = sums + acceptance_bin_sums(p[proposed], q[proposed], seen[proposed], bins)
    return calibration_from_sums(sums)


def _betas(p: torch.Tensor, q: torch.Tensor, proposed: torch.Tensor, lenience: float) -> torch.Tensor:
    """beta = sum_x min(p(x) / l, q(x)) (docs/theory.md §2; ``spectheory.acceptance``), 0 where nothing is proposed."""
    betas = torch.minimum(p / float(as_lenience(lenience)), q).sum(dim=-1)
    return torch.where(proposed, betas, torch.zeros_like(betas))


def betas_along_text(
    target, draft, windows: torch.Tensor, sampling: Sampling, *, skip: int, lenience: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """beta at each position of ``windows`` ``[B, L]`` after the first ``skip`` (contexts of >= ``skip`` tokens):
    ``(betas [B, L - skip], proposed [B, L - skip])``; beta is 0 where the draft proposes nothing. With
    lenience l, beta = sum_x min(p(x) / l, q(x))."""
    p, q, proposed, _ = adjusted_along_text(target, draft, windows, sampling, skip)
    return _betas(p, q, proposed, lenience), proposed


def _pooled_betas(
    pair: Pair, text: torch.Tensor, sampling: Sampling, *, skip: int, batch_size: int, leniences=(1.0,)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Betas over ``text`` ``[W, L]`` in batches, one forward pass per batch for every lenience:
    (betas [len(leniences), W, L - skip] float64, proposed [W, L - skip])."""
    target, draft = pair.target, pair.draft
    parts = []
    batch_size = max(1, min(batch_size, ALONG_TEXT_CELLS // (text.shape[1] * target.vocab_size)))  # memory, any V
    for i in range(0, len(text), batch_size):
        p, q, proposed, _ = adjusted_along_text(target, draft, text[i : i + batch_size], sampling, skip)
        parts.append((torch.stack([_betas(p, q, proposed, lenience) for lenience in leniences]), proposed))
    return torch.cat([b for b, _ in parts], dim=1).double(), torch.cat([p for _, p in parts])


def accepted_and_verified(stats: DecodeStats, gamma: int) -> tuple[int, int]:
    """(accepted, verified) draft tokens of a run: an iteration short of gamma ended in one rejection."""
    counts = [n for row in stats.accepted_per_iteration for n in row]
    accepted = sum(counts)
    return accepted, accepted + sum(1 for n in counts if n < gamma)


def engine_metrics(runs: list, gamma: int) -> EngineWords:
    """The engines' acceptance numbers of ``runs`` (``spectheory.metrics.EngineCounts`` of their rounds,
    docs/metrics.md): accepted over drafted tokens, tokens per round and the unconditional per-position rates;
    None where nothing was drafted."""
    accepted = [n for run in runs for step in run.stats.accepted_per_iteration for n in step]
    drafted = sum(n for run in runs for step in run.stats.proposed_per_iteration for n in step)
    if not drafted:
        return EngineWords()
    counts = EngineCounts(
        "ours", len(accepted), drafted, sum(accepted), tuple(sum(n > i for n in accepted) for i in range(gamma))
    )
    return EngineWords(
        acceptance_rate=counts.acceptance_rate,
        mean_acceptance_length=counts.mean_acceptance_length,
        per_position_acceptance_rate=list(counts.per_position_acceptance_rate),
    )


def estimate_alpha(pair: Pair, name: str, stream: np.ndarray, along: AlongText, counted: CountedRuns) -> AlphaEstimate:
    """Both estimates of alpha for ``pair``'s draft (``name``) on held-out ``stream`` at ``along.temperature``:
    along the text as ``along`` says, and from the acceptance counts of the runs ``counted`` says
    (``along.batch_size`` prompts per run)."""
    target, draft, temperature, seed, batch_size = (
        pair.target,
        pair.draft,
        along.temperature,
        along.seed,
        along.batch_size,
    )
    windows, gamma, prompts, max_new_tokens = along.windows, counted.gamma, counted.prompts, counted.max_new_tokens
    sampling = Sampling(temperature)
    check_windows(windows)
    as_int("prompts", prompts, low=1, high=MAX_PROMPTS)
    betas, proposed = _pooled_betas(
        pair, text_windows(stream, windows, along.length, seed), sampling, skip=along.skip, batch_size=batch_size
    )
    betas = betas[0]  # [W, L - skip] at lenience 1
    per_window = betas.mean(dim=1)
    starts = text_windows(stream, prompts, counted.prompt_length, seed + 1)
    runs = [
        generate_speculative(
            target,
            draft,
            starts[i : i + batch_size],
            max_new_tokens=max_new_tokens,
            config=SpeculativeConfig(gamma, sampling),
            randomness=seeded(seed + i, target.device),
        )
        for i in range(0, prompts, batch_size)
    ]
    accepted, verified = (sum(values) for values in zip(*(accepted_and_verified(run.stats, gamma) for run in runs)))
    generated = sum(len(row) for run in runs for row in run.tokens)
    alpha_counts = accepted / verified if verified else float("nan")
    return AlphaEstimate(
        draft=name,
        temperature=temperature,
        alpha_text=float(betas.mean()),
        alpha_text_standard_error=float(per_window.std() / math.sqrt(windows)),
        text_positions=betas.numel(),
        proposal_coverage=float(proposed.double().mean()),
        alpha_counts=alpha_counts,
        alpha_counts_standard_error=math.sqrt(alpha_counts * (1 - alpha_counts) / verified)
        if verified
        else float("nan"),
        accepted_tokens=accepted,
        verified_tokens=verified,
        gamma=gamma,
        generated_tokens=generated,
        **asdict(engine_metrics(runs, gamma)),
    )


def alpha_on_prompts(pair: Pair, name: str, prompts: list, temperature: float, counted: CountedRuns) -> AlphaEstimate:
    """Both estimates of alpha on ``prompts`` (token lists; Spec-Bench's questions): along the text decoding
    walks, each prompt's continuation by the target (greedy at T = 0, sampled and seeded per prompt otherwise;
    standard error over the two or more prompts), and from the acceptance counts of speculative runs from each, at
    ``counted``'s gamma, new tokens and seed."""
    as_int("prompts", len(prompts), low=2, high=MAX_PROMPTS)
    target, draft, gamma, max_new_tokens, seed = (
        pair.target,
        pair.draft,
        counted.gamma,
        counted.max_new_tokens,
        counted.seed,
    )
    sampling, betas, proposed, runs = Sampling(temperature), [], [], []
    for i, prompt in enumerate(prompts):
        rows = torch.tensor([prompt], device=target.device)  # [1, L]
        text = generate_autoregressive(
            target, rows, max_new_tokens=max_new_tokens, sampling=sampling, randomness=seeded(seed + i, target.device)
        ).tokens[0]
        along, drafted = _pooled_betas(
            pair,
            torch.tensor([list(prompt) + list(text)], device=target.device),
            sampling,
            skip=len(prompt),
            batch_size=1,
        )
        betas.append(along[0, 0]), proposed.append(drafted[0])
        runs.append(
            generate_speculative(
                target,
                draft,
                rows,
                max_new_tokens=max_new_tokens,
                config=SpeculativeConfig(gamma, sampling),
                randomness=seeded(seed + i, target.device),
            )
        )
    per_prompt = torch.stack([b.mean() for b in betas])
    accepted, verified = (sum(values) for values in zip(*(accepted_and_verified(run.stats, gamma) for run in runs)))
    alpha_counts = accepted / verified if verified else float("nan")
    return AlphaEstimate(
        draft=name,
        temperature=temperature,
        alpha_text=float(torch.cat(betas).mean()),
        alpha_text_standard_error=float(per_prompt.std() / math.sqrt(len(prompts))),
        text_positions=sum(b.numel() for b in betas),
        proposal_coverage=float(torch.cat(proposed).double().mean()),
        alpha_counts=alpha_counts,
        alpha_counts_standard_error=math.sqrt(alpha_counts * (1 - alpha_counts) / verified)
        if verified
        else float("nan"),
        accepted_tokens=accepted,
        verified_tokens=verified,
        gamma=gamma,
        generated_tokens=sum(len(row) for run in runs for row in run.tokens),
        **asdict(engine_metrics(runs, gamma)),
    )


def alpha_markdown(estimates: list[AlphaEstimate]) -> str:
    """The Table 3 analogue: one row per (draft, temperature)."""
    lines = [
        "| draft | T | alpha (held-out text) | alpha (acceptance counts) | verified draft tokens | coverage |",
        "|---|---|---|---|---|---|",
    ]
    for e in estimates:
        lines.append(
            f"| {e.draft} | {e.temperature:g} | {e.alpha_text:.3f} ± {e.alpha_text_standard_error:.3f} | "
            f"{e.alpha_counts:.3f} ± {e.alpha_counts_standard_error:.3f} | {e.verified_tokens} | "
            f"{e.proposal_coverage:.2f} |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class AlongText:
    """How alpha is measured along held-out text (docs/theory.md §2): at ``temperature``, over ``windows`` seeded
    windows of ``length`` tokens whose first ``skip`` positions are not counted (``window_shape`` gives both for a
    pair), ``batch_size`` windows per forward pass."""

    temperature: float = 1.0
    windows: int = 32
    length: int = WINDOW
    skip: int = SKIP
    batch_size: int = 8
    seed: int = 0


@dataclass(frozen=True)
class CountedRuns:
    """How alpha is counted from speculative runs: at ``gamma``, from ``prompts`` held-out prompts of
    ``prompt_length`` tokens (Spec-Bench's questions bring their own), ``max_new_tokens`` each, seeded from
    ``seed``."""

    gamma: int = 4
    prompts: int = 16
    prompt_length: int = 64
    max_new_tokens: int = 128
    seed: int = 0


def alpha_under_lenience(
    target, drafts: dict, stream: np.ndarray, leniences=LENIENCES, along: AlongText = AlongText(), *, progress=None
) -> list[LenienceRow]:
    """The Table 5 analogue: alpha along held-out text for each (draft name -> model) of ``drafts`` at each
    lenience, a ``LenienceRow`` per draft, standard errors over windows."""
    temperature, windows = along.temperature, check_windows(along.windows)
    text, sampling = text_windows(stream, windows, along.length, along.seed), Sampling(temperature)
    rows = []
    for name, draft in progress_bar(progress, drafts.items(), desc="lenience", unit="draft"):
        per_window = _pooled_betas(
            Pair(target, draft), text, sampling, skip=along.skip, batch_size=along.batch_size, leniences=leniences
        )[0].mean(dim=2)  # [l, W]
        errors = per_window.std(dim=1) / math.sqrt(windows) if windows > 1 else torch.full((len(leniences),), math.nan)
        rows.append(
            LenienceRow(
                draft=name,
                temperature=temperature,
                leniences=[float(l) for l in leniences],
                alpha=per_window.mean(dim=1).tolist(),
                standard_error=errors.tolist(),
            )
        )
    return rows
