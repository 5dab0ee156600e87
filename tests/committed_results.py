"""The committed results (results/**/*.json) as the row formats' tests read them: every dict held in a list under
a given key, anywhere in any file."""

import json
from functools import cache
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


@cache
def _documents() -> tuple:
    return tuple(json.loads(path.read_text()) for path in sorted(RESULTS.rglob("*.json")))


def committed_rows(key: str, needs: frozenset = frozenset()) -> list:
    """Every dict with at least the keys ``needs`` in a list under ``key`` in the committed results."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for name, child in value.items():
                if name == key and isinstance(child, list):
                    found.extend(row for row in child if isinstance(row, dict) and needs <= set(row))
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    for document in _documents():
        walk(document)
    return found


def misread(kind, rows: list) -> list:
    """The rows that ``kind.from_dict`` does not read back with their own keys and values (``as_dict`` may add the
    fields a row's vintage did not have)."""
    wrong = []
    for row in rows:
        written = kind.from_dict(row).as_dict()
        if {key: written.get(key) for key in row} != row:
            wrong.append(row)
    return wrong
