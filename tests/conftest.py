"""Hypothesis profiles: CI (CI=true) runs derandomised, so a failure there reproduces exactly. Every JSON file a
test writes under pytest's temporary directories is parsed strictly when the session ends (no NaN/Infinity).

The suite runs in two pytest-xdist workers (pyproject.toml) of one torch thread each, and so do the commands the
tests start: torch's OpenMP threads spin-wait, and beside other busy processes two of them per worker made the
suite several times slower (docs/project.md). OMP_NUM_THREADS is set before anything imports torch; a value the
caller set is kept."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402 (after the thread setting, which must precede torch's import)
from command import not_strict_json  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def every_json_written_is_strict(tmp_path_factory):
    """After the whole session: every JSON file the tests wrote parses strictly (the project's JSON contract)."""
    yield
    refused = not_strict_json(tmp_path_factory.getbasetemp())
    assert not refused, "JSON written by the tests is not strict:\n" + "\n".join(refused)
