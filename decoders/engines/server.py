"""A server process the toolkit starts and owns (llama-server, vLLM's OpenAI server): on 127.0.0.1 at a free port,
ready when constructed (its health answered before any request), stopped on ``stop()``, at exit, and, on Linux,
when the thread that started it ends however it ends (a signal, Ctrl-C): no server outlives the toolkit
(docs/engines.md)."""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable

from decoders.engines.openai import post_json

__all__ = ["ServerProcess", "ServerPool", "free_port", "group_alive", "available_memory", "check_free_memory"]


def _die_with_parent() -> None:
    """In the started server, on Linux: SIGTERM when the thread that started it ends, however it ends (``atexit``
    does not run when the toolkit is killed by a signal, and an orphaned server would hold the cores)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """``command`` + ``--host 127.0.0.1 --port P``, started with ``environment``, its output to ``log`` (else
    discarded); ready once ``healthy()`` holds, within ``start_seconds``; ``stop()`` ends it (SIGTERM, then SIGKILL
    after 10 s). ``name`` names it in errors, ``described`` says what it was started with."""

    def __init__(
        self,
        command: list,
        *,
        name: str,
        described: str,
        environment: dict | None = None,
        log: Path | None = None,
        start_seconds: float = 120.0,
    ) -> None:
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log_path = log
        self._log = open(log, "ab") if log else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [*map(str, command), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log,
            stderr=self._log,
            env=environment,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        atexit.register(self.stop)
        self._wait_ready(described, start_seconds)

    def _signal(self, number: int) -> None:
        try:
            os.killpg(self.process.pid, number)
        except (ProcessLookupError, PermissionError):
            pass

    def healthy(self) -> bool:
        """Whether the server answers its health check (here: GET /health answers 200)."""
        with urllib.request.urlopen(self.url + "/health", timeout=10) as answer:
            return answer.status == 200

    def _wait_ready(self, described: str, start_seconds: float) -> None:
        deadline = time.monotonic() + start_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                where = f"; its log is {self._log_path}" if self._log_path else ""
                raise ValueError(
                    f"{self.name} exited with status {self.process.returncode} at start ({described}){where}"
                )
            try:
                if self.healthy():
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        self.stop()
        raise ValueError(f"{self.name} did not become ready within {start_seconds:g} s ({described})")

    def get_text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:
            return answer.read().decode("utf-8")

    def get(self, path: str) -> dict:
        return json.loads(self.get_text(path))

    def post(self, path: str, body: dict, timeout: float = 600.0) -> dict:
        return post_json(self.url + path, body, timeout)

    def stop(self) -> None:
        """SIGTERM to the server's process group (its own session: a server's helpers, such as vLLM's engine core
        and workers, go with it), SIGKILL to the group after 10 s."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        self._signal(signal.SIGKILL)  # whatever of the group outlived its leader
        deadline = time.monotonic() + 10.0  # SIGKILL lands when the kernel next runs them: on busy cores, not at once
        while group_alive(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._log is not subprocess.DEVNULL and not self._log.closed:
            self._log.close()


def group_alive(group: int) -> bool:
    """Whether any process of process group ``group`` is still alive (a zombie is gone but for its exit status);
    False where /proc cannot say."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:  # stat after the name: state, ppid, pgrp
            return True
    return False


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Bytes the kernel says can be given to a new process (``MemAvailable``); None where it cannot say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_free_memory(needed: int, what: str, available: int | None = None) -> None:
    """A one-line error where ``what`` would need about ``needed`` bytes and fewer are available (``available``, else
    ``available_memory()``): checked before a server starts, not found out by the kernel's OOM killer."""
    available = available_memory() if available is None else available
    if available is not None and available < needed:
        raise ValueError(
            f"not enough free memory to start {what}: it needs about {needed / 2**30:.1f} GiB and "
            f"{available / 2**30:.1f} GiB are available (stop other servers, or give it less KV cache)"
        )


class ServerPool:
    """The servers one engine starts (docs/engines.md §2): alive only while the work that asked for them lasts, at
    most the plain one (key 0) and one other (a speculating server at its draft length, or ``"draft"``, a draft
    model's own) at once: asking for another stops that other first. Before each start the free memory is checked
    against ``needed(key)`` bytes; ``start(key)`` starts one, ``name`` names them in errors."""

    def __init__(self, start: Callable, needed: Callable, name: str) -> None:
        self._start, self._needed, self.name = start, needed, name
        self._servers: dict = {}

    def get(self, key):
        """The server for ``key``, started (after the other non-plain one is stopped) where none is alive."""
        if key not in self._servers:
            for other in [k for k in self._servers if k != 0 and key != 0]:  # the plain one stops no other
                self._servers.pop(other).stop()
            role = "plain" if key == 0 else "the draft model's" if key == "draft" else f"speculating at {key}"
            check_free_memory(self._needed(key), f"{self.name} ({role})")
            self._servers[key] = self._start(key)
        return self._servers[key]

    def alive(self) -> dict:
        """{key: server} of the servers alive now."""
        return dict(self._servers)

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
