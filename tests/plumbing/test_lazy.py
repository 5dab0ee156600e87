"""The packages' public faces (plumbing.lazy; docs/project.md, "Public API"): every name a face lists is its module's
own, nothing is loaded until a name is asked for, and a name no face lists is an AttributeError."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import decoders
import decoders.audit
import decoders.audit.engines
import decoders.bench.report

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", [decoders, decoders.audit, decoders.audit.engines, decoders.bench.report])
def test_public_face_against_the_defining_modules(package):
    assert package.__all__ and sorted(dir(package)) == package.__all__
    for name in package.__all__:
        assert getattr(package, name) is getattr(importlib.import_module(package._WHERE[name]), name), name


def test_face_loads_torch_only_when_a_name_is_asked_for():
    """A fresh interpreter: ``import decoders`` (and the torch-free report document under it) loads no torch; asking
    for ``decoders.Sampling`` does (the control that the probe sees torch at all)."""
    probe = (
        "import sys, json\nimport decoders, decoders.audit, decoders.audit.engines, decoders.bench.report.document\n"
        "before = 'torch' in sys.modules\ndecoders.Sampling\nprint(json.dumps([before, 'torch' in sys.modules]))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(ran.stdout.splitlines()[-1]) == [False, True]


def test_a_name_no_face_lists_against_attribute_error():
    with pytest.raises(AttributeError, match="module 'decoders' has no attribute 'generate_speculativ'"):
        decoders.generate_speculativ  # noqa: B018
    from decoders import zoo  # a submodule still imports by name, past the face's __getattr__

    assert zoo.__name__ == "decoders.zoo"


def test_engine_registry_loads_without_torch_against_an_engine_module():
    """The engines' registry, their counters and a URL's engine import without torch (``spectheory gamma
    --from-metrics`` reads them); control: a local engine's module (vLLM's, which reads GGUF files) does load it."""
    probe = (
        "import sys, json\nimport decoders.engines, decoders.engines.counters, decoders.engines.openai\n"
        "before = 'torch' in sys.modules\nimport decoders.engines.vllm\n"
        "print(json.dumps([before, 'torch' in sys.modules]))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(ran.stdout.splitlines()[-1]) == [False, True]
