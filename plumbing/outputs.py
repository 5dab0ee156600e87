"""The one writer of every file the project produces: JSON, Markdown, CSV, PNG, PDF, model files, manifests.

Every write goes to a temporary file in the destination's directory and is renamed over the destination,
so a reader (or an interrupted run) only ever sees the complete old file or the complete new one. A run
that writes several files that belong together (a report, a set of figures) writes them into a staged
sibling directory that replaces the destination in one exchange (``staged_directory``). JSON is strict
(no NaN or Infinity) and carries its provenance: the command, the package versions, the host.
Standard library only, so that every layer can use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from plumbing.timing import host

__all__ = [
    "write_atomically",
    "write_text",
    "write_json",
    "strict_loads",
    "provenance",
    "without_provenance",
    "staged_directory",
    "check_writable",
]

PARTIAL = ".partial"  # suffix of temporary files and staging directories (ignored by git)


def check_writable(path, *, directory: bool = False) -> Path:
    """``path`` as a ``Path`` if a file (or, with ``directory``, a directory) can be written there; a
    ``ValueError`` naming it otherwise. Checked before long work starts."""
    path = Path(path)
    kind = "directory" if directory else "file"
    if path.exists() and path.is_dir() != directory:
        raise ValueError(f"output {kind} {str(path)!r} exists and is not a {kind}")
    parent = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("."))
    try:  # a real probe: permission bits say nothing for root or for /proc-like file systems
        if not parent.is_dir():
            raise NotADirectoryError
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError:
        raise ValueError(
            f"output {kind} {str(path)!r} cannot be written: {str(parent)!r} is not a writable directory"
        ) from None
    return path


def write_atomically(path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary path)`` and rename the result over ``path``; on any failure (Ctrl-C included)
    the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL, dir=path.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path


def write_text(path, text: str) -> Path:
    """``text`` (UTF-8) into ``path``, atomically."""
    return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def provenance() -> dict:
    """Where a result comes from: when it was made, the package versions and the host."""
    return {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **host()}


def write_json(path, document: dict, *, command: str, indent: int = 1) -> Path:
    """``document`` as strict JSON (NaN and Infinity refused) with the ``command`` that made it and its
    ``provenance``, atomically."""
    text = json.dumps(dict(document, command=command, provenance=provenance()), indent=indent, allow_nan=False)
    return write_text(path, text + "\n")


def without_provenance(saved: dict) -> dict:
    """A written document without what ``write_json`` put beside it (``command``, ``provenance``): the document's own
    keys, for its type's ``from_dict``."""
    return {key: value for key, value in saved.items() if key not in ("command", "provenance")}


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def strict_loads(text: str):
    """``json.loads`` refusing NaN, Infinity and -Infinity, which Python's parser accepts by default: how the
    project reads JSON back, so that what it never writes it never reads either."""
    return json.loads(text, parse_constant=_refuse_constant)


@contextlib.contextmanager
def staged_directory(out, *, keep_existing: bool = False) -> Iterator[Path]:
    """Yield a fresh directory beside ``out`` to write a set of outputs into. When the block succeeds it
    replaces ``out`` in one exchange; when it fails or is interrupted it is removed and ``out`` is left as
    it was. With ``keep_existing``, the files already in ``out`` are copied in first, so that a run that
    rewrites some of them leaves the others."""
    out = check_writable(out, directory=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=PARTIAL, dir=out.parent))
    try:
        if keep_existing and out.is_dir():
            shutil.copytree(out, stage, dirs_exist_ok=True)
        yield stage
        _replace_directory(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # gone after a successful exchange: it holds the old output


def _replace_directory(stage: Path, out: Path) -> None:
    """Put ``stage`` where ``out`` is. With an existing ``out``, the two are exchanged in one system call
    where Linux offers it (``renameat2``), else by two renames with Ctrl-C held back in between; the old
    output ends up at ``stage``, which the caller removes."""
    os.chmod(stage, 0o777 & ~_umask())  # mkdtemp makes 0700
    if not out.exists():
        os.rename(stage, out)
        return
    if _exchange(stage, out):
        return
    with _interrupts_held():
        aside = stage.with_name(stage.name + ".old")
        os.rename(out, aside)
        os.rename(stage, out)
        os.rename(aside, stage)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically with ``renameat2(RENAME_EXCHANGE)``; False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Defer SIGINT (Ctrl-C) until the block ends (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *args: received.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])
