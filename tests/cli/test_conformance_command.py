"""`spectheory conformance` through the CLI (docs/conformance.md) on a registered stand-in server: a clean one passes
every row (exit 0), one with a planted seed defect fails the seed row alone (exit 1), the JSON, Markdown and HTML are
written, and bad input is one line, exit 2, before any engine opens."""

import json

import pytest
from command import run
from engine_standin import DefectiveServer

from decoders.engines import ENGINE_KINDS, PER_REQUEST, EngineKind, register_engine


@pytest.fixture
def standin():
    """``standin[:DEFECT]``, registered for one test; the specs it opened, in order."""
    opened = []

    def open_standin(spec, **_):
        opened.append(spec)
        return DefectiveServer(spec.partition(":")[2] or None)

    kind = register_engine(
        EngineKind(
            "standin",
            "standin[:DEFECT]",
            lambda spec: spec.partition(":")[0] == "standin",
            open_standin,
            PER_REQUEST,
            "a conformance stand-in",
        )
    )
    yield opened
    del ENGINE_KINDS[kind.name]


def test_conformance_command_passes_a_clean_server_and_fails_a_planted_seed_defect(standin, tmp_path, capsys):
    status, out, _ = run(capsys, "conformance", "--engine", "standin", "--n", "400", "--rows", "greedy", "seeds")
    assert status == 0 and out.splitlines()[-1] == "0 of 2 rows failed", out
    files = {suffix: tmp_path / f"verdicts.{suffix}" for suffix in ("json", "md", "html")}
    status, out, _ = run(
        capsys,
        "conformance",
        "--engine",
        "standin:seed",
        "--n",
        "400",
        "--out",
        str(files["json"]),
        "--markdown",
        str(files["md"]),
        "--html",
        str(files["html"]),
    )
    assert status == 1 and out.splitlines()[-1] == "1 of 8 rows failed: seeds", out
    document = json.loads(files["json"].read_text())
    assert document["kind"] == "engine_conformance" and document["command"].startswith("spectheory conformance")
    assert [row["verdict"] for row in document["rows"]].count("FAIL") == 1
    assert "| seeds | **FAIL** |" in files["md"].read_text()
    assert "<strong>FAIL</strong>" in files["html"].read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rows", "law_t2"], "rows law_t2: no such row; the rows are greedy, logprobs, law_t1"),
        (["--level", "0.7"], "level"),
        (["--n", "1"], "n"),
        (["--against", "http://127.0.0.1:9/v1"], "--against URL names the plain server"),
    ],
)
def test_conformance_command_refuses_bad_input_before_any_engine_opens(standin, capsys, argv, message):
    status, _, err = run(capsys, "conformance", "--engine", "standin", *argv)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert standin == []
