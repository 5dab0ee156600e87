"""The atomic writer against a reader's view: after a failure at any point, a file or a directory holds its
complete old contents or its complete new contents, never a mixture, a truncated file or a leftover."""

import json
import math
import os
import random
from pathlib import Path

import pytest
from command import not_strict_json

from plumbing.outputs import check_writable, staged_directory, strict_loads, write_atomically, write_json, write_text


def _snapshot(directory):
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_write_atomically_leaves_the_old_file_after_a_failure(tmp_path):
    path = write_text(tmp_path / "a.txt", "old")

    def half_then_fail(temporary):
        temporary.write_text("new but trunc")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, half_then_fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    write_text(path, "new")
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) != 0o600  # the usual permissions


def test_write_json_is_strict_and_carries_provenance(tmp_path):
    document = json.loads(write_json(tmp_path / "r.json", {"x": 1.5}, command="spectheory test").read_text())
    assert document["x"] == 1.5 and document["command"] == "spectheory test"
    assert {"created", "versions", "host"} <= set(document["provenance"])
    assert document["provenance"]["versions"]["numpy"]
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            write_json(tmp_path / "bad.json", {"x": bad}, command="spectheory test")
    assert not (tmp_path / "bad.json").exists()


def test_strict_json_scan_against_python_parser(tmp_path):
    """The scan every test's JSON goes through (tests/conftest.py) refuses what Python's own parser accepts
    (the negative control: json.loads reads NaN and Infinity without complaint)."""
    for constant in ("NaN", "Infinity", "-Infinity"):
        (tmp_path / f"{constant}.json").write_text(f'{{"x": [1, {constant}]}}')
        assert json.loads((tmp_path / f"{constant}.json").read_text())["x"][0] == 1
        with pytest.raises(ValueError, match=f"{constant} is not JSON"):
            strict_loads(f"[{constant}]")
    (tmp_path / "fine.json").write_text('{"x": null}')
    refused = not_strict_json(tmp_path)
    assert [line.split(":")[0] for line in refused] == [
        str(tmp_path / f"{c}.json") for c in ("-Infinity", "Infinity", "NaN")
    ]
    for path in tmp_path.glob("*Inf*.json"):  # left for the session scan otherwise
        path.unlink()
    (tmp_path / "NaN.json").unlink()


def test_shipped_json_against_strict_parser():
    """Every JSON file the repository ships (results, the zoo's manifest, the report) is strict."""
    root = Path(__file__).resolve().parents[2]
    shipped = [root / "results", root / "decoders" / "models" / "weights"]
    assert sum(len(list(folder.rglob("*.json"))) for folder in shipped) >= 10
    assert [line for folder in shipped for line in not_strict_json(folder)] == []


def test_staged_directory_after_failures_at_random_points(tmp_path):
    """Ten files per run; a failure after a random number of them (seeded) leaves the old set whole."""
    out = tmp_path / "out"
    with staged_directory(out) as stage:
        for i in range(10):
            write_text(stage / f"f{i}.txt", f"old {i}")
    old = _snapshot(out)
    generator = random.Random(0)
    for _ in range(20):
        stop = generator.randrange(11)
        with pytest.raises(KeyboardInterrupt):
            with staged_directory(out) as stage:
                for i in range(10):
                    if i == stop:
                        raise KeyboardInterrupt
                    write_text(stage / f"f{i}.txt", f"new {i}")
                raise KeyboardInterrupt  # stop == 10: everything written, then interrupted before the exchange
        assert _snapshot(out) == old and [p.name for p in tmp_path.iterdir()] == ["out"]
    with staged_directory(out) as stage:
        write_text(stage / "f0.txt", "new 0")
    assert _snapshot(out) == {"f0.txt": b"new 0"} and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_staged_directory_keeps_the_files_it_does_not_rewrite(tmp_path):
    out = tmp_path / "out"
    with staged_directory(out) as stage:
        write_text(stage / "a.txt", "a")
        write_text(stage / "sub" / "b.txt", "b")
    with staged_directory(out, keep_existing=True) as stage:
        write_text(stage / "a.txt", "A")
    assert _snapshot(out) == {"a.txt": b"A", "sub/b.txt": b"b"}


def test_check_writable_names_the_path(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        check_writable(tmp_path / "file", directory=True)
    with pytest.raises(ValueError, match="exists and is not a file"):
        check_writable(tmp_path, directory=False)
    with pytest.raises(ValueError, match="is not a writable directory"):
        check_writable(tmp_path / "file" / "below.json")
    assert check_writable(tmp_path / "new" / "deeper" / "r.json") == tmp_path / "new" / "deeper" / "r.json"
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]  # the probe leaves nothing behind


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_check_writable_probes_rather_than_trusts_permission_bits():
    """/proc/x/y passed an os.access check as root, and `figs --recompute` then measured for minutes."""
    with pytest.raises(ValueError, match="'/proc' is not a writable directory"):
        check_writable("/proc/x/y", directory=True)
