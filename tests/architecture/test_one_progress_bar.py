"""One progress bar (issue 56): ``decoders.progress.progress_bar`` is the only place that builds a tqdm bar, so every
long piece of work shows it the same way (after a second, cleared when done, on a terminal unless told). A grep over
the packages, with a control that it sees a bar built elsewhere."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spectheory", "sims", "decoders", "paper_figs")
BAR = re.compile(r"(?<![\w.])tqdm\(")


def bars(text: str) -> int:
    return len(BAR.findall(text))


def test_only_progress_bar_builds_a_tqdm_bar():
    found = {
        str(path.relative_to(ROOT)): bars(path.read_text())
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    assert {path for path, count in found.items() if count} == {"decoders/progress.py"}


def test_the_grep_sees_a_bar_built_elsewhere():
    assert bars("with tqdm(total=n, desc='x') as bar:\n") == 1
    assert bars("with progress_bar(None, total=n) as bar:\nlogging.tqdm(x)\n") == 0
