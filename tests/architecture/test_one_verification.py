"""One definition of each verification rule (issue 42): the residual (r - q)+ and K-SEQ's scale
(1 - (1 - beta)^k) / beta are written in ``decoders/verification.py`` for the decoders (torch) and in the theory
for the theory and the simulators (numpy: ``spectheory.acceptance.excess``, ``spectheory.multidraft``, the
decoders' independent oracle), nowhere else. A grep over the source, with a control that it sees a copy."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "paper_figs")
RULES = {
    "torch residual": (re.compile(r"\([^()]*-[^()]*\)\.clamp_?\(min=0\.0\)"), {"decoders/verification.py"}),
    "numpy residual": (
        re.compile(r"np\.maximum\((0\.0,[^()]*-|[^()]*-[^()]*,\s*0\.0\))"),
        {"spectheory/acceptance.py"},
    ),
    "K-SEQ scale": (
        re.compile(r"1(\.0)?\s*-\s*\(1(\.0)?\s*-\s*beta\)\s*\*\*\s*k"),
        {"decoders/verification.py", "spectheory/multidraft.py"},
    ),
}


def copies(text: str, path: str) -> list:
    """The rules written in ``text`` (of ``path``) outside their modules."""
    return [f"{path}: {name}" for name, (pattern, homes) in RULES.items() if path not in homes and pattern.search(text)]


def test_verification_rules_against_their_one_module():
    found = [
        entry
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for entry in copies(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_grep_catches_a_copy():
    planted = (
        "weights = (p_next - q_next).clamp(min=0.0)\nc = (1 - (1 - beta) ** k) / beta\nr = np.maximum(p - q, 0.0)\n"
    )
    assert copies(planted, "decoders/speculative.py") == [
        "decoders/speculative.py: torch residual",
        "decoders/speculative.py: numpy residual",
        "decoders/speculative.py: K-SEQ scale",
    ]
