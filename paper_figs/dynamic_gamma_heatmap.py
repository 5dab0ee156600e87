"""Gain of dynamic-gamma policies over the best fixed gamma across (alpha, c): the oracle that drafts
exactly the tokens to be accepted, a calibrated predicted-rejection threshold (SpecDec++ style) and
Hugging Face's +2/-1 schedule, simulated on synthetic contexts (``sims.policies``; values
above 1 beat the best fixed gamma)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paper_figs.style import FULL, RECOMPUTE_COMMAND, figure, plt, read_result, save
from plumbing.outputs import without_provenance, write_json
from sims.documents import PolicyGains
from sims.policies import policy_gain_document

RESULT = "policy_gains.json"
POLICIES = (("oracle", "oracle"), ("rejection", "rejection threshold"), ("heuristic", "HF +2/-1 schedule"))


def compute(results: Path, *, progress=None) -> Path:
    """The policy gain grid (15 alphas x 11 costs, 20,000 iterations; ``sims.policies.policy_gain_document``)."""

    document = policy_gain_document(progress=progress)
    return write_json(Path(results) / RESULT, document.as_dict(), command=RECOMPUTE_COMMAND)


def make(out: Path, results: Path) -> list[Path]:
    grid = PolicyGains.from_dict(without_provenance(read_result(results, RESULT)))
    alphas, cs = np.array(grid.alphas), np.array(grid.cs)
    fig, axes = figure((FULL[0], 2.5), ncols=len(POLICIES), sharey=True)
    norm = plt.matplotlib.colors.TwoSlopeNorm(vmin=0.6, vcenter=1.0, vmax=1.6)
    for ax, (key, title) in zip(axes, POLICIES):
        image = ax.pcolormesh(cs, alphas, np.array(getattr(grid, key)), cmap="RdBu_r", norm=norm, shading="nearest")
        ax.set(title=title, xlabel="draft cost ratio c")
        ax.grid(False)
    axes[0].set_ylabel("acceptance rate $\\alpha$")
    fig.colorbar(image, ax=axes, label="speedup over best fixed $\\gamma$")
    return save(fig, out, "dynamic_gamma_heatmap")


if __name__ == "__main__":
    print(*make(Path("figures"), Path("results")), sep="\n")
