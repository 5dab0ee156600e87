"""One decode loop (issue 56): the loop over active rows (until every row of an ``Output`` has finished) is written
once, ``decoders._loop.decode``, and every decoder that starts a run (``begin``, the one prologue, which makes the
``Output``) runs it with its own step. An AST walk
over the decoders, with a control that it sees a second loop."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def row_loops(source: str) -> list:
    """The ``while`` loops of ``source`` whose condition reads ``.finished`` or ``.done`` (loops over active rows)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.While)
        and any(isinstance(part, ast.Attribute) and part.attr in ("finished", "done") for part in ast.walk(node.test))
    ]


def _calls(source: str, name: str) -> bool:
    return any(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == name for node in ast.walk(ast.parse(source))
    )


def test_the_decoders_have_one_loop_over_active_rows():
    loops = {str(path.relative_to(ROOT)): row_loops(path.read_text()) for path in (ROOT / "decoders").rglob("*.py")}
    assert {path: lines for path, lines in loops.items() if lines}.keys() == {"decoders/_loop.py"}
    assert len(loops["decoders/_loop.py"]) == 1
    assert [path.name for path in (ROOT / "decoders").rglob("*.py") if _calls(path.read_text(), "Output")] == [
        "_loop.py"
    ]  # only the prologue makes an Output
    makers = [path for path in (ROOT / "decoders").rglob("*.py") if _calls(path.read_text(), "begin")]
    assert len(makers) >= 4  # autoregressive, speculative, tree, blockwise
    for path in makers:
        assert _calls(path.read_text(), "decode"), path


def test_the_loop_count_sees_a_second_loop():
    """Control: a decoder written with its own loop is counted."""
    own = "def generate(output):\n    while not output.finished:\n        pass\n"
    assert row_loops(own) == [2]
    assert not _calls(own, "decode")
