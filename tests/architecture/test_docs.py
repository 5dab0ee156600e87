"""Docstrings cite the repository's own documentation: every ``docs/theory.md §N`` names a section that
exists, and nothing cites files the repository does not carry."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "paper_figs")


def _sources():
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_theory_references_against_its_sections():
    sections = set(re.findall(r"^## §(\d+) ", (ROOT / "docs" / "theory.md").read_text(), flags=re.M))
    cited = {(path.relative_to(ROOT), number) for path in _sources()
             for group in re.findall(r"docs/theory\.md (§\d+(?:, §\d+)*)", path.read_text())
             for number in re.findall(r"§(\d+)", group)}
    assert len(cited) >= 15, "the docstrings cite docs/theory.md"
    assert sorted((str(path), n) for path, n in cited if n not in sections) == []


def test_no_reference_to_documents_outside_the_repository():
    outside = [str(path.relative_to(ROOT)) for path in _sources() if re.search(r"THEORY\.md|DESIGN\.md", path.read_text())]
    assert outside == []
