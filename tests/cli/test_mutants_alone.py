"""`spectheory audit --mutant NAME` alone, over the CLI's own list (every chain and tree mutant its help names):
each exits 1, and the reference decoder under the very flags the name brings (``mutant_presets``) exits 0, so
each catch is the bug's (docs/decoders.md, `--mutant NAME`). The exact audits are deterministic; the tree mutants'
statistical audits use the CLI's fixed seed 0 (a correct sampler fails with probability 0.01, the level).

By default the two names that once passed alone for want of their own flags (the prefix DP for a dp bug, order0
and close for a Mirostat bug at the bonus); the rest behind slow: tests/decoders catches every mutant by its
method beside the reference (docs/project.md, "What CI runs"), and this path through the CLI is the same for each
(15 minutes for all 42 and their references on 2 busy cores)."""

import pytest

from cli import main
from cli.audit import mutant_presets
from decoders.audit.mutants import MUTANTS
from decoders.audit.tree_mutants import TREE_MUTANTS

BY_DEFAULT = ("bonus-from-last-draft-position", "mirostat-bonus-moved-twice")
NAMES = [m.name for m in MUTANTS] + [m.name for m in TREE_MUTANTS]


def _cases() -> list:
    return [name if name in BY_DEFAULT else pytest.param(name, marks=pytest.mark.slow) for name in NAMES]


@pytest.mark.parametrize("name", _cases())
def test_mutant_alone_against_the_reference_under_its_flags(name, capsys):
    assert main(["audit", "--mutant", name]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["audit", *mutant_presets(["--mutant", name])]) == 0
    assert "PASS" in capsys.readouterr().out


def test_samples_asked_for_against_the_exact_default():
    """``--n`` asks for the statistical audit: the presets then name no exact method."""
    assert mutant_presets(["--mutant", "one-uniform"])[-2:] == ["--exact", "dp"]
    assert "--exact" not in mutant_presets(["--mutant", "one-uniform", "--n", "5000"])
