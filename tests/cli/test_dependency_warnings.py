"""A command's normal run on the real model prints nothing of its dependencies on stderr: no FutureWarning from
transformers (the adapter passes ``cache``, the keyword of the pinned range, pyproject.toml). The command runs
with every Python warning shown (``-W default``), so a deprecation that a newer transformers adds fails here."""

import os
import subprocess
import sys

import pytest

from decoders import zoo

pytest.importorskip("gguf")
try:
    zoo.real_model_path("smollm2")
except ValueError as error:
    pytest.skip(str(error), allow_module_level=True)


def test_smollm2_audit_stderr_against_empty():
    command = [
        sys.executable,
        "-W",
        "default",
        "-m",
        "cli",
        "audit",
        "--target",
        "smollm2",
        "--draft",
        "copy",
        "--n",
        "20",
        "--horizon",
        "2",
        "--prompt-text",
        "a b a b a",
    ]
    run = subprocess.run(
        command, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONWARNINGS": "default"}
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
