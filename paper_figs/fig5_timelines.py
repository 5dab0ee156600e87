"""Leviathan et al. Figure 5: timelines of draft and target calls producing the same tokens with
gamma = 7, gamma = 3 and autoregressive decoding (c = 0.05; time in target calls). Each speculative
iteration's accepted count is drawn i.i.d. from the truncated geometric law at alpha = 0.8 (seed 0);
labels above each verify call give the tokens it emitted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import FULL, figure, plt, save
from sims.timeline import autoregressive_timeline, speculative_timeline

ALPHA, C, TOKENS, SEED = 0.8, 0.05, 24, 0
COLORS = {"draft": "tab:orange", "target": "tab:blue"}


def accepted_counts(rng: np.random.Generator, gamma: int, tokens: int) -> np.ndarray:
    """Accepted draft tokens per iteration until ``tokens`` are emitted: min(Geometric run, gamma) each."""
    counts = []
    while sum(counts) + len(counts) < tokens:
        run = int(np.argmax(rng.random(gamma + 1) > ALPHA))  # the first rejection among gamma + 1 trials
        counts.append(min(run, gamma))
    return np.array(counts)


def make(out: Path, results: Path | None = None) -> list[Path]:
    rng = np.random.default_rng(SEED)
    lanes = [
        ("$\\gamma$ = 7", speculative_timeline(accepted_counts(rng, 7, TOKENS), 7, C)),
        ("$\\gamma$ = 3", speculative_timeline(accepted_counts(rng, 3, TOKENS), 3, C)),
        ("autoregressive", autoregressive_timeline(TOKENS)),
    ]
    fig, ax = figure((FULL[0], 2.0))
    for lane, (_label, timeline) in enumerate(lanes):
        y = len(lanes) - 1 - lane
        for model, phase, start, duration, accepted in zip(
            timeline.model, timeline.phase, timeline.start, timeline.duration, timeline.accepted
        ):
            ax.barh(y, duration, left=start, height=0.6, color=COLORS[model], edgecolor="white", linewidth=0.3)
            if phase == "verify":
                ax.text(start + duration / 2, y + 0.36, str(accepted + 1), ha="center", va="bottom", fontsize=5)
        ax.text(timeline.total_time + 0.3, y, f"{timeline.total_time:.1f}", va="center", fontsize=6)
    ax.set_yticks(range(len(lanes)), [label for label, _ in reversed(lanes)])
    ax.set(xlabel=f"time (target calls; a draft call costs c = {C})", ylim=(-0.6, len(lanes) - 0.1))
    ax.grid(axis="y", visible=False)
    handles = [plt.matplotlib.patches.Patch(color=color, label=f"{model} call") for model, color in COLORS.items()]
    ax.set_xlim(0, TOKENS * 1.08)
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
    return save(fig, out, "fig5_timelines")


if __name__ == "__main__":
    print(*make(Path("figures")), sep="\n")
