"""Running ``spectheory`` in-process for the CLI tests, and the scan that holds every test's JSON to strict JSON."""

from pathlib import Path

from spectheory.cli import main
from spectheory.outputs import strict_loads


def not_strict_json(root: Path) -> list[str]:
    """The ``*.json`` files under ``root`` that a strict parser refuses, each with the reason."""
    refused = []
    for path in sorted(Path(root).rglob("*.json")):
        try:
            strict_loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            refused.append(f"{path}: {error}")
    return refused


def run(capsys, *argv):
    """(exit status, stdout, stderr) of ``spectheory *argv``; with ``--json`` a successful run's stdout must be
    strict JSON."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    if status == 0 and "--json" in argv:
        strict_loads(out)
    return status, out, err
