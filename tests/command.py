"""Running ``spectheory`` in-process for the CLI tests, interrupting one in a subprocess after a share of its work,
and the scan that holds every test's JSON to strict JSON."""

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from cli import main
from plumbing.outputs import strict_loads


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


def cpu_seconds(pid: int) -> float:
    """CPU seconds a running process has used (utime + stime in /proc/PID/stat): its work done, however busy
    the machine is, where wall seconds grow with the load (tests never read the wall clock)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds used so far by this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_interruptible(argv: list, **options) -> subprocess.Popen:
    """``subprocess.Popen(argv)`` with SIGINT's default action restored in the child: a runner that started the
    tests in the background of a shell without job control left SIGINT ignored, which children inherit and
    Python then keeps (a Ctrl-C test would wait for nothing)."""
    return subprocess.Popen(argv, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **options)


def interrupt_after(process: subprocess.Popen, work: float) -> None:
    """SIGINT to ``process`` once it has used ``work`` CPU seconds (or at once if it has ended)."""
    while process.poll() is None and cpu_seconds(process.pid) < work:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
